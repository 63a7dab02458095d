#!/usr/bin/env bash
# The test command: install dependencies, build, run the whole suite through CTest; then the
# robustness stages, each in its own build folder and bounded in time:
#   ASan+UBSan build of the whole suite (tests/sanitize/asan.sh, build-asan),
#   TSan build of the concurrency tests (tests/sanitize/tsan.sh, build-tsan),
#   every fuzz harness on the committed corpus and past findings, then a fixed-seed, fixed-size
#   exploration (tests/fuzz/run_fuzz.sh, build-fuzz): deterministic, the same inputs every run.
# They run by default (CI runs them all: about half of its time on a 2-core machine, see the
# timings each stage prints and bench/NOTES.md, "Build time"); KILN_SANITIZERS=0 skips them all, KILN_SKIP_ASAN,
# KILN_SKIP_TSAN, KILN_SKIP_FUZZ=1 skip one. Random, time-bounded fuzzing is bench/fuzz_long.sh
# (KILN_FUZZ_SECONDS=N makes this stage do that instead: not deterministic, not for CI).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${KILN_BUILD_DIR:-$ROOT/build}
# ResNet-18/50, MobileNetV2, VGG-16 and SqueezeNet 1.1 (random weights, PyTorch reference
# outputs) are exported once into the build folder for the end-to-end zoo tests.
export KILN_ZOO_DIR=${KILN_ZOO_DIR:-$BUILD/zoo}
# setup.sh installs clang and the sanitizer runtimes too when the stages will run.
export KILN_SANITIZERS=${KILN_SANITIZERS:-1}
bash "$ROOT/tests/setup.sh"
cd "$BUILD"
t0=$SECONDS
ctest --output-on-failure -j"$(nproc)" "$@"
echo "release suite: ran in $((SECONDS - t0)) s"

skip() { [ "${KILN_SANITIZERS:-0}" != 1 ] || [ "${!1:-0}" = 1 ]; }
# Runs a stage with a hard time limit (seconds), so a hang fails CI instead of stalling it.
stage() {
  local name=$1 limit=$2
  shift 2
  echo "==== $name (limit ${limit}s)"
  local t0=$SECONDS rc=0
  timeout --foreground -k 30 "$limit" "$@" || rc=$?
  [ $rc -ne 124 ] || echo "$name: timed out after ${limit}s"
  echo "==== $name: exit $rc after $((SECONDS - t0))s"
  return $rc
}
# Every stage runs even if an earlier one failed (each reports its own findings); the script
# fails at the end if any did. The fuzzers link the ASan stage's instrumented core library.
failed=()
skip KILN_SKIP_ASAN || stage "ASan+UBSan suite" "${KILN_ASAN_TIMEOUT:-1200}" \
  bash "$ROOT/tests/sanitize/asan.sh" || failed+=(asan)
skip KILN_SKIP_TSAN || stage "TSan concurrency tests" "${KILN_TSAN_TIMEOUT:-600}" \
  bash "$ROOT/tests/sanitize/tsan.sh" || failed+=(tsan)
skip KILN_SKIP_FUZZ || stage "fuzzing" "${KILN_FUZZ_TIMEOUT:-420}" \
  bash "$ROOT/tests/fuzz/run_fuzz.sh" || failed+=(fuzz)
if [ ${#failed[@]} -gt 0 ]; then
  echo "failed stages: ${failed[*]}"
  exit 1
fi
