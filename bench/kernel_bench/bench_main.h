// main() of kiln_kernel_bench and kiln_micro_bench: an error is printed with the program's
// name and exits with 1.
#pragma once

#include <cstdio>
#include <exception>

namespace kiln::bench {

inline int bench_main(const char* program, int (*run)(int, char**), int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
}

}  // namespace kiln::bench
