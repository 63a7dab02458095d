#!/usr/bin/env bash
# Builds the fuzz harnesses (tests/fuzz/fuzz_*.cpp, ASan + UBSan) in build-fuzz and runs them.
#
# Deterministic (the default; what CI runs): each harness's deterministic driver
# (det_driver.cpp) runs every committed input once (tests/fuzz/corpus/<harness>: inputs that
# long campaigns found to add coverage, and every past finding as regress-*) and the seeds
# (the fixture models, or valid cache files for fuzz_cache), then a fixed number of mutants of
# them drawn from a fixed seed. The same commit runs the same inputs every time: no clock, no
# coverage feedback decides anything.
#
# With KILN_FUZZ_SECONDS=N (or a SECONDS argument): N seconds of libFuzzer's coverage-guided
# random search per harness instead, from the committed corpus plus a growing corpus in
# build-fuzz/corpus/<harness>. Not deterministic: for bench/fuzz_long.sh, not for CI.
#
# Prints per harness what ran and the findings; exits 1 if any harness found something (the
# reproducer is build-fuzz/artifacts/<harness>/<run>/current or crash-*; replay it with
# `build-fuzz/<harness>_det FILE`; once fixed, commit it as tests/fuzz/corpus/<harness>/regress-NAME).
#   usage: tests/fuzz/run_fuzz.sh [SECONDS] [HARNESS...]
#   KILN_FUZZ_SEED        the exploration's seed (default 1)
#   KILN_FUZZ_MUTANTS     mutants per harness, e.g. "fuzz_graph=150000 fuzz_session=6000"
#                         (defaults below: about 40-60 s each on a 2-core CI machine)
#   KILN_FUZZ_BUILD_DIR   build folder (default build-fuzz)
#   KILN_FUZZ_CORE_LIB    libkiln_core.a built with -fsanitize=address,undefined,fuzzer-no-link
#                         (default: build-asan's when tests/sanitize/asan.sh built it so;
#                         otherwise, or with "none", build-fuzz compiles its own)
#   KILN_FUZZ_JOBS        harnesses run at once (default: number of cores)
#   KILN_FUZZ_ARGS        extra libFuzzer flags, random mode only (e.g. "-fork=2 -ignore_crashes=1")
set -euo pipefail
source "$(dirname "$0")/../sanitize/common.sh"
SECS=${KILN_FUZZ_SECONDS:-}
if [[ "${1:-}" =~ ^[0-9]+$ ]]; then
  SECS=$1
  shift
fi
BUILD=${KILN_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}
PAR=${KILN_FUZZ_JOBS:-$(nproc)}
SEED=${KILN_FUZZ_SEED:-1}
# Sized to keep CI well under 30 minutes on 2 cores (~35 s each for graph and cache; session
# ~45 s after its ~45 s replay); bench/fuzz_long.sh runs open-ended.
declare -A MUTANTS=([fuzz_graph]=50000 [fuzz_cache]=40000 [fuzz_session]=15000)
for kv in ${KILN_FUZZ_MUTANTS:-}; do MUTANTS[${kv%%=*}]=${kv#*=}; done
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
targets=(make_cache_seeds)
for h in "${harnesses[@]}"; do
  if [ -n "$SECS" ]; then targets+=("$h"); else targets+=("${h}_det"); fi
done
cmake --build "$BUILD" -j"$JOBS" --target "${targets[@]}"
echo "fuzz: built in $(since "$t0") s (core library: ${core:-compiled in $BUILD})"

bash "$ROOT/tests/fuzz/make_corpus.sh" "$BUILD/seeds" "$BUILD/make_cache_seeds" >/dev/null
run=$(date +%Y%m%d-%H%M%S)
mkdir -p "$BUILD/tmp" "$BUILD/logs"
# Harness temp folders go under the build folder; nothing is written anywhere else.
export TMPDIR=$BUILD/tmp
# hard_rss_limit_mb: libFuzzer's -rss_limit_mb for the deterministic driver (a finding).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0:hard_rss_limit_mb=4096}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export KILN_LOG_LEVEL=off

fuzz_one() {
  local h=$1 art=$BUILD/artifacts/$1/$run seeds=$BUILD/seeds dict=onnx.dict
  # The tuning cache harness reads cache files, not ONNX models.
  [ "$h" != fuzz_cache ] || { seeds=$BUILD/seeds_cache; dict=cache.dict; }
  local committed=$ROOT/tests/fuzz/corpus/$h
  mkdir -p "$art" "$committed"
  if [ -z "$SECS" ]; then
    "$BUILD/${h}_det" --explore "${MUTANTS[$h]:-10000}" --seed "$SEED" --timeout 25 \
      --max-len 65536 --dict "$ROOT/tests/fuzz/$dict" --save "$art" "$committed" "$seeds" \
      >"$BUILD/logs/$h.log" 2>&1
  else
    mkdir -p "$BUILD/corpus/$h"
    # shellcheck disable=SC2086
    (cd "$BUILD" && "$BUILD/$h" -max_total_time="$SECS" -timeout=25 -rss_limit_mb=4096 \
        -max_len=65536 -dict="$ROOT/tests/fuzz/$dict" -artifact_prefix="$art/" \
        -seed="$SEED" -print_final_stats=1 ${KILN_FUZZ_ARGS:-} "corpus/$h" "$committed" "$seeds") \
      >"$BUILD/logs/$h.log" 2>&1
  fi
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
  if [ -z "$SECS" ]; then
    found=$([ $rc -eq 0 ] && echo 0 || echo 1)
    printf 'fuzz: %-14s %s (exit %s)\n' "$h" \
      "$(grep -o 'det_driver: .*' "$log" | tail -1 || echo 'no summary')" "$rc"
  else
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    # -fork mode prints no final stats: take the last "#N" progress line.
    [ -n "$execs" ] || execs=$(grep -o '^#[0-9]*' "$log" | tail -1 | tr -d '#')
    found=$(find "$BUILD/artifacts/$h/$run" -type f | wc -l)
    printf 'fuzz: %-14s %8s executions in %ss, corpus %s files, findings %s (exit %s)\n' \
      "$h" "${execs:-?}" "$SECS" "$(ls "$BUILD/corpus/$h" | wc -l)" "$found" "$rc"
  fi
  if [ "$rc" -ne 0 ] || [ "$found" -ne 0 ]; then
    status=1
    echo "---- $h: last lines of $log"
    grep -v '^#' "$log" | tail -40
    find "$BUILD/artifacts/$h/$run" -type f -printf '  reproducer: %p\n'
  fi
done
echo "fuzz: ran in $(since "$t1") s"
exit $status
