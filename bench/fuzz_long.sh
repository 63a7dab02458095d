#!/usr/bin/env bash
# Long fuzzing campaign: libFuzzer's coverage-guided random search on every harness of
# tests/fuzz for SECONDS each (default 1800), in fork mode so a crash, timeout or out-of-memory
# input is recorded and fuzzing continues. Not deterministic (that is the point): CI runs the
# deterministic replay + exploration instead (tests/fuzz/run_fuzz.sh). Figures (executions,
# executions/s, corpus, findings) are printed per harness and appended to
# build-fuzz/fuzz_long.txt; reproducers land in build-fuzz/artifacts/<harness>/<run>/.
#
# Afterwards, with KILN_FUZZ_MERGE=1, the inputs that add coverage to the committed corpus
# (tests/fuzz/corpus/<harness>) are merged into it (libFuzzer -merge=1), for CI to replay from
# then on. Fix every finding first and commit its reproducer as corpus/<harness>/regress-NAME.
#   usage: bench/fuzz_long.sh [SECONDS] [HARNESS...]
#   KILN_FUZZ_JOBS: harnesses at once (default: cores); everything else as tests/fuzz/run_fuzz.sh
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${KILN_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}
SECS=${1:-1800}
shift || true
export KILN_FUZZ_ARGS="-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 ${KILN_FUZZ_ARGS:-}"
start=$(date -u +%Y-%m-%dT%H:%M:%SZ)
out=$(nice -n 10 bash "$ROOT/tests/fuzz/run_fuzz.sh" "$SECS" "$@" 2>&1)
rc=$?
echo "$out"
{
  echo "== $start, $SECS s per harness, $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
  echo "$out" | grep '^fuzz: .* executions in ' | while read -r line; do
    echo "$line"
    execs=$(echo "$line" | awk '{print $3}')
    [[ "$execs" =~ ^[0-9]+$ ]] && echo "      $((execs / SECS)) executions/s"
  done
} | tee -a "$BUILD/fuzz_long.txt"
if [ "${KILN_FUZZ_MERGE:-0}" = 1 ]; then
  harnesses=("$@")
  if [ ${#harnesses[@]} -eq 0 ]; then
    for f in "$ROOT"/tests/fuzz/fuzz_*.cpp; do harnesses+=("$(basename "$f" .cpp)"); done
  fi
  for h in "${harnesses[@]}"; do
    committed=$ROOT/tests/fuzz/corpus/$h
    before=$(ls "$committed" | wc -l)
    (cd "$BUILD" && TMPDIR=$BUILD/tmp KILN_LOG_LEVEL=off "$BUILD/$h" -merge=1 -timeout=25 \
      -rss_limit_mb=4096 -max_len=65536 "$committed" "corpus/$h") >"$BUILD/logs/$h.merge.log" 2>&1
    echo "merge: $h: $before -> $(ls "$committed" | wc -l) committed inputs"
  done
fi
exit $rc
