#!/usr/bin/env bash
# Long fuzzing campaign: every harness of tests/fuzz for SECONDS each (default 1800), in fork
# mode so a crash, timeout or out-of-memory input is recorded and fuzzing continues. Figures
# (executions, executions/s, corpus, findings) are printed per harness and appended to
# build-fuzz/fuzz_long.txt; reproducers land in build-fuzz/artifacts/<harness>/<run>/.
#   usage: bench/fuzz_long.sh [SECONDS] [HARNESS...]
#   KILN_FUZZ_JOBS: harnesses at once (default: cores); everything else as tests/fuzz/run_fuzz.sh
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
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
} | tee -a "$ROOT/build-fuzz/fuzz_long.txt"
exit $rc
