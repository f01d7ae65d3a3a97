#!/usr/bin/env bash
# One command for a fresh Debian 12 machine: install dependencies, build, run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
cd build
ctest --output-on-failure -j "${JOBS:-$(nproc)}" --timeout 900
