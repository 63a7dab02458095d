#!/usr/bin/env bash
# The test command: install dependencies, build, run the whole suite through CTest.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${KILN_BUILD_DIR:-$ROOT/build}
# ResNet-18/50, MobileNetV2, VGG-16 and SqueezeNet 1.1 (random weights, PyTorch reference
# outputs) are exported once into the build folder for the end-to-end zoo tests.
export KILN_ZOO_DIR=${KILN_ZOO_DIR:-$BUILD/zoo}
bash "$ROOT/tests/setup.sh"
cd "$BUILD"
ctest --output-on-failure -j"$(nproc)" "$@"
