#!/usr/bin/env bash
# Builds one WasmKeep actor from a C or C++ source file into a WebAssembly module
# (docs/sdk.md):
#   scripts/build-actor.sh SRC.cc [-o OUT.wasm] [extra compiler flags...]
# OUT defaults to SRC with .wasm for its extension. Needs clang-14, lld-14, wasi-libc,
# libc++-14-dev-wasm32, libc++abi-14-dev-wasm32 and libclang-rt-14-dev-wasm32 (Debian
# packages; scripts/install-deps.sh installs them). The compiler is $WK_WASM_CXX (or
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

usage() { echo "usage: $0 SRC.{cc,cpp,c} [-o OUT.wasm] [extra compiler flags...]" >&2; exit 2; }
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

sdk_dir="$(cd "$(dirname "$0")/../sdk/c" && pwd)"
case "$src" in
  *.c) compiler=${WK_WASM_CC:-clang-14}; std=-std=c17 ;;
  *) compiler=${WK_WASM_CXX:-clang++-14}; std=-std=c++20 ;;
esac
command -v "$compiler" >/dev/null || { echo "build-actor: $compiler not found; run scripts/install-deps.sh" >&2; exit 1; }

"$compiler" --target=wasm32-wasi -O2 -mexec-model=reactor -fno-exceptions "$std" -Wall -Wextra \
  -I"$sdk_dir" -Wl,--max-memory=16777216 -Wl,--stack-first -Wl,--strip-all ${extra[@]+"${extra[@]}"} "$src" -o "$out"
echo "build-actor: $out ($(wc -c <"$out") bytes)"
