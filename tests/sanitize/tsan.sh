#!/usr/bin/env bash
# ThreadSanitizer build (build-tsan) of the C API library and its test suite, then the
# concurrency tests only: concurrent runs on one session (test_c_api.cpp) and the many-thread
# misuse tests (test_c_api_misuse.cpp: sessions created/run/released from several threads,
# good and failing runs interleaved on one session with 1 and 2 intra-op threads, options and
# statuses), the soak (test_soak.cpp: threads running two sessions while another loads and
# releases sessions), the tuning cache shared by threads (test_tuning_cache_procs.cpp: one cache
# object written from several threads, several objects on one file) and the log callback with
# sessions loading at once (tests/host), and `kiln bench --concurrency 2` (one session shared by
# two request threads, then --sessions). Any data race fails the run. The other suites are
# single-threaded or covered by the ASan build.
#   KILN_TSAN_BUILD_DIR   build folder (default build-tsan)
#   KILN_TSAN_TESTS       doctest -tc filter for test_api (default: the concurrency tests above)
set -euo pipefail
source "$(dirname "$0")/common.sh"
BUILD=${KILN_TSAN_BUILD_DIR:-$ROOT/build-tsan}
require_clang

# -O0: the stage runs seconds of tests after minutes of compiling; -O0 compiles faster.
FLAGS="-O0 -g1 -DNDEBUG -fno-omit-frame-pointer -fsanitize=thread"
t0=$(date +%s)
configure_sanitized "$BUILD" "$FLAGS" "-fsanitize=thread"
cmake --build "$BUILD" -j"$JOBS" --target kiln kiln_cli test_api test_tuning_cache_threads test_host
echo "tsan: built in $(since "$t0") s"

t1=$(date +%s)
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$ROOT/tests/sanitize/tsan.supp}
export KILN_LOG_LEVEL=${KILN_LOG_LEVEL:-warn}
"$BUILD/tests/test_api" --test-case="${KILN_TSAN_TESTS:-*concurrent*,*many threads*,soak*}" \
  --duration=true
"$BUILD/tests/test_tuning_cache_threads" --test-case='*threads sharing one object*' --duration=true
"$BUILD/tests/test_host" --duration=true
# The CLI's concurrent requests: one shared session, then a session per request thread.
for extra in "" "--sessions"; do
  # shellcheck disable=SC2086
  "$BUILD/bench/kiln" bench "$ROOT/examples/models/squeezenet1_1.onnx" --threads 1 --tune none \
    --no-cache --concurrency 2 --runs 3 --warmup 1 $extra > /dev/null
done
echo "tsan: tests ran in $(since "$t1") s"
