// QDQ models in a session: QuantizeLinear -> DequantizeLinear pairs run as eltwise labels (the
// quantize-dequantize glue kernel) on every ISA path, constant DequantizeLinears fold into the
// conv's weights and bias, and the outputs match the reference path.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "glue_session_util.h"
#include "graph/onnx_builder.h"
#include "runtime/labels.h"
#include "runtime/selection.h"
#include "runtime/session.h"
#include "test_rng.h"

namespace {

using kiln::test::OnnxBuilder;

void init_8bit(OnnxBuilder& b, const std::string& name, int type, std::vector<int64_t> dims,
               const std::vector<int>& v) {
  std::string raw;
  for (int x : v) raw.push_back(char(uint8_t(x)));
  b.init(name, type, std::move(dims))->set_raw_data(raw);
}

// x [2, 19, 7, 9] -> Q/DQ (u8) -> Conv 3x3 (int8 per-channel weights, int32 bias) -> Relu ->
// Q/DQ (u8) = y1; Q/DQ (int8) of x = y2.
std::string qdq_model() {
  OnnxBuilder b;
  b.input("x", {2, 19, 7, 9}).output("y1").output("y2");
  const int k = 24, c = 19;
  b.init_f("sx", {}, {2.f / 127});
  init_8bit(b, "zx", onnx::TensorProto::UINT8, {}, {128});
  std::vector<int> wq(size_t(k * c * 9));
  const std::vector<float> r = kiln::test::randoms(wq.size(), 3, -127.f, 127.f);
  for (size_t i = 0; i < wq.size(); ++i) wq[i] = int(r[i]);
  init_8bit(b, "wq", onnx::TensorProto::INT8, {k, c, 3, 3}, wq);
  std::vector<float> sw(k), sb(k);
  for (int i = 0; i < k; ++i) sw[size_t(i)] = 0.001f * float(1 + i % 5);
  for (int i = 0; i < k; ++i) sb[size_t(i)] = sw[size_t(i)] * 2.f / 127;
  b.init_f("sw", {k}, sw);
  init_8bit(b, "zw", onnx::TensorProto::INT8, {k}, std::vector<int>(size_t(k), 0));
  auto* bias = b.init("bq", onnx::TensorProto::INT32, {k});
  for (int i = 0; i < k; ++i) bias->add_int32_data(i * 37 - 400);
  b.init_f("sb", {k}, sb);
  b.init_f("sy", {}, {0.01f});
  init_8bit(b, "zy", onnx::TensorProto::UINT8, {}, {0});
  init_8bit(b, "z8", onnx::TensorProto::INT8, {}, {-7});
  b.node("QuantizeLinear", {"x", "sx", "zx"}, {"xq"});
  b.node("DequantizeLinear", {"xq", "sx", "zx"}, {"xd"});
  OnnxBuilder::attr_i(b.node("DequantizeLinear", {"wq", "sw", "zw"}, {"wd"}), "axis", 0);
  OnnxBuilder::attr_i(b.node("DequantizeLinear", {"bq", "sb"}, {"bd"}), "axis", 0);
  OnnxBuilder::attr_ints(b.node("Conv", {"xd", "wd", "bd"}, {"c"}), "pads", {1, 1, 1, 1});
  b.node("Relu", {"c"}, {"r"});
  b.node("QuantizeLinear", {"r", "sy", "zy"}, {"rq"});
  b.node("DequantizeLinear", {"rq", "sy", "zy"}, {"y1"});
  b.node("QuantizeLinear", {"x", "sx", "z8"}, {"x8"});
  b.node("DequantizeLinear", {"x8", "sx", "z8"}, {"y2"});
  return b.bytes();
}

}  // namespace

TEST_CASE("QDQ session: quantize-dequantize pairs run on eltwise labels on every ISA") {
  // y1 may differ by one output step (0.01) where the JIT conv's rounding crosses a step; y2
  // is exact on both paths (x is held exactly).
  kiln::test::compare_with_reference(qdq_model(), {2, 19, 7, 9}, 0.02, [](const kiln::Session& s) {
    const kiln::Graph& g = s.graph();
    int eltwise = 0;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      CAPTURE(g.nodes[i].op);
      CHECK(g.nodes[i].op != "QuantizeLinear");
      CHECK(g.nodes[i].op != "DequantizeLinear");
      const kiln::Label& l = s.selection().nodes[i].label;
      CHECK(l.kind != kiln::LabelKind::ref);
      eltwise += l.kind == kiln::LabelKind::eltwise;
    }
    CHECK(eltwise == 3);
  });
}
