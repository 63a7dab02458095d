// README.md's operator table is generated from the op table (graph/ops.cpp), so it cannot
// drift: this test fails when they differ. To regenerate the section after changing the table:
//   KILN_UPDATE_README=1 build/tests/test_graph -tc='README*'
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "graph/ops.h"

namespace {

const char kBegin[] = "<!-- BEGIN supported-ops: generated from graph/ops.cpp -->\n";
const char kEnd[] = "<!-- END supported-ops -->";

}  // namespace

TEST_CASE("README's supported-operator section is the op table's (graph/ops.cpp)") {
  const std::filesystem::path readme =
      std::filesystem::path(KILN_FIXTURE_DIR).parent_path().parent_path() / "README.md";
  std::ifstream in(readme, std::ios::binary);
  REQUIRE_MESSAGE(in, "cannot read " << readme.string());
  std::string text((std::istreambuf_iterator<char>(in)), {});
  in.close();
  const size_t b = text.find(kBegin), e = text.find(kEnd);
  REQUIRE_MESSAGE(b != std::string::npos, readme.string() << " has no '" << kBegin << "' line");
  REQUIRE_MESSAGE(e != std::string::npos, readme.string() << " has no '" << kEnd << "' line");
  REQUIRE(b < e);
  const size_t body = b + sizeof kBegin - 1;
  const std::string want = kiln::supported_ops_markdown();
  const char* update = std::getenv("KILN_UPDATE_README");
  if (update && std::string(update) == "1" && text.compare(body, e - body, want) != 0) {
    text.replace(body, e - body, want);
    std::ofstream out(readme, std::ios::binary | std::ios::trunc);
    out << text;
    REQUIRE_MESSAGE(out.good(), "cannot write " << readme.string());
    MESSAGE("rewrote the supported-ops section of " << readme.string());
    return;
  }
  CHECK_MESSAGE(text.compare(body, e - body, want) == 0,
                "README.md's operator table differs from graph/ops.cpp; regenerate it with "
                "KILN_UPDATE_README=1 build/tests/test_graph -tc='README*'");
  // The table names every op a model may use, and no internal one.
  for (const kiln::OpInfo& op : kiln::all_ops())
    CHECK_MESSAGE(
        (want.find("| " + std::string(op.name) + " |") != std::string::npos) == !op.internal,
        op.name);
}
