// Glue kernels built from the same instructions share one copy of generated code
// (AsmBuilder::finish, jit/shared_code.h): a second identical kernel compiles nothing, kernels
// whose instructions or constants differ (even under the same name) get their own code, and
// every kernel computes its own problem correctly either way.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "graph/post_ops.h"
#include "jit/glue/glue.h"
#include "jit/layout.h"
#include "jit/shared_code.h"
#include "test_glue_util.h"

namespace kiln {
namespace {

using test::GuardedBuf;

// Builds a reorder kernel; returns how many code lookups found shared code meanwhile.
int64_t build_reorder(const Shape& s, Layout from, Layout to, Isa isa, std::unique_ptr<Kernel>* k) {
  const SharedCodeStats before = shared_code_stats();
  std::string why;
  *k = create_reorder_kernel(s, from, to, isa, &why);
  REQUIRE_MESSAGE(*k, why);
  return shared_code_stats().reused - before.reused;
}

void check_reorder(const Kernel& k, const Shape& s, Layout from, Layout to, uint32_t seed) {
  GuardedBuf src(size_t(layout_elems(from, s))), dst(size_t(layout_elems(to, s)));
  src.random(seed);
  dst.fill(-1.f);
  std::vector<float> want(dst.size());
  convert_layout(src.data(), from, want.data(), to, s);
  test::run_split(k, {src.data()}, {dst.data()});
  for (size_t i = 0; i < want.size(); ++i)
    if (dst[i] != want[i])
      FAIL_CHECK("element " << i << ": got " << dst[i] << ", want " << want[i]);
}

TEST_CASE("glue code: identical kernels share it, different ones do not") {
  for (Isa isa : test::glue_isas()) {
    CAPTURE(std::string(isa_name(isa)));
    const Layout b = blocked_layout(isa);
    const Shape s{1, 40, 9, 11}, other{1, 24, 5, 7}, batch2{2, 40, 9, 11};
    std::unique_ptr<Kernel> k1, k2, k3, k4;
    build_reorder(s, Layout::nchw, b, isa, &k1);
    // The same conversion again (another layer, another session): no code generated.
    CHECK(build_reorder(s, Layout::nchw, b, isa, &k2) == 1);
    // Same kernel name, other strides in the instructions: its own code.
    CHECK(build_reorder(other, Layout::nchw, b, isa, &k3) == 0);
    CHECK(k3->name() == k1->name());
    // Another batch: the per-image code is the same, the kernel's tiles are its own.
    build_reorder(batch2, Layout::nchw, b, isa, &k4);
    check_reorder(*k1, s, Layout::nchw, b, 1);
    check_reorder(*k2, s, Layout::nchw, b, 2);
    check_reorder(*k3, other, Layout::nchw, b, 3);
    check_reorder(*k4, batch2, Layout::nchw, b, 4);

    // Constants differ (a leaky slope): each kernel computes with its own.
    const int64_t n = 1000;
    for (float slope : {0.1f, 0.2f}) {
      PostOp op;
      op.kind = PostOp::Kind::leaky_relu;
      op.alpha = slope;
      std::string why;
      auto k = create_eltwise_kernel(n, {op}, isa, &why);
      REQUIRE_MESSAGE(k, why);
      GuardedBuf x{size_t(n)}, y{size_t(n)};
      x.random(7);
      test::run_split(*k, {x.data()}, {y.data()});
      for (int64_t i = 0; i < n; ++i) {
        const float want = x[size_t(i)] > 0 ? x[size_t(i)] : slope * x[size_t(i)];
        if (y[size_t(i)] != want)
          FAIL_CHECK("slope " << slope << ", element " << i << ": got " << y[size_t(i)] << ", want "
                              << want);
      }
    }
  }
}

}  // namespace
}  // namespace kiln
