#!/usr/bin/env bash
# Installs every system package WasmKeep needs to build and test, from Debian's archive.
# Idempotent: packages already present are skipped, and apt-get update runs only when
# something is missing. Safe to run as root (the CI and developer machines) or through sudo.
set -euo pipefail
cd "$(dirname "$0")/.."  # third_party/local/ is relative to the repository root

# Why each package is here: docs/DEPENDENCIES.md.
packages=(
  build-essential cmake ninja-build pkg-config git curl ca-certificates
  python3 iproute2 procps   # test scripts: JSON parsing, free-port search (ss), process checks
  systemd                   # systemd-analyze, which checks packaging/wasmkeep.service
  g++ clang-14 lld-14
  libboost1.81-dev          # Asio (event loop), Beast (HTTP client and test servers)
  libssl-dev                # SHA-256 / HMAC for SigV4, TLS to https endpoints
  libgtest-dev libgmock-dev # unit and conformance tests
  libbenchmark-dev          # micro-benchmarks
  libtomlplusplus-dev       # config files
  libcli11-dev              # command-line parsing
  nlohmann-json3-dev        # JSON output of the CLI and status documents
  libspdlog-dev libfmt-dev  # structured logging
  libpugixml-dev            # S3 XML responses (ListObjectsV2, errors)
  libsqlite3-dev            # sqlite://, the embedded bucket (SQLite 3.40)
  libjemalloc-dev           # the wasmkeep binary's allocator (release builds)
  wasi-libc libclang-rt-14-dev-wasm32 wabt  # building actors: clang-14 --target=wasm32-wasi
  libc++-14-dev-wasm32 libc++abi-14-dev-wasm32  # the C++ layer of the actor SDK (sdk/c/wasmkeep.hpp)
  chromium chromium-driver python3-selenium  # the console's browser tests (tests/browser/)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "install-deps: all build packages present"

# Node.js and npm run the AssemblyScript compiler (sdk/assemblyscript/; the compiler itself
# comes from the npm registry, pinned by sdk/assemblyscript/package-lock.json, installed by
# scripts/asc-toolchain.sh). Debian 12's nodejs (18) and npm (9) are enough. Any node 18 or
# later already on PATH is used as it is: a machine with nodesource's nodejs (which bundles
# npm and conflicts with Debian's npm package) keeps it.
node_major=0
if command -v node >/dev/null; then node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0); fi
if [ "$node_major" -ge 18 ] && command -v npm >/dev/null; then
  echo "install-deps: node $(node --version) and npm $(npm --version) present"
else
  echo "install-deps: installing nodejs npm (the AssemblyScript compiler runs on them)"
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
  command -v node >/dev/null && command -v npm >/dev/null || { echo "install-deps: nodejs/npm install failed" >&2; exit 1; }
fi

# V8 (the WebAssembly engine) comes from Debian's libnode108 (Node.js 18 as a library, V8
# 10.2) and its headers from libnode-dev. On a plain Debian 12 machine they install normally;
# where a newer Node.js package is preinstalled (nodesource's nodejs 20 conflicts with
# libnode108), we unpack the two .debs into third_party/local/libnode instead and leave the
# machine's Node alone. CMake looks in that prefix first (WK_LIBNODE_PREFIX). The runtime
# libraries libnode needs (ICU 72, libuv, c-ares, nghttp2, brotli) come in as its
# dependencies on a plain machine; here we install them explicitly for the unpacked copy.
libnode_prefix=third_party/local/libnode
if dpkg-query -W -f='${Status}' libnode-dev 2>/dev/null | grep -q "install ok installed"; then
  echo "install-deps: libnode-dev installed system-wide"
elif [ -f "$libnode_prefix/usr/include/node/v8.h" ] && [ -e "$libnode_prefix/usr/lib/x86_64-linux-gnu/libnode.so.108" ]; then
  echo "install-deps: libnode unpacked in $libnode_prefix"
else
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  if ! $SUDO apt-get install -y -qq --no-install-recommends libnode-dev >/dev/null 2>&1; then
    echo "install-deps: libnode-dev conflicts with the installed Node.js; unpacking it into $libnode_prefix"
    $SUDO apt-get install -y -qq --no-install-recommends libicu72 libuv1 libc-ares2 libnghttp2-14 libbrotli1 >/dev/null
    tmp=$(mktemp -d)
    (cd "$tmp" && apt-get download libnode108 libnode-dev >/dev/null 2>&1)
    rm -rf "$libnode_prefix"
    mkdir -p "$libnode_prefix"
    for deb in "$tmp"/*.deb; do dpkg -x "$deb" "$libnode_prefix"; done
    rm -rf "$tmp"
    [ -f "$libnode_prefix/usr/include/node/v8.h" ] || { echo "install-deps: libnode unpack failed" >&2; exit 1; }
  fi
  echo "install-deps: libnode ready"
fi
