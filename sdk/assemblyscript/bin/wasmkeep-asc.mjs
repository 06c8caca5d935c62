#!/usr/bin/env node
// wasmkeep-asc: compiles AssemblyScript actors into modules a WasmKeep node accepts
// (docs/abi.md, docs/sdk.md "TypeScript-like actors").
//
//   wasmkeep-asc [--asc-dir DIR] SRC.ts OUT.wasm [SRC.ts OUT.wasm ...] [-- extra asc options]
//
// Every pair is compiled in this one process, so the compiler (and Binaryen, most of its
// start-up time) loads once. The compiler is the `assemblyscript` package found in
// DIR/node_modules (scripts/asc-toolchain.sh installs the pinned one there), else the one
// the current directory's project resolves (`npm install --save-dev assemblyscript`).
//
// The options, each with its reason (keep docs/sdk.md in step):
//   --runtime minimal   the allocator plus a collector that runs only when called: the SDK
//                       calls it once after each event (actor.ts), when no object of the
//                       event is still referenced from the stack. No shadow stack, no
//                       collection in the middle of a handler.
//   --exportStart _initialize
//                       top-level code runs in the export _initialize, which the node calls
//                       once after creating the instance (docs/abi.md "Exports"), instead of a
//                       start section that would run before the node could set up the call.
//   --use abort=~lib/wasmkeep/assembly/actor/abortEvent
//                       AssemblyScript's abort (failed assertions, bounds checks, `throw`)
//                       would import env.abort, which the node refuses; the SDK's logs the
//                       message and traps, failing the event.
//   --maximumMemory 256 the module declares a 16 MiB (256-page) memory maximum, as the C++
//                       actors do (scripts/build-actor.sh); the node's
//                       actors.max_memory_bytes still caps any module.
//   -O3                 optimise for speed (Binaryen's level 3, no size shrinking).
// After compiling, each module's imports are checked against the ABI: anything not from
// "wasmkeep_v1" fails the build here, naming the AssemblyScript feature that pulled it in,
// rather than at deploy time. So is a module without the wk_on_request export.
import { existsSync, mkdirSync, readFileSync, realpathSync, symlinkSync, lstatSync, readlinkSync, unlinkSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const sdkDir = dirname(dirname(realpathSync(fileURLToPath(import.meta.url))));

export const ASC_OPTIONS = [
  "-O3",
  "--runtime", "minimal",
  "--exportStart", "_initialize",
  "--use", "abort=~lib/wasmkeep/assembly/actor/abortEvent",
  "--maximumMemory", "256",
];

// Imports that AssemblyScript's standard library adds, and what an actor uses instead.
const KNOWN_IMPORTS = {
  "env.abort": "abort (build with wasmkeep-asc, which replaces it)",
  "env.seed": "Math.random: use random() or randomBytes() from \"wasmkeep\"",
  "env.Date.now": "Date.now() or new Date(): use now() from \"wasmkeep\"",
  "env.trace": "trace(): use log.info() from \"wasmkeep\"",
  "env.console.log": "console.log: use log.info() from \"wasmkeep\"",
  "env.console.info": "console.info: use log.info() from \"wasmkeep\"",
  "env.console.warn": "console.warn: use log.warn() from \"wasmkeep\"",
  "env.console.error": "console.error: use log.error() from \"wasmkeep\"",
  "env.console.debug": "console.debug: use log.debug() from \"wasmkeep\"",
  "env.process.exit": "process.exit: return from the handler (or throw to fail the event)",
  "env.performance.now": "performance.now(): use now() from \"wasmkeep\"",
};

function usage(message) {
  if (message) process.stderr.write(`wasmkeep-asc: ${message}\n`);
  process.stderr.write("usage: wasmkeep-asc [--asc-dir DIR] SRC.ts OUT.wasm [SRC.ts OUT.wasm ...] [-- extra asc options]\n");
  process.exit(2);
}

function parseArgs(argv) {
  let ascDir = process.env.WK_ASC_DIR || "";
  const files = [];
  let extra = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--") {
      extra = argv.slice(i + 1);
      break;
    }
    if (arg === "--asc-dir") {
      if (i + 1 >= argv.length) usage("--asc-dir needs a directory");
      ascDir = argv[++i];
    } else if (arg.startsWith("-")) {
      usage(`unknown option ${arg} (asc options go after --)`);
    } else {
      files.push(arg);
    }
  }
  if (files.length === 0 || files.length % 2 !== 0) usage("give SRC.ts OUT.wasm pairs");
  const pairs = [];
  for (let i = 0; i < files.length; i += 2) pairs.push({ src: resolve(files[i]), out: resolve(files[i + 1]) });
  return { ascDir, pairs, extra };
}

async function loadCompiler(ascDir) {
  let entry = null;
  if (ascDir) {
    entry = join(resolve(ascDir), "node_modules", "assemblyscript", "dist", "asc.js");
    if (!existsSync(entry)) {
      throw new Error(`no AssemblyScript compiler in ${ascDir} (scripts/asc-toolchain.sh ${ascDir} installs it)`);
    }
  } else {
    // The project's own: node_modules/assemblyscript in the current directory or above.
    for (let dir = process.cwd(); ; dir = dirname(dir)) {
      const candidate = join(dir, "node_modules", "assemblyscript", "dist", "asc.js");
      if (existsSync(candidate)) {
        entry = candidate;
        break;
      }
      if (dirname(dir) === dir) {
        throw new Error("no AssemblyScript compiler: npm install --save-dev assemblyscript@0.28.20, or pass --asc-dir");
      }
    }
  }
  return (await import(pathToFileURL(entry).href)).default;
}

// A directory holding `wasmkeep` -> this SDK, for asc's --path, so `from "wasmkeep"`
// resolves to this SDK whether or not the actor's project installed it.
// Without a toolchain directory the actor's project has the SDK in its node_modules.
function packagesDir(ascDir) {
  if (!ascDir) return null;
  const dir = join(resolve(ascDir), "packages");
  mkdirSync(dir, { recursive: true });
  const link = join(dir, "wasmkeep");
  let current = null;
  try {
    if (lstatSync(link).isSymbolicLink()) current = readlinkSync(link);
  } catch {}
  if (current !== sdkDir) {
    try { unlinkSync(link); } catch {}
    symlinkSync(sdkDir, link, "dir");
  }
  return dir;
}

// Problems with the module's imports and exports, as sentences; empty when it is fine.
function checkModule(bytes) {
  const problems = [];
  const module = new WebAssembly.Module(bytes);
  for (const imp of WebAssembly.Module.imports(module)) {
    if (imp.module === "wasmkeep_v1") continue;
    const name = `${imp.module}.${imp.name}`;
    const why = KNOWN_IMPORTS[name];
    problems.push(`imports ${name}, which the node refuses` + (why ? `; it comes from ${why}` : ""));
  }
  const exports = WebAssembly.Module.exports(module).map((e) => e.name);
  if (!exports.includes("wk_on_request")) {
    problems.push("has no wk_on_request export: add `export function wk_on_request(): i32 { return handleRequest(handle); }`");
  }
  if (!exports.includes("memory")) problems.push("exports no memory");
  return problems;
}

async function main() {
  const { ascDir, pairs, extra } = parseArgs(process.argv.slice(2));
  const asc = await loadCompiler(ascDir);
  const pathDir = packagesDir(ascDir);
  let failed = 0;
  for (const { src, out } of pairs) {
    if (!existsSync(src)) {
      process.stderr.write(`wasmkeep-asc: no such file: ${src}\n`);
      failed++;
      continue;
    }
    mkdirSync(dirname(out), { recursive: true });
    const args = [src, "-o", out, ...ASC_OPTIONS, ...(pathDir ? ["--path", pathDir] : []), ...extra];
    let diagnostics = "";
    const stderr = {
      write(chunk) {
        diagnostics += String(chunk);
        return process.stderr.write(chunk);
      },
    };
    const { error } = await asc.main(args, { stdout: process.stdout, stderr });
    if (error) {
      process.stderr.write(`wasmkeep-asc: ${src}: ${error.message}\n`);
      if (diagnostics.includes("abortEvent' not found")) {
        process.stderr.write("wasmkeep-asc: an actor imports from \"wasmkeep\" (the SDK), whose abortEvent replaces AssemblyScript's abort\n");
      }
      failed++;
      continue;
    }
    const bytes = readFileSync(out);
    const problems = checkModule(bytes);
    if (problems.length > 0) {
      for (const p of problems) process.stderr.write(`wasmkeep-asc: ${out} ${p}\n`);
      unlinkSync(out);
      failed++;
      continue;
    }
    process.stdout.write(`wasmkeep-asc: ${out} (${bytes.length} bytes)\n`);
  }
  process.exit(failed ? 1 : 0);
}

main().catch((e) => {
  process.stderr.write(`wasmkeep-asc: ${e.message}\n`);
  process.exit(1);
});
