// Resize, Upsample, DepthToSpace and SpaceToDepth end to end, on every ISA path, against the
// reference path: Resize (linear pytorch_half_pixel by scales, nearest by sizes, cubic) picks
// resize labels, DepthToSpace / SpaceToDepth transpose labels, an opset-9 Upsample runs as a
// Resize. No node runs on a reference label.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "graph/onnx_builder.h"
#include "isa_coverage.h"
#include "runtime/labels.h"
#include "runtime/selection.h"
#include "runtime/session.h"
#include "test_rng.h"

namespace {

using kiln::Tensor;
using kiln::test::OnnxBuilder;
using kiln::test::randoms;

void attr_s(onnx::NodeProto& n, const std::string& k, const std::string& v) {
  auto* a = n.add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

// x [2, 19, 7, 9] -> conv 1x1 (24) = c, then the ops under test.
OnnxBuilder conv_model(int64_t opset, const std::vector<std::string>& outputs) {
  OnnxBuilder b(opset);
  b.input("x", {2, 19, 7, 9});
  for (const auto& o : outputs) b.output(o);
  b.init_f("w", {24, 19, 1, 1}, randoms(24 * 19, 1, -0.5f, 0.5f));
  b.node("Conv", {"x", "w"}, {"c"});
  return b;
}

std::string resize_model() {
  OnnxBuilder b = conv_model(13, {"y1", "y2", "y3", "y4", "y5"});
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
  OnnxBuilder::attr_i(b.node("DepthToSpace", {"c"}, {"y4"}), "blocksize", 2);
  OnnxBuilder::attr_i(b.node("SpaceToDepth", {"y1"}, {"y5"}), "blocksize", 2);
  return b.bytes();
}

std::string upsample_model() {
  OnnxBuilder b = conv_model(9, {"y"});
  b.init_f("s", {4}, {1, 1, 2, 3});
  b.node("Upsample", {"c", "s"}, {"y"});
  return b.bytes();
}

std::vector<Tensor> run(const std::string& bytes, const kiln::SessionOptions& o, const Tensor& x,
                        std::unique_ptr<kiln::Session>* keep = nullptr) {
  auto s = kiln::Session::load_memory(bytes.data(), bytes.size(), o);
  std::vector<Tensor> out;
  for (const auto& info : s->outputs()) out.emplace_back(kiln::DType::f32, info.shape);
  s->run({x}, out);
  if (keep) *keep = std::move(s);
  return out;
}

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

void compare(const std::string& bytes, int resize_labels, int transpose_labels) {
  Tensor x(kiln::DType::f32, {2, 19, 7, 9});
  const std::vector<float> xv = randoms(size_t(x.numel()), 10, -2.f, 2.f);
  std::copy(xv.begin(), xv.end(), x.data<float>());
  kiln::SessionOptions ro;
  ro.reference = true;
  ro.use_cache = false;
  const std::vector<Tensor> want = run(bytes, ro, x);
  for (kiln::Isa isa : kiln::testing::jit_isas()) {
    CAPTURE(std::string(kiln::isa_name(isa)));
    kiln::SessionOptions o;
    o.use_cache = false;
    o.max_isa = isa;
    o.threads = 2;
    std::unique_ptr<kiln::Session> s;
    const std::vector<Tensor> got = run(bytes, o, x, &s);
    CHECK(count_labels(*s, kiln::LabelKind::resize) == resize_labels);
    CHECK(count_labels(*s, kiln::LabelKind::transpose) == transpose_labels);
    REQUIRE(got.size() == want.size());
    for (size_t k = 0; k < got.size(); ++k) {
      CAPTURE(k);
      double maxref = 0, maxdiff = 0;
      for (int64_t i = 0; i < want[k].numel(); ++i) {
        const double w = want[k].data<float>()[i];
        maxref = std::max(maxref, std::fabs(w));
        maxdiff = std::max(maxdiff, std::fabs(double(got[k].data<float>()[i]) - w));
      }
      CHECK(maxdiff <= 1e-5 * maxref);
    }
  }
}

}  // namespace

TEST_CASE("resize session: Resize, DepthToSpace, SpaceToDepth run on JIT labels") {
  compare(resize_model(), 3, 2);
}

TEST_CASE("resize session: opset-9 Upsample runs as a Resize") {
  compare(upsample_model(), 1, 0);
}
