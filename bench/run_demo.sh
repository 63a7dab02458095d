#!/usr/bin/env bash
# The main job: install dependencies, build, and benchmark the bundled demo model
# (SqueezeNet 1.1, random weights) with `kiln bench`. Extra arguments go to `kiln bench`.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${KILN_BUILD_DIR:-$ROOT/build}
bash "$ROOT/tests/setup.sh"
"$BUILD/bench/kiln" bench "$ROOT/examples/models/squeezenet1_1.onnx" "$@"
