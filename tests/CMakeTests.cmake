# Extra CTest tests, include()d by tests/CMakeLists.txt.

# install_examples: install the built project into a temporary prefix, build examples/ against
# it with CMake (find_package) and with pkg-config, and run both on the demo model. Needs the
# `kiln` and `kiln_cli` targets built (`cmake --install` copies them).
find_program(KILN_BASH bash)
if(KILN_BASH)
  add_test(NAME install_examples
    COMMAND ${KILN_BASH} ${CMAKE_CURRENT_SOURCE_DIR}/install/install_test.sh
      ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR} ${CMAKE_COMMAND})
  set_tests_properties(install_examples PROPERTIES TIMEOUT 900 LABELS install
    ENVIRONMENT "KILN_CACHE_DIR=${CMAKE_CURRENT_BINARY_DIR}/tmp/cache-install")
endif()

# cli: black-box test of the `kiln` tool (exit codes, run vs fixture references, bench JSON,
# info figures). Python is used only with its standard library, to read .npy and JSON.
find_package(Python3 COMPONENTS Interpreter QUIET)
if(KILN_BASH AND Python3_Interpreter_FOUND AND TARGET kiln_cli)
  add_test(NAME cli
    COMMAND ${KILN_BASH} ${CMAKE_CURRENT_SOURCE_DIR}/install/cli_test.sh
      $<TARGET_FILE:kiln_cli> ${CMAKE_CURRENT_SOURCE_DIR}/fixtures ${Python3_EXECUTABLE})
  set_tests_properties(cli PROPERTIES TIMEOUT 300
    ENVIRONMENT "KILN_CACHE_DIR=${CMAKE_CURRENT_BINARY_DIR}/tmp/cache-cli")
  # cli_conventions: per-command help, option errors, bench --input/--concurrency and its JSON,
  # output paths checked before the load, progress lines on a non-terminal stderr.
  add_test(NAME cli_conventions
    COMMAND ${KILN_BASH} ${CMAKE_CURRENT_SOURCE_DIR}/install/cli_conventions_test.sh
      $<TARGET_FILE:kiln_cli> ${CMAKE_CURRENT_SOURCE_DIR}/fixtures ${Python3_EXECUTABLE})
  set_tests_properties(cli_conventions PROPERTIES TIMEOUT 300
    ENVIRONMENT "KILN_CACHE_DIR=${CMAKE_CURRENT_BINARY_DIR}/tmp/cache-cli-conventions")
  # cli_dot: `kiln plan --dot` rendered by Graphviz (skipped, 77, without `dot`).
  find_program(KILN_DOT dot)
  add_test(NAME cli_dot
    COMMAND ${KILN_BASH} ${CMAKE_CURRENT_SOURCE_DIR}/install/cli_dot_test.sh
      $<TARGET_FILE:kiln_cli> ${CMAKE_CURRENT_SOURCE_DIR}/fixtures ${Python3_EXECUTABLE}
      "$<$<BOOL:${KILN_DOT}>:${KILN_DOT}>")
  set_tests_properties(cli_dot PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77
    ENVIRONMENT "KILN_CACHE_DIR=${CMAKE_CURRENT_BINARY_DIR}/tmp/cache-cli-dot")
endif()

# The ISA-coverage report itself (isa_coverage.h): with the AVX-512 path capped away, a suite
# whose tests all pass must exit 77 (skipped) and say what it could not cover.
if(KILN_BASH)
  add_test(NAME isa_coverage_reports_skip COMMAND ${KILN_BASH} -c
    "KILN_MAX_ISA=avx2 \"$0\" -tc='epilogue*' > /dev/null 2> err.txt; rc=$?; cat err.txt; \
     [ $rc -eq 77 ] && grep -q 'lacks avx512' err.txt && grep -q '^SKIPPED' err.txt"
    $<TARGET_FILE:test_jit>)
  set_tests_properties(isa_coverage_reports_skip PROPERTIES
    WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/tmp)
endif()
