#!/usr/bin/env bash
# Builds the libFuzzer harnesses (tests/fuzz/fuzz_*.cpp, ASan + UBSan) in build-fuzz, seeds
# them with the fixture models and runs each for SECONDS, several harnesses at once (one per
# core). Prints executions, corpus size and findings per harness; exits 1 if any harness
# crashed (the reproducer is in build-fuzz/artifacts/<harness>/<run>/; replay it with
# `build-fuzz/<harness> FILE`).
#   usage: tests/fuzz/run_fuzz.sh [SECONDS (default 50)] [HARNESS...]
#   KILN_FUZZ_BUILD_DIR   build folder (default build-fuzz)
#   KILN_FUZZ_CORE_LIB    libkiln_core.a built with -fsanitize=address,undefined,fuzzer-no-link
#                         (default: build-asan's when tests/sanitize/asan.sh built it so;
#                         otherwise, or with "none", build-fuzz compiles its own)
#   KILN_FUZZ_JOBS        harnesses run at once (default: number of cores)
#   KILN_FUZZ_ARGS        extra libFuzzer flags (e.g. "-fork=2 -ignore_crashes=1")
set -euo pipefail
source "$(dirname "$0")/../sanitize/common.sh"
SECONDS_EACH=${1:-50}
shift || true
BUILD=${KILN_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}
PAR=${KILN_FUZZ_JOBS:-$(nproc)}
require_clang

core=${KILN_FUZZ_CORE_LIB:-}
asan=$ROOT/build-asan
if [ "$core" = none ]; then
  core=
elif [ -z "$core" ] && grep -q 'fuzzer-no-link' "$asan/CMakeCache.txt" 2>/dev/null; then
  core=$asan/libkiln_core.a
  cmake --build "$asan" -j"$JOBS" --target kiln_core >/dev/null  # up to date with the sources
fi
t0=$(date +%s)
cmake -S "$ROOT/tests/fuzz" -B "$BUILD" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DKILN_CORE_LIB="$core" >/dev/null
harnesses=("$@")
if [ ${#harnesses[@]} -eq 0 ]; then
  for f in "$ROOT"/tests/fuzz/fuzz_*.cpp; do harnesses+=("$(basename "$f" .cpp)"); done
fi
cmake --build "$BUILD" -j"$JOBS" --target "${harnesses[@]}" make_cache_seeds
echo "fuzz: built in $(since "$t0") s (core library: ${core:-compiled in $BUILD})"

bash "$ROOT/tests/fuzz/make_corpus.sh" "$BUILD/seeds" "$BUILD/make_cache_seeds" >/dev/null
run=$(date +%Y%m%d-%H%M%S)
mkdir -p "$BUILD/tmp" "$BUILD/logs"
# Harness temp folders go under the build folder; nothing is written anywhere else.
export TMPDIR=$BUILD/tmp
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export KILN_LOG_LEVEL=off

fuzz_one() {
  local h=$1 art=$BUILD/artifacts/$1/$run seeds=seeds dict=onnx.dict
  # The tuning cache harness reads cache files, not ONNX models.
  [ "$h" != fuzz_cache ] || { seeds=seeds_cache; dict=cache.dict; }
  mkdir -p "$BUILD/corpus/$h" "$art"
  # shellcheck disable=SC2086
  (cd "$BUILD" && "$BUILD/$h" -max_total_time="$SECONDS_EACH" -timeout=20 -rss_limit_mb=4096 \
      -max_len=65536 -dict="$ROOT/tests/fuzz/$dict" -artifact_prefix="$art/" \
      -print_final_stats=1 ${KILN_FUZZ_ARGS:-} "corpus/$h" "$seeds") >"$BUILD/logs/$h.log" 2>&1
}

t1=$(date +%s)
pids=()
for h in "${harnesses[@]}"; do
  fuzz_one "$h" &
  pids+=($!)
  while [ "$(jobs -rp | wc -l)" -ge "$PAR" ]; do sleep 1; done
done
status=0
for i in "${!harnesses[@]}"; do
  h=${harnesses[$i]}
  rc=0
  wait "${pids[$i]}" || rc=$?
  log=$BUILD/logs/$h.log
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  # -fork mode prints no final stats: take the last "#N" progress line.
  [ -n "$execs" ] || execs=$(grep -o '^#[0-9]*' "$log" | tail -1 | tr -d '#')
  found=$(find "$BUILD/artifacts/$h/$run" -type f | wc -l)
  printf 'fuzz: %-14s %8s executions in %ss, corpus %s files, findings %s (exit %s)\n' \
    "$h" "${execs:-?}" "$SECONDS_EACH" "$(ls "$BUILD/corpus/$h" | wc -l)" "$found" "$rc"
  if [ "$rc" -ne 0 ] || [ "$found" -ne 0 ]; then
    status=1
    echo "---- $h: last lines of $log"
    grep -v '^#' "$log" | tail -40
    find "$BUILD/artifacts/$h/$run" -type f -printf '  reproducer: %p\n'
  fi
done
echo "fuzz: ran in $(since "$t1") s"
exit $status
