// A small ConvNeXt block (tests/graph/convnext_block.h) end to end: after the rewrites its plan
// has no reference kernel, and its output matches the reference path, on both ISA paths.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "graph/convnext_block.h"
#include "isa_coverage.h"
#include "runtime/plan.h"
#include "runtime/session.h"

namespace {

std::vector<float> run(const kiln::Session& s) {
  const kiln::IoInfo& in = s.inputs()[0];
  kiln::Tensor x(kiln::DType::f32, in.shape);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = std::cos(0.41f * float(i)) * 3;
  std::vector<kiln::Tensor> outs;
  for (const kiln::IoInfo& o : s.outputs()) outs.emplace_back(o.dtype, o.shape);
  s.run({x}, outs);
  const kiln::Tensor& y = outs.at(0);
  return std::vector<float>(y.data<float>(), y.data<float>() + y.numel());
}

}  // namespace

TEST_CASE("session: a ConvNeXt block runs without reference kernels and matches the reference") {
  for (int64_t c : {8, 20}) {
    kiln::test::BlockOpts bo;
    bo.c = c;
    bo.n = c == 8 ? 2 : 1;
    bo.h = 6;
    bo.w = 5;
    const std::string bytes = kiln::test::convnext_block(bo).bytes();
    kiln::SessionOptions ro;
    ro.reference = true;
    auto ref = kiln::Session::load_memory(bytes.data(), bytes.size(), ro);
    const std::vector<float> want = run(*ref);
    for (kiln::Isa isa : kiln::testing::jit_isas()) {
      CAPTURE(c);
      CAPTURE(std::string(kiln::isa_name(isa)));
      kiln::SessionOptions o;
      o.max_isa = isa;
      o.use_cache = false;
      o.threads = 2;
      auto s = kiln::Session::load_memory(bytes.data(), bytes.size(), o);
      for (const kiln::Step& st : s->plan().steps) {
        CAPTURE(st.kernel->name());
        CHECK(st.kernel->name().rfind("ref_", 0) == std::string::npos);
      }
      const std::vector<float> got = run(*s);
      REQUIRE(got.size() == want.size());
      double worst = 0, scale = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        worst = std::max(worst, std::fabs(double(got[i]) - want[i]));
        scale = std::max(scale, std::fabs(double(want[i])));
      }
      CAPTURE(scale);
      CHECK(worst <= 1e-4 * scale);
    }
  }
}
