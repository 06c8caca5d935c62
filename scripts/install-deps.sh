#!/usr/bin/env bash
# Installs every system package WasmKeep needs to build and test, from Debian's archive.
# Idempotent: packages already present are skipped, and apt-get update runs only when
# something is missing. Safe to run as root (the CI and developer machines) or through sudo.
set -euo pipefail

# Why each package is here: docs/DEPENDENCIES.md.
packages=(
  build-essential cmake ninja-build pkg-config git curl ca-certificates
  python3 iproute2 procps   # test scripts: JSON parsing, free-port search (ss), process checks
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
