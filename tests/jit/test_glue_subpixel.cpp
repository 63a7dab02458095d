// The SubpixelInterleave glue kernel (create_subpixel_kernel) against the reference kernel,
// bit-exact (a pure copy): strides 1-4 per dim, crop offsets (including >= stride), output
// widths around and across SIMD widths and gather periods, extra phase rows/columns the crop
// does not read, batch > 1, phase-major channels with per-phase origins (a Conv per phase), on
// every ISA path, buffers ending on guard pages.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "jit/glue/glue.h"
#include "runtime/ref/ref_kernels.h"
#include "test_glue_util.h"
#include "test_rng.h"

namespace kiln {
namespace {

using test::GuardedBuf;

void check_case(Isa isa, const SubpixelProblem& p, uint32_t seed) {
  CAPTURE(std::string(isa_name(isa)));
  const std::string desc =
      "n" + std::to_string(p.n) + " c" + std::to_string(p.c) + " u" + std::to_string(p.uh) + "x" +
      std::to_string(p.uw) + " o" + std::to_string(p.oh) + "x" + std::to_string(p.ow) + " s" +
      std::to_string(p.sh) + "x" + std::to_string(p.sw) + " off" + std::to_string(p.off_h) + "," +
      std::to_string(p.off_w) + (p.phase_major ? " phase-major" : "") + " org " +
      std::to_string(p.org_h.size()) + "," + std::to_string(p.org_w.size());
  CAPTURE(desc);
  Node n;
  n.name = "il";
  n.op = "SubpixelInterleave";
  n.inputs = {0};
  n.outputs = {1};
  n.attrs["strides"] = attr_ints({p.sh, p.sw});
  n.attrs["offsets"] = attr_ints({p.off_h, p.off_w});
  n.attrs["out_hw"] = attr_ints({p.oh, p.ow});
  n.attrs["phase_major"] = attr_i(p.phase_major ? 1 : 0);
  n.attrs["origins_h"] = attr_ints(p.org_h);
  n.attrs["origins_w"] = attr_ints(p.org_w);
  const Shape zs{p.n, p.c * p.sh * p.sw, p.uh, p.uw}, ys{p.n, p.c, p.oh, p.ow};
  Tensor tz(DType::f32, zs), ty(DType::f32, ys);
  GuardedBuf src{size_t(tz.numel())}, dst{size_t(ty.numel())};
  src.random(seed);
  std::copy(src.data(), src.data() + src.size(), tz.data<float>());
  find_ref_kernel("SubpixelInterleave")(n, {&tz}, {&ty});
  std::string why;
  auto k = create_subpixel_kernel(p, isa, &why);
  REQUIRE_MESSAGE(k, why);
  dst.fill(-99.f);
  test::run_split(*k, {src.data()}, {dst.data()});
  int bad = 0;
  for (size_t i = 0; i < dst.size(); ++i) bad += dst[i] != ty.data<float>()[i];
  CHECK(bad == 0);
}

// A random problem's sizes, strides and offsets (no planes yet). Widths past one and several
// gather periods (sw * 16 outputs) with tails.
SubpixelProblem random_problem(test::XorShift& r, int i) {
  SubpixelProblem p;
  p.n = r.pick(1, 2);
  p.c = r.pick(1, 5);
  p.sh = r.pick(1, 4);
  p.sw = i % 4 == 0 ? 1 : r.pick(2, 4);
  p.off_h = r.pick(0, p.sh + 1);
  p.off_w = r.pick(0, p.sw + 1);
  p.ow = i % 3 == 0 ? r.pick(1, 20) : r.pick(20, 140);
  p.oh = r.pick(1, 9);
  return p;
}

// Phase r's origin anywhere that keeps its reads inside `planes` (the planes sized for the
// phase needing the most plus `extra`): returns the origins and sets planes.
std::vector<int64_t> random_origins(test::XorShift& r, int64_t out, int64_t s, int64_t off,
                                    int64_t extra, int64_t* planes) {
  std::vector<int64_t> q0(size_t(s), 0), q1(size_t(s), -1);
  int64_t span = 1;
  for (int64_t ph = 0; ph < s; ++ph) {
    const int64_t o0 = ((ph - off) % s + s) % s;
    if (o0 >= out) continue;
    q0[size_t(ph)] = (o0 + off) / s;
    q1[size_t(ph)] = (o0 + (out - 1 - o0) / s * s + off) / s;
    span = std::max(span, q1[size_t(ph)] - q0[size_t(ph)] + 1);
  }
  *planes = span + extra;
  std::vector<int64_t> org(static_cast<size_t>(s), 0);
  for (int64_t ph = 0; ph < s; ++ph)  // org in (q1 - planes, q0]
    org[size_t(ph)] = r.pick(q1[size_t(ph)] - *planes + 1, q0[size_t(ph)]);
  return org;
}

}  // namespace

TEST_CASE("glue subpixel: interleave against the reference") {
  test::XorShift r(17, 3);
  int cases = 0;
  for (Isa isa : test::glue_isas())
    for (int i = 0; i < 120; ++i) {
      SubpixelProblem p = random_problem(r, i);
      p.uh = (p.oh - 1 + p.off_h) / p.sh + 1 + r.pick(0, 1);
      p.uw = (p.ow - 1 + p.off_w) / p.sw + 1 + r.pick(0, 1);
      check_case(isa, p, uint32_t(i));
      ++cases;
    }
  CHECK(cases > 0);
}

TEST_CASE("glue subpixel: phase-major planes with per-phase origins") {
  test::XorShift r(29, 5);
  int cases = 0;
  for (Isa isa : test::glue_isas())
    for (int i = 0; i < 80; ++i) {
      SubpixelProblem p = random_problem(r, i);
      p.phase_major = i % 5 != 0;
      p.org_h = random_origins(r, p.oh, p.sh, p.off_h, r.pick(0, 1), &p.uh);
      p.org_w = random_origins(r, p.ow, p.sw, p.off_w, r.pick(0, 1), &p.uw);
      check_case(isa, p, uint32_t(1000 + i));
      ++cases;
    }
  CHECK(cases > 0);
}

TEST_CASE("glue subpixel: refuses what it cannot read") {
  SubpixelProblem p;
  p.uh = p.uw = 2;
  p.oh = p.ow = 5;
  p.sh = p.sw = 2;
  std::string why;
  for (Isa isa : test::glue_isas()) {
    CHECK(create_subpixel_kernel(p, isa, &why) == nullptr);
    CHECK(why.find("past") != std::string::npos);
  }
  // Planes large enough, but a phase's origin puts its first read before them.
  p.uh = p.uw = 3;
  p.org_h = {0, 1};
  for (Isa isa : test::glue_isas()) {
    CHECK(create_subpixel_kernel(p, isa, &why) == nullptr);
    CHECK(why.find("past") != std::string::npos);
  }
}

}  // namespace kiln
