#!/usr/bin/env bash
# Builds one WasmKeep actor from a C, C++ or AssemblyScript source file into a WebAssembly
# module (docs/sdk.md):
#   scripts/build-actor.sh SRC.{cc,cpp,c,ts} [-o OUT.wasm] [extra compiler flags...]
# OUT defaults to SRC with .wasm for its extension.
#
# AssemblyScript (.ts): the compiler pinned in sdk/assemblyscript/package-lock.json, installed
# on first use by scripts/asc-toolchain.sh into $WK_ASC_DIR (default build/asc; needs node and
# npm, which scripts/install-deps.sh installs), run through the SDK's driver
# sdk/assemblyscript/bin/wasmkeep-asc.mjs, which holds the compiler options with their
# reasons and checks the module's imports and exports. Extra flags go to asc.
#
# C and C++: needs clang-14, lld-14, wasi-libc, libc++-14-dev-wasm32, libc++abi-14-dev-wasm32
# and libclang-rt-14-dev-wasm32 (Debian packages; scripts/install-deps.sh installs them). The compiler is $WK_WASM_CXX (or
# $WK_WASM_CC for .c files) if set, else clang++-14 / clang-14.
#
# The flags are those of wk_actor in examples/CMakeLists.txt; keep the two in step.
# -mexec-model=reactor: the module is a library of exports (wk_on_request, _initialize),
#   not a program with main.
# -fno-exceptions: the SDK reports nothing by exception; an actor's bug traps instead.
# --max-memory=16777216: the module declares a 16 MiB (256-page) memory maximum.
# --stack-first: the C stack lies below static data, so a stack overflow traps at once
#   (an address below 0) instead of first overwriting the module's globals.
# --strip-all: no names or debug sections; the module is smaller to store and compile.
set -euo pipefail

usage() { echo "usage: $0 SRC.{cc,cpp,c,ts} [-o OUT.wasm] [extra compiler flags...]" >&2; exit 2; }
[ $# -ge 1 ] || usage
src=$1
shift
[ -f "$src" ] || { echo "build-actor: no such file: $src" >&2; exit 2; }
out="${src%.*}.wasm"
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    -o) [ $# -ge 2 ] || usage; out=$2; shift 2 ;;
    *) extra+=("$1"); shift ;;
  esac
done

repo_dir="$(cd "$(dirname "$0")/.." && pwd)"
case "$src" in
  *.ts)
    asc_dir=${WK_ASC_DIR:-$repo_dir/build/asc}
    "$repo_dir/scripts/asc-toolchain.sh" "$asc_dir"
    command -v node >/dev/null || { echo "build-actor: node not found; run scripts/install-deps.sh" >&2; exit 1; }
    driver=(node "$repo_dir/sdk/assemblyscript/bin/wasmkeep-asc.mjs" --asc-dir "$asc_dir" "$src" "$out")
    if ((${#extra[@]})); then driver+=(-- "${extra[@]}"); fi
    exec "${driver[@]}" ;;
esac

sdk_dir="$repo_dir/sdk/c"
case "$src" in
  *.c) compiler=${WK_WASM_CC:-clang-14}; std=-std=c17 ;;
  *) compiler=${WK_WASM_CXX:-clang++-14}; std=-std=c++20 ;;
esac
command -v "$compiler" >/dev/null || { echo "build-actor: $compiler not found; run scripts/install-deps.sh" >&2; exit 1; }

"$compiler" --target=wasm32-wasi -O2 -mexec-model=reactor -fno-exceptions "$std" -Wall -Wextra \
  -I"$sdk_dir" -Wl,--max-memory=16777216 -Wl,--stack-first -Wl,--strip-all ${extra[@]+"${extra[@]}"} "$src" -o "$out"
echo "build-actor: $out ($(wc -c <"$out") bytes)"
