// JIT code memory is never writable and executable at once: after loading a model (which
// generates every kernel) no mapping of the process is both.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "runtime/session.h"

TEST_CASE("no mapping is writable and executable after JIT compilation") {
  namespace fs = std::filesystem;
  fs::path model = fs::path(KILN_FIXTURE_DIR) / ".." / ".." / "examples" / "models" /
                   "squeezenet1_1.onnx";
  auto s = kiln::Session::load_file(model.string(), {});
  REQUIRE(s->isa() != kiln::Isa::scalar);  // kernels were generated
  std::ifstream maps("/proc/self/maps");
  REQUIRE(maps.good());
  std::string line;
  int lines = 0;
  while (std::getline(maps, line)) {
    ++lines;
    // "start-end perms offset dev inode path", perms like "r-xp".
    auto sp = line.find(' ');
    REQUIRE(sp != std::string::npos);
    std::string perms = line.substr(sp + 1, 4);
    CAPTURE(line);
    CHECK_FALSE((perms[1] == 'w' && perms[2] == 'x'));
  }
  CHECK(lines > 10);
}
