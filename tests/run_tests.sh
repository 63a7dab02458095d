#!/usr/bin/env bash
# The test command: install dependencies, build, run the whole suite through CTest.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${KILN_BUILD_DIR:-$ROOT/build}
bash "$ROOT/tests/setup.sh"
cd "$BUILD"
ctest --output-on-failure -j"$(nproc)" "$@"
