#!/usr/bin/env bash
# Installs the AssemblyScript compiler that the SDK pins (sdk/assemblyscript/package.json and
# its package-lock.json) into a directory outside the source tree, with `npm ci`:
#   scripts/asc-toolchain.sh DIR
# DIR then holds node_modules/assemblyscript (the compiler, exactly the locked versions) and
# a stamp, a copy of the lock file it was installed from: a run whose lock file matches the
# stamp does nothing, so the script is cheap to call before every build. Concurrent runs on
# one DIR wait for each other (flock). Needs node and npm (scripts/install-deps.sh).
#
# scripts/build-actor.sh calls it for .ts sources (DIR: $WK_ASC_DIR, default build/asc) and
# examples/CMakeLists.txt for the AssemblyScript examples (DIR: <build dir>/asc).
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
dir=$1
sdk_dir="$(cd "$(dirname "$0")/../sdk/assemblyscript" && pwd)"
for tool in node npm; do
  command -v "$tool" >/dev/null || { echo "asc-toolchain: $tool not found; run scripts/install-deps.sh" >&2; exit 1; }
done

mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
if cmp -s "$sdk_dir/package-lock.json" "$dir/stamp" && [ -f "$dir/node_modules/assemblyscript/dist/asc.js" ]; then
  exit 0
fi
echo "asc-toolchain: installing the AssemblyScript compiler locked in sdk/assemblyscript/package-lock.json into $dir"
cp "$sdk_dir/package.json" "$sdk_dir/package-lock.json" "$dir/"
# --ignore-scripts: the compiler needs no install step, and none of its packages may run one.
(cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
cp "$sdk_dir/package-lock.json" "$dir/stamp"
echo "asc-toolchain: $(node "$dir/node_modules/assemblyscript/bin/asc.js" --version) in $dir"
