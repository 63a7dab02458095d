// Glue ops end to end, on every ISA path, against the reference path: Tanh, Erf, Sqrt, Exp,
// Log, ... ThresholdedRelu, Pow by
// constant exponents and a variadic Sum after a conv pick eltwise labels; Softmax over a 4-D
// tensor's channels and over the last axis of a 2-D one picks norm labels; Transpose and
// Pad (channel pads too, in nhwc and blocked layouts) pick their own labels, and so do Resize /
// Upsample (resize) and DepthToSpace / SpaceToDepth (transpose). No reference label.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "glue_session_util.h"
#include "graph/onnx_builder.h"
#include "isa_coverage.h"
#include "runtime/labels.h"
#include "runtime/selection.h"
#include "runtime/session.h"
#include "test_rng.h"

namespace {

using kiln::test::randoms;

// Every model: x [2, 19, 7, 9] -> conv 1x1 (24, weights in [-w, w]) = c, then the ops under
// test writing `outputs`.
kiln::test::OnnxBuilder conv_model(const std::vector<std::string>& outputs, float w,
                                   int64_t opset = 13) {
  kiln::test::OnnxBuilder b(opset);
  b.input("x", {2, 19, 7, 9});
  for (const auto& o : outputs) b.output(o);
  b.init_f("w", {24, 19, 1, 1}, randoms(24 * 19, 1, -w, w));
  b.node("Conv", {"x", "w"}, {"c"});
  return b;
}

// y = Sum(Tanh(c), Erf(c), r, Sqrt(c^2), r^1.7) with r = (c^2)^0.5.
std::string glue_ops_model() {
  kiln::test::OnnxBuilder b = conv_model({"y"}, 0.4f);
  b.init_f("two", {}, {2.f});
  b.init_f("half", {}, {0.5f});
  b.init_f("p17", {1}, {1.7f});
  b.node("Tanh", {"c"}, {"t"});
  b.node("Erf", {"c"}, {"e"});
  b.node("Pow", {"c", "two"}, {"s2"});
  b.node("Pow", {"s2", "half"}, {"r"});
  b.node("Sqrt", {"s2"}, {"q"});
  b.node("Pow", {"r", "p17"}, {"g"});
  b.node("Sum", {"t", "e", "r", "q", "g"}, {"y"});
  return b.bytes();
}

// The one-input ops of issue 17 (Exp ... ThresholdedRelu), each on its own output: y_i =
// op_i(c), with Log and Reciprocal on Abs(c) + 0.5 (finite results) and attributes set; the
// ops with steps (Floor, Ceil, ThresholdedRelu) read the input x, which both paths hold
// exactly (the JIT conv rounds c differently from the reference, which could cross a step).
const char* const kUnaryOps[] = {"Exp",      "Neg",  "Floor",          "Ceil",
                                 "Elu",      "Selu", "Celu",           "Softplus",
                                 "Softsign", "Mish", "ThresholdedRelu"};
bool reads_input(const std::string& op) {
  return op == "Floor" || op == "Ceil" || op == "ThresholdedRelu";
}
std::string unary_ops_model() {
  std::vector<std::string> outs;
  for (size_t i = 0; i < std::size(kUnaryOps) + 2; ++i) outs.push_back("y" + std::to_string(i));
  kiln::test::OnnxBuilder b = conv_model(outs, 0.5f);
  b.init_f("half", {}, {0.5f});
  b.node("Abs", {"c"}, {"a"});
  b.node("Add", {"a", "half"}, {"p"});
  b.node("Log", {"p"}, {outs[0]});
  b.node("Reciprocal", {"p"}, {outs[1]});
  for (size_t i = 0; i < std::size(kUnaryOps); ++i) {
    const std::string op = kUnaryOps[i];
    auto& n = b.node(op, {reads_input(op) ? "x" : "c"}, {outs[i + 2]});
    if (op == "Elu") kiln::test::OnnxBuilder::attr_f(n, "alpha", 0.7f);
    if (op == "Celu") kiln::test::OnnxBuilder::attr_f(n, "alpha", 1.5f);
    if (op == "ThresholdedRelu") kiln::test::OnnxBuilder::attr_f(n, "alpha", 0.25f);
  }
  return b.bytes();
}

// y1 = PRelu(c, per-channel slope [24, 1, 1]), y2 = PRelu(c, one slope [1]).
std::string prelu_model() {
  kiln::test::OnnxBuilder b = conv_model({"y1", "y2"}, 0.5f);
  b.init_f("sc", {24, 1, 1}, randoms(24, 3, -1.f, 1.f));
  b.init_f("s1", {1}, {0.25f});
  b.node("PRelu", {"c", "sc"}, {"y1"});
  b.node("PRelu", {"c", "s1"}, {"y2"});
  return b.bytes();
}

// y1 = Softmax(c, axis 1); y2 = Softmax over the last axis of Flatten(GlobalAveragePool(c))
// [2, 24].
std::string softmax_model() {
  kiln::test::OnnxBuilder b = conv_model({"y1", "y2"}, 2.f);
  kiln::test::OnnxBuilder::attr_i(b.node("Softmax", {"c"}, {"y1"}), "axis", 1);
  b.node("GlobalAveragePool", {"c"}, {"g"});
  b.node("Flatten", {"g"}, {"f"});
  kiln::test::OnnxBuilder::attr_i(b.node("Softmax", {"f"}, {"y2"}), "axis", -1);
  return b.bytes();
}

// y1 = Transpose(c, [0, 2, 3, 1]) (nchw -> nhwc), y2 = Transpose(c, [3, 1, 0, 2]).
std::string transpose_model() {
  kiln::test::OnnxBuilder b = conv_model({"y1", "y2"}, 2.f);
  kiln::test::OnnxBuilder::attr_ints(b.node("Transpose", {"c"}, {"y1"}), "perm", {0, 2, 3, 1});
  kiln::test::OnnxBuilder::attr_ints(b.node("Transpose", {"c"}, {"y2"}), "perm", {3, 1, 0, 2});
  return b.bytes();
}

// y1 = Pad(c, H/W, 0.5); y2 = Pad(c, C/H/W, 0) (graph outputs: nothing to fold them into).
std::string pad_model() {
  kiln::test::OnnxBuilder b = conv_model({"y1", "y2"}, 2.f);
  b.init_i("p1", {8}, {0, 0, 1, 2, 0, 0, 3, 0});
  b.init_i("p2", {8}, {0, 1, 1, 1, 0, 2, 0, 1});
  b.init_f("v", {}, {0.5f});
  b.node("Pad", {"c", "p1", "v"}, {"y1"});
  b.node("Pad", {"c", "p2"}, {"y2"});
  return b.bytes();
}

// Channel pads as BlazeFace's and CIFAR ResNets' shortcuts write them: y1 = Relu(Pad(c, C end
// 8) + c2) (24 -> 32 channels; c2 = a 1x1 of x to 32); y2 = Pad(c2, C 16 before / 3 after, H 1
// after) (32 -> 51 channels).
std::string channel_pad_model() {
  kiln::test::OnnxBuilder b = conv_model({"y1", "y2"}, 1.f);
  b.init_f("w2", {32, 19, 1, 1}, randoms(32 * 19, 2, -1.f, 1.f));
  b.node("Conv", {"x", "w2"}, {"c2"});
  b.init_i("p1", {8}, {0, 0, 0, 0, 0, 8, 0, 0});
  b.init_i("p2", {8}, {0, 16, 0, 0, 0, 3, 1, 0});
  b.node("Pad", {"c", "p1"}, {"pc"});
  b.node("Add", {"pc", "c2"}, {"s"});
  b.node("Relu", {"s"}, {"y1"});
  b.node("Pad", {"c2", "p2"}, {"y2"});
  return b.bytes();
}

void attr_s(onnx::NodeProto& n, const std::string& k, const std::string& v) {
  auto* a = n.add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

// y1..y3: reflect, edge and wrap Pads of c on H and W (y1 wider than W: reflection repeats).
// Opset 19, where wrap appeared.
std::string mirror_pad_model() {
  kiln::test::OnnxBuilder b = conv_model({"y1", "y2", "y3"}, 1.f, 19);
  b.init_i("p1", {8}, {0, 0, 2, 9, 0, 0, 3, 1});
  b.init_i("p2", {8}, {0, 0, 1, 0, 0, 0, 0, 2});
  b.init_i("p3", {8}, {0, 0, 0, 1, 0, 0, 4, 1});
  const char* modes[] = {"reflect", "edge", "wrap"};
  for (int i = 0; i < 3; ++i) {
    const std::string k = std::to_string(i + 1);
    attr_s(b.node("Pad", {"c", "p" + k}, {"y" + k}), "mode", modes[i]);
  }
  return b.bytes();
}

// y1 = Resize linear pytorch_half_pixel by scales, y2 nearest asymmetric floor by sizes, y3
// cubic by fractional scales; y4 = DepthToSpace(c), y5 = SpaceToDepth(y1).
std::string resize_model() {
  kiln::test::OnnxBuilder b = conv_model({"y1", "y2", "y3", "y4", "y5"}, 0.5f);
  b.init_f("s2", {4}, {1, 1, 2, 2});
  b.init_f("s3", {4}, {1, 1, 1.5f, 0.7f});
  b.init_i("sz", {4}, {2, 24, 12, 20});
  b.init_f("none", {0}, {});
  auto& lin = b.node("Resize", {"c", "", "s2"}, {"y1"});
  attr_s(lin, "mode", "linear");
  attr_s(lin, "coordinate_transformation_mode", "pytorch_half_pixel");
  auto& nn = b.node("Resize", {"c", "", "none", "sz"}, {"y2"});
  attr_s(nn, "coordinate_transformation_mode", "asymmetric");
  attr_s(nn, "nearest_mode", "floor");
  attr_s(b.node("Resize", {"c", "", "s3"}, {"y3"}), "mode", "cubic");
  kiln::test::OnnxBuilder::attr_i(b.node("DepthToSpace", {"c"}, {"y4"}), "blocksize", 2);
  kiln::test::OnnxBuilder::attr_i(b.node("SpaceToDepth", {"y1"}, {"y5"}), "blocksize", 2);
  return b.bytes();
}

// A Resize that also shrinks N and C (nearest, asymmetric, floor: output o reads input o, as if
// those axes were not resized): the H / W kernels cannot take it (they wrote every input
// plane into a smaller output, and crashed).
std::string shrink_nc_model() {
  kiln::test::OnnxBuilder b = conv_model({"y"}, 0.5f);
  b.init_i("sz", {4}, {1, 1, 14, 9});
  b.init_f("none", {0}, {});
  auto& nn = b.node("Resize", {"c", "", "none", "sz"}, {"y"});
  attr_s(nn, "coordinate_transformation_mode", "asymmetric");
  attr_s(nn, "nearest_mode", "floor");
  return b.bytes();
}

// An opset-9 Upsample (input scales), imported as a Resize.
std::string upsample_model() {
  kiln::test::OnnxBuilder b = conv_model({"y"}, 0.5f, 9);
  b.init_f("s", {4}, {1, 1, 2, 3});
  b.node("Upsample", {"c", "s"}, {"y"});
  return b.bytes();
}

// Runs `bytes` (input [2, 19, 7, 9]) on the reference path and on every ISA path; `check(session)`
// inspects the labels; outputs must match within `tol` of each output's largest magnitude (the
// JIT conv rounds differently from the reference one).
template <class F>
void compare(const std::string& bytes, double tol, F check) {
  kiln::test::compare_with_reference(bytes, {2, 19, 7, 9}, tol, check);
}

// The number of nodes on labels of kind k; no node runs on a reference label.
int count_labels(const kiln::Session& s, kiln::LabelKind k) {
  const kiln::Graph& g = s.graph();
  int count = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const kiln::Label& l = s.selection().nodes[i].label;
    CAPTURE(g.nodes[i].op);
    CHECK(l.kind != kiln::LabelKind::ref);
    count += l.kind == k;
  }
  return count;
}

}  // namespace

TEST_CASE("glue ops session: Tanh, Erf, Sqrt, Pow, Sum run on eltwise labels") {
  compare(glue_ops_model(), 1e-6,
          [](const kiln::Session& s) { CHECK(count_labels(s, kiln::LabelKind::eltwise) == 7); });
}

TEST_CASE("glue ops session: Exp, Log, Neg, Abs, ..., ThresholdedRelu run on eltwise labels") {
  // Abs + Add(0.5) may fuse into one eltwise step; every op of the list is an eltwise label.
  compare(unary_ops_model(), 1e-6, [](const kiln::Session& s) {
    CHECK(count_labels(s, kiln::LabelKind::eltwise) >= int(std::size(kUnaryOps)) + 2);
  });
}

TEST_CASE("glue ops session: PRelu runs on bcast labels") {
  compare(prelu_model(), 1e-6,
          [](const kiln::Session& s) { CHECK(count_labels(s, kiln::LabelKind::bcast) == 2); });
}

TEST_CASE("glue ops session: Softmax over channels and over rows runs on norm labels") {
  compare(softmax_model(), 1e-5,
          [](const kiln::Session& s) { CHECK(count_labels(s, kiln::LabelKind::norm) == 2); });
}

// (y1's NCHW -> NHWC may also be a view of the conv's output stored nhwc: the solver's choice.)
TEST_CASE("glue ops session: Transpose runs on transpose labels") {
  compare(transpose_model(), 1e-5, [](const kiln::Session& s) {
    const int transposes = count_labels(s, kiln::LabelKind::transpose);
    CHECK(transposes >= 1);
    CHECK(transposes + count_labels(s, kiln::LabelKind::view) == 2);
  });
}

TEST_CASE("glue ops session: constant Pad runs on pad labels") {
  compare(pad_model(), 1e-5,
          [](const kiln::Session& s) { CHECK(count_labels(s, kiln::LabelKind::pad) == 2); });
}

TEST_CASE("glue ops session: channel Pads run in nhwc and, on whole blocks, blocked layouts") {
  compare(channel_pad_model(), 1e-5, [](const kiln::Session& s) {
    CHECK(count_labels(s, kiln::LabelKind::pad) == 2);
    const kiln::Graph& g = s.graph();
    const kiln::Layout bl = kiln::blocked_layout(s.isa());
    const int64_t B = kiln::layout_block(bl);
    int pads = 0;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      if (g.nodes[i].op != "Pad") continue;
      ++pads;
      const int64_t c = g.value(g.nodes[i].inputs[0]).shape[1];
      const bool whole = c % B == 0;  // (both pads before the channels are 0 or 16)
      bool nhwc = false, blocked = false;
      for (const kiln::Label& l : kiln::candidate_labels(g, int(i), s.isa(), false)) {
        if (l.kind != kiln::LabelKind::pad) continue;
        CAPTURE(l.key());
        nhwc |= l.in == kiln::Layout::nhwc;
        blocked |= l.in == bl;
        std::string why;
        CHECK_MESSAGE(kiln::instantiate(g, int(i), l, s.isa(), &why).kernel, why);
      }
      CAPTURE(c);
      CHECK(nhwc);
      CHECK(blocked == whole);
    }
    CHECK(pads == 2);
  });
}

TEST_CASE("glue ops session: reflect / edge / wrap Pads run on pad labels") {
  compare(mirror_pad_model(), 1e-5,
          [](const kiln::Session& s) { CHECK(count_labels(s, kiln::LabelKind::pad) == 3); });
}

TEST_CASE(
    "glue ops session: Resize runs on resize labels, DepthToSpace / SpaceToDepth on "
    "transpose labels") {
  compare(resize_model(), 1e-5, [](const kiln::Session& s) {
    CHECK(count_labels(s, kiln::LabelKind::resize) == 3);
    CHECK(count_labels(s, kiln::LabelKind::transpose) == 2);
  });
}

TEST_CASE("glue ops session: a Resize shrinking N and C runs on the reference kernel") {
  compare(shrink_nc_model(), 1e-5, [](const kiln::Session& s) {
    const kiln::Graph& g = s.graph();
    for (size_t i = 0; i < g.nodes.size(); ++i)
      if (g.nodes[i].op == "Resize")
        CHECK(s.selection().nodes[i].label.kind == kiln::LabelKind::ref);
  });
}

TEST_CASE("glue ops session: an opset-9 Upsample runs on a resize label") {
  compare(upsample_model(), 1e-5,
          [](const kiln::Session& s) { CHECK(count_labels(s, kiln::LabelKind::resize) == 1); });
}
