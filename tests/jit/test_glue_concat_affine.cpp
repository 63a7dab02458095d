// Concat with a fused per-channel affine map and unary post-ops (a BatchNormalization + its
// activation fused into the Concat, graph/fuse.cpp): inputs made from random NCHW tensors by
// convert_layout (blocked pad lanes hold garbage), tiles run forwards in two halves and one at a
// time backwards (a store past an input's channels would clobber the next input's, already
// written), compared with post(fma(x, scale, shift)) per element by the scalar post-op semantics.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "graph/post_ops.h"
#include "isa_coverage.h"
#include "jit/glue/glue.h"
#include "jit/layout.h"
#include "test_expect.h"
#include "test_glue_util.h"

using namespace kiln;

TEST_CASE("glue concat affine: channel splits, layouts and post-ops against the scalar map") {
  const std::vector<std::vector<int64_t>> splits = {
      {16, 16}, {64, 32}, {32, 17}, {8, 8, 3}, {3, 5}, {48, 16, 7}, {96, 32, 32, 32}, {5, 300, 2}};
  const int64_t hw[][2] = {{1, 1}, {3, 7}, {14, 14}};
  const std::vector<std::vector<PostOp>> posts = {{},
                                                  {test::mk(PostOp::Kind::relu)},
                                                  {test::mk(PostOp::Kind::clip, 0.f, 6.f)},
                                                  {test::mk(PostOp::Kind::sigmoid)}};
  int n = 0;
  for (Isa isa : test::glue_isas())
    for (Layout l : {blocked_layout(isa), Layout::nhwc})
      for (size_t si = 0; si < splits.size(); ++si)
        for (const auto& hwp : hw)
          for (size_t pi = 0; pi < posts.size(); ++pi) {
            const std::vector<int64_t>& ch = splits[si];
            const int64_t H = hwp[0], W = hwp[1], N = 2;
            int64_t C = 0;
            for (int64_t c : ch) C += c;
            const Shape out{N, C, H, W};
            const std::string what = std::string(isa_name(isa)) + " " + layout_name(l) + " " +
                                     shape_str(out) + " split " + std::to_string(si) + " post " +
                                     std::to_string(pi);
            CAPTURE(what);
            bool whole = true;
            for (size_t i = 0; i + 1 < ch.size(); ++i) whole &= ch[i] % layout_block(l) == 0;
            ConcatAffine aff;
            aff.post = posts[pi];
            std::mt19937 rng(uint32_t(n + 7));
            std::uniform_real_distribution<float> d(-2.f, 2.f);
            for (int64_t c = 0; c < C; ++c) {
              aff.scale.push_back(d(rng));
              aff.shift.push_back(d(rng));
            }
            std::string why;
            auto k = create_concat_kernel(out, ch, l, isa, &why, &aff);
            if (!whole) {
              CHECK_FALSE(k);
              CHECK(!why.empty());
              continue;
            }
            REQUIRE_MESSAGE(k, why);
            ++n;
            std::vector<std::vector<float>> nchw;
            std::vector<std::unique_ptr<test::GuardedBuf>> ins;
            std::vector<const float*> src;
            for (size_t i = 0; i < ch.size(); ++i) {
              const Shape s{N, ch[i], H, W};
              std::vector<float> v(size_t(N * ch[i] * H * W));
              std::uniform_real_distribution<float> dx(-6.f, 6.f);
              for (auto& f : v) f = dx(rng);
              ins.push_back(std::make_unique<test::GuardedBuf>(size_t(layout_elems(l, s))));
              ins.back()->fill(55.f);
              convert_layout(v.data(), Layout::nchw, ins.back()->data(), l, s);
              if (layout_block(l) > 1)  // garbage in the pad lanes, which convert_layout zeroed
                for (int64_t b = 0; b < N; ++b)
                  for (int64_t c = ch[i]; c < round_up(ch[i], layout_block(l)); ++c)
                    for (int64_t p = 0; p < H * W; ++p)
                      (*ins.back())[size_t(layout_offset(l, s, b, c, p / W, p % W))] = 55.f;
              src.push_back(ins.back()->data());
              nchw.push_back(std::move(v));
            }
            test::GuardedBuf dst(size_t(layout_elems(l, out)));
            for (int order = 0; order < 2; ++order) {
              dst.fill(-12345.f);
              if (order == 0) {
                test::run_split(*k, src, {dst.data()});
              } else {
                std::vector<float*> dsts{dst.data()};
                KernelArgs a;
                a.src = src.data();
                a.dst = dsts.data();
                for (int64_t t = k->tiles(); t-- > 0;) k->run(a, t, t + 1);
              }
              int bad = 0;
              for (int64_t b = 0; b < N; ++b) {
                int64_t c0 = 0;
                for (size_t i = 0; i < ch.size(); ++i) {
                  for (int64_t c = 0; c < ch[i]; ++c)
                    for (int64_t p = 0; p < H * W; ++p) {
                      const float x = nchw[i][size_t((b * ch[i] + c) * H * W + p)];
                      float want =
                          std::fma(x, aff.scale[size_t(c0 + c)], aff.shift[size_t(c0 + c)]);
                      for (const PostOp& o : aff.post) want = apply_post_op(o, want, 0, 1, 0);
                      const float got = dst[size_t(layout_offset(l, out, b, c0 + c, p / W, p % W))];
                      const float tol =
                          aff.post.empty() || aff.post[0].kind != PostOp::Kind::sigmoid ? 0.f
                                                                                        : 2e-6f;
                      if (!(std::fabs(got - want) <= tol) && ++bad <= 3)
                        CHECK_MESSAGE(false, "order " << order << " input " << i << " n " << b
                                                      << " c " << c << " p " << p << ": " << got
                                                      << " want " << want);
                    }
                  c0 += ch[i];
                }
                for (int64_t c = C; c < round_up(C, layout_block(l)); ++c)  // pad lanes
                  for (int64_t p = 0; p < H * W; ++p) {
                    const float got = dst[size_t(layout_offset(l, out, b, c, p / W, p % W))];
                    if (got != 0.f && ++bad <= 3)
                      CHECK_MESSAGE(false, "pad lane c " << c << " p " << p << " = " << got);
                  }
              }
              CHECK(bad == 0);
            }
          }
  MESSAGE("concat affine cases: " << n);
  CHECK(n > 0);
}

TEST_CASE("glue concat affine: names and refusals") {
  ConcatAffine aff{
      std::vector<float>(32, 1.f), std::vector<float>(32, 0.f), {test::mk(PostOp::Kind::relu)}};
  std::string why;
  for (Isa isa : test::glue_isas()) {
    auto k = create_concat_kernel({1, 32, 4, 4}, {16, 16}, Layout::nhwc, isa, &why, &aff);
    REQUIRE_MESSAGE(k, why);
    CHECK(k->name() == std::string("concat_affine_relu_f32_nhwc__") + isa_name(isa));
    CHECK_FALSE(create_concat_kernel({1, 32, 4, 4}, {16, 16}, Layout::nchw, isa, &why, &aff));
    CHECK(why.find("nhwc and blocked") != std::string::npos);
    ConcatAffine short_map = aff;
    short_map.shift.pop_back();
    CHECK_FALSE(create_concat_kernel({1, 32, 4, 4}, {16, 16}, Layout::nhwc, isa, &why, &short_map));
    CHECK(why.find("32 scales") != std::string::npos);
    ConcatAffine with_add = aff;
    with_add.post = {test::mk(PostOp::Kind::add)};
    CHECK_FALSE(create_concat_kernel({1, 32, 4, 4}, {16, 16}, Layout::nhwc, isa, &why, &with_add));
    CHECK(why.find("needs an operand") != std::string::npos);
  }
}
