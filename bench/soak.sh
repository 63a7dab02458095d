#!/usr/bin/env bash
# The soak test at full size (bench/soak/soak.h): for each model, at 1 and 2 intra-op threads,
# 4 threads run 2 sessions while 2 threads load and release sessions, 8 rounds; every output
# must be bitwise identical and neither resident memory nor open descriptors may grow. Builds
# into build/ first. Exits 1 if any configuration failed.
#   usage: bench/soak.sh [MODEL.onnx ...]   (default: the zoo in build/zoo, else the demo)
#   KILN_SOAK_ARGS: extra kiln_soak options (e.g. "--runs 500 --rounds 20")
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${KILN_BUILD_DIR:-$ROOT/build}
cmake --build "$BUILD" -j"$(nproc)" --target kiln_soak >/dev/null || exit 2
models=("$@")
if [ ${#models[@]} -eq 0 ]; then
  for m in resnet50 mobilenet_v2 squeezenet1_1; do
    [ -f "$BUILD/zoo/$m.onnx" ] && models+=("$BUILD/zoo/$m.onnx")
  done
  [ ${#models[@]} -gt 0 ] || models=("$ROOT"/examples/models/*.onnx)
fi
status=0
for m in "${models[@]}"; do
  for intra in 1 2; do
    echo "== $(basename "$m") intra-op threads $intra"
    # shellcheck disable=SC2086
    "$BUILD/bench/kiln_soak" "$m" --run-threads 4 --runs 100 --sessions 2 --load-threads 2 \
      --loads 4 --rounds 8 --intra "$intra" ${KILN_SOAK_ARGS:-} || status=1
  done
done
exit $status
