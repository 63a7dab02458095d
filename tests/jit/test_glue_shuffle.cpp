// The ChannelShuffle glue kernel (jit/glue/shuffle.cpp) against the reference kernel over
// groups, channel tails, several inputs and outputs, offsets, batch 2, every layout and ISA.
#include <doctest/doctest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "graph/channel_shuffle.h"
#include "jit/glue/glue.h"
#include "jit/layout.h"
#include "runtime/ref/ref_kernels.h"
#include "test_glue_util.h"

namespace kiln {
namespace {

using test::GuardedBuf;

struct ShuffleCase {
  std::vector<int64_t> in;
  int64_t groups, offset;
  std::vector<int64_t> split;
};

const ShuffleCase kCases[] = {
    {{24, 24}, 2, 0, {24, 24}},      // ShuffleNetV2 x0.5: blocks need lane permutes
    {{58, 58}, 2, 0, {58, 58}},      // x1.0 stage 2
    {{116}, 2, 0, {116}},            // one input, one output
    {{30}, 3, 0, {30}},              // groups 3
    {{12, 20}, 4, 0, {16, 16}},      // groups 4, inputs straddle the groups
    {{7, 5}, 4, 0, {12}},            // tails everywhere
    {{48}, 1, 24, {24}},             // a channel slice (starts inside a block)
    {{40}, 1, 0, {13, 27}},          // a channel split
    {{16, 16, 16}, 3, 5, {20, 10}},  // offset, part of the channels
    {{3}, 3, 0, {3}},                // groups == channels: identity
    {{9, 9, 6}, 2, 0, {12, 12}},     // three inputs
    {{232, 232}, 2, 0, {232, 232}},  // x1.0 stage 4 width
};

Node shuffle_node(const ShuffleCase& c) {
  Node n;
  n.name = "cs";
  n.op = "ChannelShuffle";
  n.attrs["groups"] = attr_i(c.groups);
  n.attrs["offset"] = attr_i(c.offset);
  n.attrs["split"] = attr_ints(c.split);
  return n;
}

TEST_CASE("glue shuffle: channel gathers against the reference kernel") {
  const int64_t hw[][2] = {{1, 1}, {3, 5}, {7, 7}, {12, 13}};
  const RefKernel ref = find_ref_kernel("ChannelShuffle");
  REQUIRE(bool(ref));
  int n = 0;
  for (Isa isa : test::glue_isas())
    for (Layout l : {Layout::nchw, Layout::nhwc, Layout::nChw8c, Layout::nChw16c})
      for (const ShuffleCase& c : kCases)
        for (const auto& hwp : hw) {
          const int64_t N = 2, H = hwp[0], W = hwp[1];
          CAPTURE(std::string(isa_name(isa)));
          CAPTURE(std::string(layout_name(l)));
          CAPTURE(c.in.size());
          CAPTURE(c.groups);
          CAPTURE(H);
          CAPTURE(W);
          const ChannelShuffleSpec s{c.in, c.groups, c.offset, c.split};
          std::string why;
          auto k = create_channel_shuffle_kernel({N, c.in[0], H, W}, s, l, isa, &why);
          if (l == Layout::nChw16c && isa != Isa::avx512) {
            CHECK_FALSE(k);
            CHECK(!why.empty());
            continue;
          }
          REQUIRE_MESSAGE(k, why);
          // Inputs: random NCHW tensors, in layout l with garbage in the pad lanes.
          std::vector<Tensor> nchw_in;
          std::vector<std::unique_ptr<GuardedBuf>> bufs;
          std::vector<const float*> src;
          for (size_t i = 0; i < c.in.size(); ++i) {
            const Shape si{N, c.in[i], H, W};
            Tensor t(DType::f32, si);
            std::mt19937 rng(uint32_t(n * 31 + int(i)));
            std::uniform_real_distribution<float> d(-9.f, 9.f);
            for (int64_t j = 0; j < t.numel(); ++j) t.data<float>()[j] = d(rng);
            bufs.push_back(std::make_unique<GuardedBuf>(size_t(layout_elems(l, si))));
            bufs.back()->fill(55.f);
            convert_layout(t.data<float>(), Layout::nchw, bufs.back()->data(), l, si);
            if (layout_block(l) > 1)
              for (size_t j = 0; j < bufs.back()->size(); ++j)
                if ((*bufs.back())[j] == 0.f) (*bufs.back())[j] = 55.f;
            src.push_back(bufs.back()->data());
            nchw_in.push_back(std::move(t));
          }
          // Reference outputs.
          std::vector<Tensor> want;
          std::vector<const Tensor*> ins;
          std::vector<Tensor*> outs;
          for (const Tensor& t : nchw_in) ins.push_back(&t);
          for (int64_t sc : c.split) want.emplace_back(DType::f32, Shape{N, sc, H, W});
          for (Tensor& t : want) outs.push_back(&t);
          ref(shuffle_node(c), ins, outs);
          // Kernel outputs, pre-filled with garbage.
          std::vector<std::unique_ptr<GuardedBuf>> dbufs;
          std::vector<float*> dst;
          for (int64_t sc : c.split) {
            dbufs.push_back(std::make_unique<GuardedBuf>(size_t(layout_elems(l, {N, sc, H, W}))));
            dbufs.back()->fill(-12345.f);
            dst.push_back(dbufs.back()->data());
          }
          test::run_split(*k, src, dst);
          for (size_t o = 0; o < c.split.size(); ++o) {
            const Shape so{N, c.split[o], H, W};
            // Blocked pad lanes must be zero: read back through a zero-initialised reorder
            // of the expected tensor.
            std::vector<float> want_l(size_t(layout_elems(l, so)), 0.f);
            convert_layout(want[o].data<float>(), Layout::nchw, want_l.data(), l, so);
            int bad = 0;
            for (size_t j = 0; j < want_l.size(); ++j)
              if (std::memcmp(&want_l[j], &(*dbufs[o])[j], 4) != 0 && ++bad <= 3)
                CHECK_MESSAGE(false, "output " << o << " element " << j << ": got "
                                               << (*dbufs[o])[j] << " want " << want_l[j]);
            CHECK(bad == 0);
          }
          ++n;
        }
  MESSAGE("shuffle cases: " << n);
}

TEST_CASE("glue shuffle: windows per output vector") {
  // x0.5's groups-2 shuffle of two 24-channel inputs, 16 lanes: output 0's first block takes
  // channels 0..7 of both inputs, interleaved.
  const ChannelShuffleSpec s{{24, 24}, 2, 0, {24, 24}};
  const ShufflePlan p = plan_channel_shuffle(s, Layout::nChw16c, 16);
  REQUIRE(p.vectors.size() == 4);
  const ShuffleVector& v = p.vectors[0];
  REQUIRE(v.windows.size() == 2);
  CHECK(v.windows[0].input == 0);
  CHECK(v.windows[1].input == 1);
  CHECK(v.windows[0].lane[2] == 1);   // output channel 2 = input 0 channel 1
  CHECK(v.windows[1].lane[3] == 1);   // output channel 3 = input 1 channel 1
  CHECK(v.windows[1].lane[2] == -1);  // not from input 1
  // Output 1's first block (channels 24..39 of the shuffle = sources 12..19 of each input)
  // reads the inputs' first and second blocks.
  CHECK(p.vectors[2].windows.size() == 4);
  CHECK(p.vectors[1].valid == 8);
  // A slice in nhwc is one unaligned window, lanes in order.
  const ShufflePlan q = plan_channel_shuffle({{48}, 1, 5, {20}}, Layout::nhwc, 8);
  REQUIRE(q.vectors.size() == 3);
  REQUIRE(q.vectors[0].windows.size() == 1);
  CHECK(q.vectors[0].windows[0].chan == 5);
  CHECK(q.vectors[2].valid == 4);
}

TEST_CASE("glue shuffle: names and refusals") {
  std::string why;
  for (Isa isa : test::glue_isas()) {
    auto k =
        create_channel_shuffle_kernel({1, 8, 2, 2}, {{8, 8}, 2, 0, {16}}, Layout::nhwc, isa, &why);
    REQUIRE_MESSAGE(k, why);
    CHECK(k->name() == std::string("shuffle_g2_f32_nhwc__") + isa_name(isa));
    k = create_channel_shuffle_kernel({1, 8, 2, 2}, {{8}, 1, 2, {3, 3}}, Layout::nchw, isa, &why);
    REQUIRE_MESSAGE(k, why);
    CHECK(k->name() == std::string("split_f32_nchw__") + isa_name(isa));
    CHECK_FALSE(
        create_channel_shuffle_kernel({1, 8, 2, 2}, {{8}, 3, 0, {8}}, Layout::nhwc, isa, &why));
    CHECK(why.find("inconsistent") != std::string::npos);
    CHECK_FALSE(
        create_channel_shuffle_kernel({1, 8, 2, 2}, {{8}, 1, 4, {5}}, Layout::nhwc, isa, &why));
    CHECK(why.find("exceed") != std::string::npos);
  }
}

}  // namespace
}  // namespace kiln
