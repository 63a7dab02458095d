#!/usr/bin/env bash
# Installs Kiln's build dependencies (Debian 12, as root) when missing, then configures and
# builds into ${KILN_BUILD_DIR:-build} with every core. Used by tests/run_tests.sh and
# bench/run_demo.sh.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${KILN_BUILD_DIR:-$ROOT/build}
PKGS=(build-essential cmake pkg-config libxbyak-dev libasmjit-dev libtbb-dev libspdlog-dev
      doctest-dev libonnx-dev libprotobuf-dev protobuf-compiler
      python3-dev pybind11-dev python3-numpy python3-pytest  # the Python package and its tests
      python3-onnx libonnx-testdata  # ONNX's operator tests (tests/onnx_backend)
      graphviz)  # the cli_dot test renders `kiln plan --dot`
# The sanitizer and fuzzing stages of tests/run_tests.sh build with clang and its runtimes.
[ "${KILN_SANITIZERS:-0}" != 1 ] || PKGS+=(clang libclang-rt-14-dev)
# The end-to-end zoo tests export torchvision models with Debian's PyTorch.
[ -z "${KILN_ZOO_DIR:-}" ] || PKGS+=(python3-torch python3-torchvision python3-onnx python3-numpy)
missing=()
for p in "${PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
t0=$SECONDS  # each step says how long it took: where CI's minutes go
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  SUDO=; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
  echo "setup: installed in $((SECONDS - t0)) s"
fi
if [ -n "${KILN_ZOO_DIR:-}" ] && [ ! -f "$KILN_ZOO_DIR/vgg16.ref.npy" ]; then
  echo "exporting the model zoo to $KILN_ZOO_DIR"
  t0=$SECONDS
  /usr/bin/python3 "$ROOT/bench/zoo_export.py" --out "$KILN_ZOO_DIR" >/dev/null
  echo "setup: zoo exported in $((SECONDS - t0)) s"
fi
t0=$SECONDS
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DKILN_ZOO_DIR="${KILN_ZOO_DIR:-}" >/dev/null
cmake --build "$BUILD" -j"$(nproc)"
echo "setup: built in $((SECONDS - t0)) s"
