// Tests of the asmjit glue kernels (jit/glue/glue.h): layout conversions against the plain C++
// convert_layout, concat against a naive per-element copy, and the W^X property of their code.
// Every case runs on each ISA path this CPU has.
#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "graph/error.h"
#include "isa_coverage.h"
#include "jit/glue/asmjit_util.h"
#include "jit/glue/glue.h"
#include "jit/layout.h"
#include "test_glue_util.h"

namespace kiln {
namespace {

using test::GuardedBuf;

constexpr Layout kLayouts[] = {Layout::nchw, Layout::nhwc, Layout::nChw8c, Layout::nChw16c};

// Bitwise comparison (conversions move floats, never compute them); reports the first
// mismatch with its logical position.
bool same_bits(const float* got, const float* want, size_t n, size_t* first_bad) {
  for (size_t i = 0; i < n; ++i)
    if (std::memcmp(got + i, want + i, 4) != 0) {
      *first_bad = i;
      return false;
    }
  return true;
}

TEST_CASE("glue reorder: every layout pair against convert_layout") {
  const int64_t channels[] = {1, 3, 8, 15, 16, 17, 33, 64};
  const int64_t hw[][2] = {{1, 1}, {1, 3}, {3, 7}, {7, 7}, {13, 13}, {7, 1}, {13, 3}};
  int cases = 0;
  for (Isa isa : test::glue_isas())
    for (Layout from : kLayouts)
      for (Layout to : kLayouts)
        for (int64_t C : channels)
          for (auto [H, W] : hw) {
            const int64_t N = (C + H) % 3 == 0 ? 2 : 1;  // some batches of 2
            const Shape s{N, C, H, W};
            CAPTURE(std::string(isa_name(isa)));
            CAPTURE(std::string(layout_name(from)));
            CAPTURE(std::string(layout_name(to)));
            CAPTURE(shape_str(s));
            std::string why;
            auto k = create_reorder_kernel(s, from, to, isa, &why);
            REQUIRE_MESSAGE(k, why);
            GuardedBuf src(size_t(layout_elems(from, s)));
            GuardedBuf dst(size_t(layout_elems(to, s)));
            src.random(uint32_t(C * 131 + H * 7 + W));  // pad lanes too: they must be ignored
            dst.fill(-12345.f);
            std::vector<float> want(dst.size());
            convert_layout(src.data(), from, want.data(), to, s);
            test::run_split(*k, {src.data()}, {dst.data()});
            size_t bad = 0;
            const bool ok = same_bits(dst.data(), want.data(), dst.size(), &bad);
            CHECK_MESSAGE(
                ok, "first mismatch at " << bad << ": got " << dst[bad] << " want " << want[bad]);
            ++cases;
          }
  MESSAGE("reorder cases: " << cases);
}

TEST_CASE("glue reorder: ResNet-sized shapes") {
  const Shape shapes[] = {{1, 2048, 7, 7}, {1, 256, 14, 14}, {2, 96, 9, 11}};
  for (Isa isa : test::glue_isas())
    for (Layout from : kLayouts)
      for (Layout to : kLayouts)
        for (const Shape& s : shapes) {
          CAPTURE(std::string(isa_name(isa)));
          CAPTURE(std::string(layout_name(from)));
          CAPTURE(std::string(layout_name(to)));
          CAPTURE(shape_str(s));
          auto k = create_reorder_kernel(s, from, to, isa, nullptr);
          REQUIRE(k);
          CHECK(k->tiles() >= 2);  // something for a second thread
          GuardedBuf src(size_t(layout_elems(from, s))), dst(size_t(layout_elems(to, s)));
          src.random(5);
          dst.fill(-1.f);
          std::vector<float> want(dst.size());
          convert_layout(src.data(), from, want.data(), to, s);
          test::run_split(*k, {src.data()}, {dst.data()});
          size_t bad = 0;
          CHECK_MESSAGE(same_bits(dst.data(), want.data(), dst.size(), &bad),
                        "first mismatch at " << bad);
        }
}

TEST_CASE("glue reorder: names and refusals") {
  std::string why;
  auto k = create_reorder_kernel({1, 64, 8, 8}, Layout::nchw, Layout::nChw16c, Isa::avx2, &why);
  REQUIRE(k);
  CHECK(k->name() == "reorder_nchw_to_nChw16c__avx2");
  CHECK(k->tiles() >= 1);
  CHECK_FALSE(create_reorder_kernel({1, 64, 8}, Layout::nchw, Layout::nhwc, Isa::avx2, &why));
  CHECK(!why.empty());
  why.clear();
  CHECK_FALSE(create_reorder_kernel({1, 64, 8, 8}, Layout::nchw, Layout::nhwc, Isa::scalar, &why));
  CHECK(!why.empty());
  why.clear();
  CHECK_FALSE(create_reorder_kernel({1, 0, 8, 8}, Layout::nchw, Layout::nhwc, Isa::avx2, &why));
  CHECK(!why.empty());
}

// Concat: inputs made from random NCHW tensors by convert_layout (blocked pad lanes hold
// garbage), the output converted back to NCHW and compared bit for bit with a naive copy.
TEST_CASE("glue concat: channel splits in every layout") {
  const std::vector<std::vector<int64_t>> splits = {
      {16, 16},  {32, 17},    {8, 8, 3},   {3, 5}, {64, 64, 128},
      {1, 1, 1}, {48, 16, 7}, {16, 0, 16}, {40},   {5, 300, 2}};
  const int64_t hw[][2] = {{1, 1}, {3, 7}, {13, 13}, {28, 28}};
  int n = 0;
  for (Isa isa : test::glue_isas())
    for (Layout l : kLayouts)
      for (const auto& ch : splits)
        for (auto [H, W] : hw) {
          int64_t C = 0;
          for (int64_t c : ch) C += c;
          const int64_t N = 2;
          const Shape out{N, C, H, W};
          CAPTURE(std::string(isa_name(isa)));
          CAPTURE(std::string(layout_name(l)));
          CAPTURE(shape_str(out));
          CAPTURE(ch.size());
          bool blocked_ok = true;
          for (size_t i = 0; i + 1 < ch.size(); ++i) blocked_ok &= ch[i] % layout_block(l) == 0;
          std::string why;
          auto k = create_concat_kernel(out, ch, l, isa, &why);
          if (!blocked_ok) {
            CHECK_FALSE(k);
            CHECK(!why.empty());
            continue;
          }
          REQUIRE_MESSAGE(k, why);
          std::vector<std::vector<float>> nchw;
          std::vector<std::unique_ptr<GuardedBuf>> ins;
          std::vector<const float*> src;
          for (size_t i = 0; i < ch.size(); ++i) {
            const Shape si{N, ch[i], H, W};
            std::vector<float> v(size_t(N * ch[i] * H * W));
            std::mt19937 rng(uint32_t(n * 31 + int(i)));
            std::uniform_real_distribution<float> d(-9.f, 9.f);
            for (auto& f : v) f = d(rng);
            const size_t elems = ch[i] ? size_t(layout_elems(l, si)) : 1;
            ins.push_back(std::make_unique<GuardedBuf>(elems));
            ins.back()->fill(55.f);  // pad lanes
            if (ch[i]) convert_layout(v.data(), Layout::nchw, ins.back()->data(), l, si);
            if (layout_block(l) > 1)
              for (size_t j = 0; j < ins.back()->size(); ++j)
                if ((*ins.back())[j] == 0.f) (*ins.back())[j] = 55.f;
            src.push_back(ins.back()->data());
            nchw.push_back(std::move(v));
          }
          GuardedBuf dst(size_t(layout_elems(l, out)));
          dst.fill(-12345.f);
          test::run_split(*k, src, {dst.data()});
          std::vector<float> got(size_t(N * C * H * W));
          convert_layout(dst.data(), l, got.data(), Layout::nchw, out);
          int bad = 0;
          for (int64_t b = 0; b < N; ++b) {
            int64_t c0 = 0;
            for (size_t i = 0; i < ch.size(); ++i) {
              for (int64_t c = 0; c < ch[i]; ++c)
                for (int64_t p = 0; p < H * W; ++p) {
                  const float want = nchw[i][size_t((b * ch[i] + c) * H * W + p)];
                  const float g = got[size_t((b * C + c0 + c) * H * W + p)];
                  if (std::memcmp(&want, &g, 4) != 0 && ++bad <= 3)
                    CHECK_MESSAGE(false, "input " << i << " n " << b << " c " << c << " p " << p
                                                  << ": got " << g << " want " << want);
                }
              c0 += ch[i];
            }
          }
          CHECK(bad == 0);
          ++n;
        }
  MESSAGE("concat cases: " << n);
}

TEST_CASE("glue concat: names and refusals") {
  std::string why;
  auto k = create_concat_kernel({1, 32, 4, 4}, {16, 16}, Layout::nChw16c, Isa::avx512, &why);
  if (testing::has_isa(Isa::avx512)) {
    REQUIRE(k);
    CHECK(k->name() == "concat_f32_nChw16c__avx512");
  }
  CHECK_FALSE(create_concat_kernel({1, 32, 4, 4}, {16, 15}, Layout::nhwc, Isa::avx2, &why));
  CHECK(why.find("add up") != std::string::npos);
  CHECK_FALSE(create_concat_kernel({1, 32, 4, 4}, {8, 24}, Layout::nChw16c, Isa::avx2, &why));
  CHECK(why.find("block") != std::string::npos);
  CHECK_FALSE(create_concat_kernel({1, 32, 4}, {16, 16}, Layout::nhwc, Isa::avx2, &why));
}

// asmjit failures surface as kiln::Error(internal) naming the kernel, never as an abort.
TEST_CASE("glue asmjit_util: errors become kiln::Error naming the kernel") {
  for (Isa isa : test::glue_isas()) {
    glue::AsmBuilder b("broken_kernel", isa);
    b.begin_function(asmjit::FuncSignatureT<void>());
    b.cc().jmp(b.cc().newLabel());  // a label that is never bound
    b.end_function();
    try {
      b.finish();
      CHECK_MESSAGE(false, "finish() accepted an unbound label");
    } catch (const Error& e) {
      CHECK(e.code() == Code::internal);
      CHECK(std::string(e.what()).find("broken_kernel") != std::string::npos);
    }
  }
  // A 16-lane vector on the AVX2 path, a nested function, and a scalar ISA are refused too.
  glue::AsmBuilder b2("k2", Isa::avx2);
  CHECK_THROWS_AS(b2.vec(16), Error);
  b2.begin_function(asmjit::FuncSignatureT<void>());
  CHECK_THROWS_AS(b2.begin_function(asmjit::FuncSignatureT<void>()), Error);
  CHECK_THROWS_AS(glue::AsmBuilder("k3", Isa::scalar), Error);
}

// Code pages of the glue kernels are never writable and executable at once: after creating
// kernels, no mapping of this process is rwx (asmjit's own JitRuntime would leave one).
TEST_CASE("glue: no writable+executable mapping") {
  std::vector<std::unique_ptr<Kernel>> keep;
  for (Isa isa : test::glue_isas())
    keep.push_back(
        create_reorder_kernel({1, 32, 5, 5}, Layout::nchw, Layout::nChw8c, isa, nullptr));
  std::ifstream maps("/proc/self/maps");
  std::string line;
  int rwx = 0;
  while (std::getline(maps, line)) {
    std::string perms;
    if (auto sp = line.find(' '); sp != std::string::npos) perms = line.substr(sp + 1, 4);
    if (perms.size() == 4 && perms[1] == 'w' && perms[2] == 'x') {
      ++rwx;
      MESSAGE("rwx mapping: " << line);
    }
  }
  CHECK(rwx == 0);
}

}  // namespace
}  // namespace kiln
