#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer build of the whole test suite (every doctest
# suite and the CLI test; not the install test, which builds examples with the system
# compiler, nor the zoo) in build-asan, then runs it through CTest. Any sanitizer report fails
# the test that triggered it. The core library also gets libFuzzer coverage instrumentation so
# that tests/fuzz/run_fuzz.sh can link the harnesses against it instead of compiling it again
# (KILN_ASAN_COVERAGE=0 turns that off).
#   KILN_ASAN_BUILD_DIR  build folder (default build-asan)
#   extra arguments go to ctest (e.g. -R api)
set -euo pipefail
source "$(dirname "$0")/common.sh"
BUILD=${KILN_ASAN_BUILD_DIR:-$ROOT/build-asan}
require_clang

# NDEBUG as in Release: asmjit assertions would pull non-PIC code into libkiln.so.
FLAGS="-O1 -g1 -DNDEBUG -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all"
[ "${KILN_ASAN_COVERAGE:-1}" = 0 ] || FLAGS+=" -fsanitize=fuzzer-no-link"
t0=$(date +%s)
configure_sanitized "$BUILD" "$FLAGS" "-fsanitize=address,undefined"
# Test executables, the C API library and the CLI; not the benchmarks, nor the TSan stage's
# subset of the runtime suite (test_tuning_cache_threads).
targets=$(cmake --build "$BUILD" --target help | sed -n 's/^\.\.\. \(test_[a-z_]*\|kiln\|kiln_cli\)$/\1/p' |
  grep -vx test_tuning_cache_threads)
# shellcheck disable=SC2086
cmake --build "$BUILD" -j"$JOBS" --target $targets
echo "asan: built in $(since "$t0") s"

t1=$(date +%s)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$ROOT/tests/sanitize/lsan.supp}
export KILN_LOG_LEVEL=${KILN_LOG_LEVEL:-warn}
ctest --test-dir "$BUILD" -E '^(install_examples|zoo_.*)$' --output-on-failure \
  -j"$JOBS" --timeout "${KILN_ASAN_TEST_TIMEOUT:-900}" "$@"
echo "asan: tests ran in $(since "$t1") s"
