// The package's entry for the AssemblyScript compiler: `import { ... } from "wasmkeep"`
// resolves to this file (asc looks for <package>/index.ts). The SDK is in assembly/.
export * from "./assembly/index";
