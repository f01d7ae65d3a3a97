#!/usr/bin/env bash
# Installs every build, test and run-time dependency from Debian 12's packages.
# Idempotent: packages already present are left alone.
set -euo pipefail
PKGS=(
  build-essential cmake ninja-build pkg-config git clang libclang-rt-14-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libunwind-dev libdw-dev libelf-dev libzydis-dev libtbb-dev libpfm4-dev
  libexpat1-dev libcli11-dev nlohmann-json3-dev libcpp-httplib-dev libiberty-dev
  libopenmpi-dev openmpi-bin
  python3 python3-click python3-ruamel.yaml python3-pyparsing python3-numpy python3-pandas
  pocl-opencl-icd ocl-icd-opencl-dev opencl-headers  # OpenCL on the CPU: the GPU-measurement tests
  spin  # model check of the measurement library's MPSC queue
  chromium nodejs  # the web viewer's browser test (src/presentation/web/tests; npm deps on first run)
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
