// `kiln` command-line tool: the entry point. Usage errors exit with 2, runtime errors with 1;
// every exception is caught here so the tool never crashes on bad input.
#include <cstdio>
#include <exception>
#include <new>

#include "cli.h"
#include "graph/error.h"
#include "runtime/log.h"

int main(int argc, char** argv) {
  using namespace kiln::cli;
  Args a;
  try {
    if (parse(argc, argv, a) >= 0) return 0;  // help or version printed
    // The CLI is the host: its level is the process's.
    kiln::set_log_level(a.log_level ? int(*a.log_level) : -1);
    check_output_paths(a);  // before the load, which can take seconds
    return run_command(a);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "kiln: %s\n(see %s)\n", e.what(), command_help_hint(a.command).c_str());
    return 2;
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "kiln: error (%s): %s\n", kiln::code_name(e.code()), e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "kiln: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln: error: %s\n", e.what());
    return 1;
  } catch (...) {
    std::fprintf(stderr, "kiln: error: unknown exception\n");
    return 1;
  }
}
