// QDQ models: 8-bit initializers, QuantizeLinear / DequantizeLinear at import (the checks of
// graph/import_qdq.h), their inference, and the pass that fuses Q -> DQ pairs (fuse_qdq).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "error_of.h"
#include "graph/onnx_builder.h"
#include "graph/onnx_import.h"
#include "graph/quant.h"
#include "ref_graph.h"

using kiln::Code;
using kiln::Error;
using kiln::Graph;
using kiln::test::OnnxBuilder;

namespace {

using kiln::test::error_of;

using kiln::test::import;

bool mentions(const Error& e, const std::string& s) {
  return std::string(e.what()).find(s) != std::string::npos;
}

// An 8-bit initializer in raw_data.
void init_8bit(OnnxBuilder& b, const std::string& name, int type, std::vector<int64_t> dims,
               const std::vector<int>& v) {
  auto* t = b.init(name, type, std::move(dims));
  std::string raw;
  for (int x : v) raw.push_back(char(uint8_t(x)));
  t->set_raw_data(raw);
}

// x -> Q(scale, zp) -> DQ(same) -> y, with a u8 (or s8) zero point.
OnnxBuilder qdq_model(int zp_type, int zp, float scale = 0.5f, int64_t opset = 13) {
  OnnxBuilder b(opset);
  b.input("x", {1, 3, 2, 2}).output("y");
  b.init_f("s", {}, {scale});
  init_8bit(b, "z", zp_type, {}, {zp});
  b.node("QuantizeLinear", {"x", "s", "z"}, {"q"}, "q");
  b.node("DequantizeLinear", {"q", "s", "z"}, {"y"}, "dq");
  return b;
}

// Per grid NAME: a scale initializer sNAME and an 8-bit zero point zNAME (uint8 unless given).
struct Grid {
  std::string name;
  float scale;
  int zero_point;
  int type = onnx::TensorProto::UINT8;
};
void add_grids(OnnxBuilder& b, const std::vector<Grid>& grids) {
  for (const Grid& q : grids) {
    b.init_f("s" + q.name, {}, {q.scale});
    init_8bit(b, "z" + q.name, q.type, {}, {q.zero_point});
  }
}

// QuantizeLinear / DequantizeLinear on grid `grid` (add_grids), the node named after `out`.
void q_on(OnnxBuilder& b, const std::string& in, const std::string& grid, const std::string& out) {
  b.node("QuantizeLinear", {in, "s" + grid, "z" + grid}, {out}, out + "_q");
}
void dq_on(OnnxBuilder& b, const std::string& q, const std::string& grid, const std::string& out) {
  b.node("DequantizeLinear", {q, "s" + grid, "z" + grid}, {out}, out + "_dq");
}

// A builder that imports ONNX Runtime's com.microsoft domain (version 1) too.
OnnxBuilder contrib_builder() {
  OnnxBuilder b;
  auto* o = b.model().add_opset_import();
  o->set_domain("com.microsoft");
  o->set_version(1);
  return b;
}

const kiln::Node& node_named(const Graph& g, const std::string& name) {
  for (const kiln::Node& n : g.nodes)
    if (n.name == name) return n;
  FAIL("no node " << name);
  return g.nodes[0];
}

// Every output of g (optimised) equals the plain graph's, bit for bit.
template <class Results>
void check_same_outputs(const Graph& plain, const Results& want, const Graph& g,
                        const Results& got) {
  REQUIRE(plain.outputs.size() == g.outputs.size());
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    CAPTURE(k);
    const kiln::Tensor& w = want.at(plain.outputs[k]);
    const kiln::Tensor& o = got.at(g.outputs[k]);
    REQUIRE(o.numel() == w.numel());
    for (int64_t i = 0; i < o.numel(); ++i) CHECK(o.data<float>()[i] == w.data<float>()[i]);
  }
}

}  // namespace

TEST_CASE("import: QuantizeLinear records the integer type it saturates to") {
  {
    Graph g = import(qdq_model(onnx::TensorProto::UINT8, 128));
    CHECK(node_named(g, "q").attr_i("to", 0) == kiln::kOnnxUint8);
    const kiln::Value& z = g.value(g.find("z"));
    REQUIRE(z.is_const());
    CHECK(z.dtype == kiln::DType::f32);  // widened, exactly
    CHECK(z.constant->data<float>()[0] == 128.f);
  }
  {
    Graph g = import(qdq_model(onnx::TensorProto::INT8, -5));
    CHECK(node_named(g, "q").attr_i("to", 0) == kiln::kOnnxInt8);
    CHECK(g.value(g.find("z")).constant->data<float>()[0] == -5.f);
  }
  {  // no zero point: uint8; opset 21's output_dtype: that type
    OnnxBuilder b(21);
    b.input("x", {4}).output("y");
    b.init_f("s", {}, {0.25f});
    b.node("QuantizeLinear", {"x", "s"}, {"q"}, "q");
    b.node("DequantizeLinear", {"q", "s"}, {"y"}, "dq");
    CHECK(node_named(import(b), "q").attr_i("to", 0) == kiln::kOnnxUint8);
    OnnxBuilder::attr_i(*b.model().mutable_graph()->mutable_node(0), "output_dtype",
                        onnx::TensorProto::INT8);
    CHECK(node_named(import(b), "q").attr_i("to", 0) == kiln::kOnnxInt8);
  }
}

TEST_CASE("import: 8-bit tensors are read only by DequantizeLinear") {
  {  // an arithmetic op on a uint8 initializer would compute in float, not in uint8
    OnnxBuilder b;
    b.input("x", {4}).output("y");
    init_8bit(b, "w", onnx::TensorProto::UINT8, {4}, {1, 2, 3, 250});
    b.node("Add", {"x", "w"}, {"y"}, "add");
    const Error e = error_of([&] { import(b); });
    CHECK(e.code() == Code::unsupported);
    CHECK(mentions(e, "'add'"));
    CHECK(mentions(e, "'w'"));
  }
  {  // a QuantizeLinear output read by anything else
    OnnxBuilder b = qdq_model(onnx::TensorProto::UINT8, 0);
    b.node("Relu", {"q"}, {"r"}, "relu");
    b.output("r");
    const Error e = error_of([&] { import(b); });
    CHECK(e.code() == Code::unsupported);
    CHECK(mentions(e, "'relu'"));
  }
  {  // a Cast to another 8-bit type would wrap; one to its own type (PyTorch's exports) or to
     // float is an Identity, and reading that Identity's output is reading the 8-bit tensor
    for (int to : {onnx::TensorProto::INT8, onnx::TensorProto::UINT8, onnx::TensorProto::FLOAT}) {
      CAPTURE(to);
      OnnxBuilder b = qdq_model(onnx::TensorProto::UINT8, 0);
      OnnxBuilder::attr_i(b.node("Cast", {"q"}, {"qc"}, "cast"), "to", to);
      b.node("Relu", {"qc"}, {"r"}, "relu");
      b.output("r");
      if (to == onnx::TensorProto::UINT8) {
        const Error e = error_of([&] { import(b); });
        CHECK(e.code() == Code::unsupported);
        CHECK(mentions(e, "'relu'"));
      } else if (to == onnx::TensorProto::INT8) {
        const Error e = error_of([&] { import(b); });
        CHECK(e.code() == Code::unsupported);
        CHECK(mentions(e, "'cast'"));
      } else {  // float holds the same integers: the Relu reads them as floats
        Graph g = import(b);
        CHECK(node_named(g, "cast").op == "Identity");
      }
    }
  }
  {  // a graph output must declare its 8-bit type (the caller receives bytes)
    OnnxBuilder b = qdq_model(onnx::TensorProto::UINT8, 0);
    b.output("q");
    const Error e = error_of([&] { import(b); });
    CHECK(e.code() == Code::invalid_model);
    CHECK(mentions(e, "graph output 'q'"));
    OnnxBuilder declared = qdq_model(onnx::TensorProto::UINT8, 0);
    declared.output("q", onnx::TensorProto::UINT8);
    const Graph g = import(declared);
    CHECK(g.io_dtypes.at("q") == DType::u8);
    CHECK(g.value(g.find("q")).dtype == DType::f32);
  }
  {  // an 8-bit graph input: held as float32, dequantized (the caller passes bytes)
    for (int t : {onnx::TensorProto::UINT8, onnx::TensorProto::INT8}) {
      OnnxBuilder b;
      b.input("x", {4}, t).output("y");
      b.init_f("s", {}, {0.5f});
      b.node("DequantizeLinear", {"x", "s"}, {"y"}, "dq");
      const Graph g = import(b);
      CHECK(g.io_dtypes.at("x") == (t == onnx::TensorProto::UINT8 ? DType::u8 : DType::i8));
      CHECK(g.value(g.find("x")).dtype == DType::f32);
      OnnxBuilder relu;  // read as a float by another op: refused
      relu.input("x", {4}, t).output("y");
      relu.node("Relu", {"x"}, {"y"}, "relu");
      CHECK(error_of([&] { import(relu); }).code() == Code::unsupported);
    }
  }
  {  // dequantizing a float tensor
    OnnxBuilder b;
    b.input("x", {4}).output("y");
    b.init_f("s", {}, {0.5f});
    b.node("DequantizeLinear", {"x", "s"}, {"y"}, "dq");
    const Error e = error_of([&] { import(b); });
    CHECK(e.code() == Code::unsupported);
    CHECK(mentions(e, "'dq'"));
  }
  {  // a zero point of another type than the data
    OnnxBuilder b;
    b.input("x", {4}).output("y");
    b.init_f("s", {}, {0.5f});
    init_8bit(b, "w", onnx::TensorProto::UINT8, {4}, {1, 2, 3, 4});
    init_8bit(b, "z", onnx::TensorProto::INT8, {}, {0});
    b.node("DequantizeLinear", {"w", "s", "z"}, {"d"}, "dq");
    b.node("Add", {"x", "d"}, {"y"});
    const Error e = error_of([&] { import(b); });
    CHECK(e.code() == Code::invalid_model);
    CHECK(mentions(e, "zero point 'z'"));
  }
  {  // a zero point computed at run time
    OnnxBuilder b;
    b.input("x", {4}).input("zf", {}).output("y");
    b.init_f("s", {}, {0.5f});
    b.node("QuantizeLinear", {"x", "s", "zf"}, {"q"}, "q");
    b.node("DequantizeLinear", {"q", "s"}, {"y"}, "dq");
    const Error e = error_of([&] { import(b); });
    CHECK(e.code() == Code::unsupported);
    CHECK(mentions(e, "'zf'"));
  }
}

TEST_CASE("QDQ: inference checks the scale against the axis") {
  OnnxBuilder b;
  b.input("x", {1, 3, 2, 2}).output("y");
  b.init_f("s", {2}, {0.5f, 0.25f});  // 2 scales for 3 channels
  b.node("QuantizeLinear", {"x", "s"}, {"q"}, "q");
  b.node("DequantizeLinear", {"q", "s"}, {"y"}, "dq");
  Graph g = import(b);
  const Error e = error_of([&] { kiln::infer_shapes(g); });
  CHECK(e.code() == Code::invalid_model);
  CHECK(mentions(e, "'q'"));

  OnnxBuilder c = qdq_model(onnx::TensorProto::UINT8, 3, 0.5f, 21);
  OnnxBuilder::attr_i(*c.model().mutable_graph()->mutable_node(0), "block_size", 2);
  Graph h = import(c);
  CHECK(error_of([&] { kiln::infer_shapes(h); }).code() == Code::unsupported);
}

namespace {

// y = Conv(DQ(x's Q), DQ(w int8, per-channel), DQ(b int32)) -> Q -> DQ. With `torch_form`,
// as PyTorch's quantized exports write it: each QuantizeLinear output Cast to its own type
// before its DequantizeLinear, the bias's int32 zero point Cast(ConstantOfShape([2])).
OnnxBuilder quantized_conv(bool torch_form) {
  OnnxBuilder b;
  b.input("x", {1, 2, 3, 3}).output("y");
  b.init_f("sx", {}, {0.02f});
  init_8bit(b, "zx", onnx::TensorProto::UINT8, {}, {120});
  init_8bit(b, "wq", onnx::TensorProto::INT8, {2, 2, 1, 1}, {-127, 5, 64, 127});
  b.init_f("sw", {2}, {0.01f, 0.03f});
  init_8bit(b, "zw", onnx::TensorProto::INT8, {2}, {0, 0});
  {
    auto* t = b.init("bq", onnx::TensorProto::INT32, {2});
    t->add_int32_data(-300);
    t->add_int32_data(77);
  }
  b.init_f("sb", {2}, {0.02f * 0.01f, 0.02f * 0.03f});
  b.init_f("sy", {}, {0.05f});
  init_8bit(b, "zy", onnx::TensorProto::INT8, {}, {-10});
  // A Cast to the QuantizeLinear output's own type (torch_form), else the output itself.
  auto own_type = [&](const std::string& q, int type) {
    if (!torch_form) return q;
    OnnxBuilder::attr_i(b.node("Cast", {q}, {q + "_cast"}, q + "_cast"), "to", type);
    return q + "_cast";
  };
  b.node("QuantizeLinear", {"x", "sx", "zx"}, {"xq"}, "qx");
  b.node("DequantizeLinear", {own_type("xq", onnx::TensorProto::UINT8), "sx", "zx"}, {"xd"}, "dqx");
  auto& dw = b.node("DequantizeLinear", {"wq", "sw", "zw"}, {"wd"}, "dqw");
  OnnxBuilder::attr_i(dw, "axis", 0);
  std::vector<std::string> dqb_in = {"bq", "sb"};
  if (torch_form) {
    b.init_i("bshape", {1}, {2});
    b.node("ConstantOfShape", {"bshape"}, {"bz0"}, "bz0");  // float 0s
    OnnxBuilder::attr_i(b.node("Cast", {"bz0"}, {"bz"}, "bz"), "to", onnx::TensorProto::INT32);
    dqb_in.push_back("bz");
  }
  OnnxBuilder::attr_i(b.node("DequantizeLinear", dqb_in, {"bd"}, "dqb"), "axis", 0);
  b.node("Conv", {"xd", "wd", "bd"}, {"c"}, "conv");
  b.node("QuantizeLinear", {"c", "sy", "zy"}, {"cq"}, "qc");
  b.node("DequantizeLinear", {own_type("cq", onnx::TensorProto::INT8), "sy", "zy"}, {"y"}, "dqc");
  return b;
}

}  // namespace

TEST_CASE("QDQ: Q -> DQ pairs fuse, constant DQs fold, and the graph computes the same") {
  std::vector<float> xs(18);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = -2.4f + 0.31f * float(i);  // past the u8 range
  auto fill = [&](size_t, kiln::Tensor& t) { std::copy(xs.begin(), xs.end(), t.data<float>()); };
  // The unoptimised plain graph on the reference kernels is the oracle.
  Graph plain = import(quantized_conv(false));
  kiln::infer_shapes(plain);
  auto want = kiln::test::run_graph_ref(plain, fill).at(plain.outputs[0]);

  for (bool torch_form : {false, true}) {
    CAPTURE(torch_form);
    Graph g = import(quantized_conv(torch_form));
    kiln::optimize(g, kiln::test::ref_eval());
    int fused = 0;
    for (const kiln::Node& n : g.nodes) {
      CHECK(n.op != "QuantizeLinear");
      CHECK(n.op != "DequantizeLinear");
      CHECK(n.op != "Identity");
      if (n.op == "QuantizeDequantize") {
        ++fused;
        CHECK(n.attr_f("scale", 0) > 0);
      }
    }
    CHECK(fused == 2);
    auto got = kiln::test::run_graph_ref(g, fill).at(g.outputs[0]);
    REQUIRE(got.numel() == want.numel());
    for (int64_t i = 0; i < got.numel(); ++i) {
      CAPTURE(i);
      CHECK(got.data<float>()[i] == want.data<float>()[i]);
    }
  }
  // Hand check of one element against graph/quant.h: channel 1 of pixel 0.
  const auto r8 = kiln::quant_range(kiln::kOnnxUint8);
  const float x0 = kiln::dequantize_value(kiln::quantize_value(xs[0], 0.02f, 120, r8), 0.02f, 120);
  const float x1 = kiln::dequantize_value(kiln::quantize_value(xs[9], 0.02f, 120, r8), 0.02f, 120);
  const float c1 = x0 * (64 * 0.03f) + x1 * (127 * 0.03f) + 77 * (0.02f * 0.03f);
  const auto rs = kiln::quant_range(kiln::kOnnxInt8);
  const float y1 = kiln::dequantize_value(kiln::quantize_value(c1, 0.05f, -10, rs), 0.05f, -10);
  CHECK(want.data<float>()[9] == doctest::Approx(y1).epsilon(1e-6));
}

TEST_CASE("QDQ: pairs with different parameters stay two ops") {
  OnnxBuilder b;
  b.input("x", {1, 3, 2, 2}).output("y");
  b.init_f("s", {}, {0.5f});
  b.init_f("s2", {}, {0.25f});
  b.node("QuantizeLinear", {"x", "s"}, {"q"}, "q");
  b.node("DequantizeLinear", {"q", "s2"}, {"y"}, "dq");
  Graph g = import(b);
  kiln::optimize(g, kiln::test::ref_eval());
  int q = 0, dq = 0;
  for (const kiln::Node& n : g.nodes) {
    q += n.op == "Quantize";  // (the glue kernels' standalone quantization)
    dq += n.op == "DequantizeLinear";
  }
  CHECK(q == 1);
  CHECK(dq == 1);
  CHECK(g.nodes.size() == 2);
}

TEST_CASE("QDQ: a requantization on the grid its input is on is dropped, exactly") {
  // x -> Q/DQ(a) -> MaxPool -> Q/DQ(a) -> MaxPool -> Q/DQ(a) -> Q/DQ(a) = y1 (every later Q/DQ
  // is on a's grid: dropped), and MaxPool -> Q/DQ(b) = y2 (another grid: kept); a dilated
  // MaxPool (outside maxpool_keeps_grid's cases) -> Q/DQ(a) = y3 (kept).
  OnnxBuilder b;
  b.input("x", {1, 3, 5, 5}).output("y1").output("y2").output("y3");
  b.init_f("sa", {}, {0.1f});
  init_8bit(b, "za", onnx::TensorProto::UINT8, {}, {30});
  b.init_f("sb", {}, {0.07f});
  init_8bit(b, "zb", onnx::TensorProto::UINT8, {}, {30});
  auto qdq = [&](const std::string& in, const std::string& out, const char* s, const char* z) {
    b.node("QuantizeLinear", {in, s, z}, {out + "q"}, out + "_q");
    b.node("DequantizeLinear", {out + "q", s, z}, {out}, out + "_dq");
  };
  auto pool = [&](const std::string& in, const std::string& out, int64_t pad, bool dilated) {
    auto& n = b.node("MaxPool", {in}, {out}, out + "_pool");
    OnnxBuilder::attr_ints(n, "kernel_shape", {2, 2});
    OnnxBuilder::attr_ints(n, "strides", {2, 2});
    OnnxBuilder::attr_ints(n, "pads", {pad, pad, pad, pad});
    if (dilated) OnnxBuilder::attr_ints(n, "dilations", {2, 2});
  };
  qdq("x", "a0", "sa", "za");
  pool("a0", "p1", 1, false);
  qdq("p1", "a1", "sa", "za");
  pool("a1", "p2", 0, false);
  qdq("p2", "a2", "sa", "za");
  qdq("a2", "y1", "sa", "za");
  qdq("p1", "y2", "sb", "zb");
  pool("a0", "p3", 1, true);
  qdq("p3", "y3", "sa", "za");
  std::vector<float> xs(75);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = -3.f + 0.173f * float(i);
  auto fill = [&](size_t, kiln::Tensor& t) { std::copy(xs.begin(), xs.end(), t.data<float>()); };
  Graph plain = import(b);
  kiln::infer_shapes(plain);
  const auto want = kiln::test::run_graph_ref(plain, fill);
  Graph g = import(b);
  kiln::optimize(g, kiln::test::ref_eval());
  int qdqs = 0;
  for (const kiln::Node& n : g.nodes) qdqs += n.op == "QuantizeDequantize";
  CHECK(qdqs == 3);  // a0's, y2's and y3's
  for (const kiln::Node& n : g.nodes)
    if (n.op == "MaxPool") CHECK(kiln::maxpool_keeps_grid(g, n) == (n.name != "p3_pool"));
  const auto got = kiln::test::run_graph_ref(g, fill);
  check_same_outputs(plain, want, g, got);
}

TEST_CASE("QDQ: a quantize-dequantize after a Concat (or a MaxPool of one) moves onto its inputs") {
  // Q/DQ(a)(x1), Q/DQ(b)(x2) -> Concat -> MaxPool -> Q/DQ(c) = y1: c moves above the MaxPool,
  // then onto both concat inputs (exact: c commutes with the concat and with a max). A concat
  // one of whose inputs is read elsewhere too keeps its Q/DQ(c) = y2 below it.
  OnnxBuilder b;
  b.input("x1", {1, 16, 6, 6}).input("x2", {1, 16, 6, 6}).output("y1").output("y2").output("o");
  add_grids(b, {{"a", 0.1f, 30}, {"b", 0.07f, 100}, {"c", 0.13f, 70}});
  auto qdq = [&](const std::string& in, const std::string& out, const std::string& grid) {
    b.node("QuantizeLinear", {in, "s" + grid, "z" + grid}, {out + "q"}, out + "_q");
    b.node("DequantizeLinear", {out + "q", "s" + grid, "z" + grid}, {out}, out + "_dq");
  };
  qdq("x1", "a1", "a");
  qdq("x2", "b2", "b");
  OnnxBuilder::attr_i(b.node("Concat", {"a1", "b2"}, {"cat"}, "cat"), "axis", 1);
  auto& pool = b.node("MaxPool", {"cat"}, {"p"}, "pool");
  OnnxBuilder::attr_ints(pool, "kernel_shape", {3, 3});
  OnnxBuilder::attr_ints(pool, "strides", {2, 2});
  OnnxBuilder::attr_ints(pool, "pads", {1, 1, 1, 1});
  qdq("p", "y1", "c");
  qdq("x1", "a3", "a");
  qdq("x2", "b3", "b");
  OnnxBuilder::attr_i(b.node("Concat", {"a3", "b3"}, {"cat2"}, "cat2"), "axis", 1);
  qdq("cat2", "y2", "c");
  b.node("Relu", {"b3"}, {"o"}, "other");  // b3 is read by another node too
  std::vector<float> xs(576);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = -9.f + 0.037f * float(i);
  auto fill = [&](size_t k, kiln::Tensor& t) {
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = xs[size_t(i)] * (k ? -1.f : 1.f);
  };
  Graph plain = import(b);
  kiln::infer_shapes(plain);
  const auto want = kiln::test::run_graph_ref(plain, fill);
  Graph g = import(b);
  kiln::optimize(g, kiln::test::ref_eval());
  std::vector<kiln::ValueId> produced_by_qdq;
  for (const kiln::Node& n : g.nodes) {
    if (n.op == "MaxPool") {  // its input: the concat of the two moved c's
      const kiln::Node* c = nullptr;
      for (const kiln::Node& m : g.nodes)
        if (m.outputs[0] == n.inputs[0]) c = &m;
      REQUIRE(c);
      CHECK(c->op == "Concat");
      for (kiln::ValueId x : c->inputs)
        for (const kiln::Node& m : g.nodes)
          if (m.outputs[0] == x) {
            CHECK(m.op == "QuantizeDequantize");
            CHECK(m.attr_f("scale", 0) == 0.13f);
          }
    }
    if (n.op == "QuantizeDequantize" && n.attr_f("scale", 0) == 0.13f)
      produced_by_qdq.push_back(n.outputs[0]);
  }
  CHECK(produced_by_qdq.size() == 3);  // two on y1's concat inputs, y2's below its concat
  const auto got = kiln::test::run_graph_ref(g, fill);
  check_same_outputs(plain, want, g, got);
}

namespace {

// x -> Q -> conv 3x3 (int8 weights per channel, int32 bias) -> MaxPool 3x3 s1 -> 1x1 conv
// (per-tensor weights) -> add (the pool's output) -> concat (with the first conv's output) ->
// global average pool -> Flatten -> DQ = y, every tensor between them uint8 on its own grid.
// `op_form`: as the ONNX model zoo's int8 models write it (QLinearConv, com.microsoft's
// QLinearAdd / QLinearConcat / QLinearGlobalAveragePool, MaxPool and Flatten on the uint8
// tensors); else the QDQ form that defines it (DequantizeLinear, the float op, QuantizeLinear).
OnnxBuilder quantized_net(bool op_form) {
  OnnxBuilder b = contrib_builder();
  b.input("x", {1, 2, 5, 5}).output("y");
  add_grids(b, {{"x", 0.031f, 128},
                {"c", 0.045f, 7},
                {"c2", 0.052f, 90},
                {"a", 0.06f, 0},
                {"k", 0.07f, 20},
                {"g", 0.02f, 5}});
  std::vector<int> w(72), w2(16);
  for (size_t i = 0; i < w.size(); ++i) w[i] = int((i * 37) % 255) - 127;
  for (size_t i = 0; i < w2.size(); ++i) w2[i] = int((i * 53) % 200) - 100;
  init_8bit(b, "w", onnx::TensorProto::INT8, {4, 2, 3, 3}, w);
  b.init_f("sw", {4}, {0.011f, 0.007f, 0.013f, 0.009f});
  init_8bit(b, "zw", onnx::TensorProto::INT8, {4}, {0, 0, 0, 0});
  init_8bit(b, "w2", onnx::TensorProto::INT8, {4, 4, 1, 1}, w2);
  b.init_f("sw2", {}, {0.015f});
  init_8bit(b, "zw2", onnx::TensorProto::INT8, {}, {0});
  {
    auto* t = b.init("bq", onnx::TensorProto::INT32, {4});
    for (int v : {-900, 35, 4000, -77}) t->add_int32_data(v);
  }
  auto pool = [&](const std::string& in, const std::string& out) {
    auto& n = b.node("MaxPool", {in}, {out}, out + "_pool");
    OnnxBuilder::attr_ints(n, "kernel_shape", {3, 3});
    OnnxBuilder::attr_ints(n, "pads", {1, 1, 1, 1});
  };
  auto pads = [](onnx::NodeProto& n) { OnnxBuilder::attr_ints(n, "pads", {1, 1, 1, 1}); };
  auto contrib = [](onnx::NodeProto& n) -> onnx::NodeProto& {
    n.set_domain("com.microsoft");
    return n;
  };
  b.node("QuantizeLinear", {"x", "sx", "zx"}, {"xq"}, "qx");
  if (op_form) {
    pads(b.node("QLinearConv", {"xq", "sx", "zx", "w", "sw", "zw", "sc", "zc", "bq"}, {"cq"},
                "conv"));
    pool("cq", "pq");
    b.node("QLinearConv", {"pq", "sc", "zc", "w2", "sw2", "zw2", "sc2", "zc2"}, {"c2q"}, "conv2");
    contrib(
        b.node("QLinearAdd", {"c2q", "sc2", "zc2", "pq", "sc", "zc", "sa", "za"}, {"aq"}, "add"));
    OnnxBuilder::attr_i(
        contrib(b.node("QLinearConcat", {"sk", "zk", "aq", "sa", "za", "cq", "sc", "zc"}, {"kq"},
                       "cat")),
        "axis", 1);
    OnnxBuilder::attr_i(
        contrib(b.node("QLinearGlobalAveragePool", {"kq", "sk", "zk", "sg", "zg"}, {"gq"}, "gap")),
        "channels_last", 0);
    b.node("Flatten", {"gq"}, {"fq"}, "flat");
    b.node("DequantizeLinear", {"fq", "sg", "zg"}, {"y"}, "dqy");
    return b;
  }
  auto dq = [&](const std::string& q, const std::string& grid, const std::string& out) {
    dq_on(b, q, grid, out);
  };
  auto q = [&](const std::string& in, const std::string& grid, const std::string& out) {
    q_on(b, in, grid, out);
  };
  dq("xq", "x", "xd");
  OnnxBuilder::attr_i(b.node("DequantizeLinear", {"w", "sw", "zw"}, {"wd"}, "wd"), "axis", 0);
  b.node("Mul", {"sx", "sw"}, {"sb"}, "sb");
  OnnxBuilder::attr_i(b.node("DequantizeLinear", {"bq", "sb"}, {"bd"}, "bd"), "axis", 0);
  pads(b.node("Conv", {"xd", "wd", "bd"}, {"cf"}, "conv"));
  q("cf", "c", "cq");
  dq("cq", "c", "cd");
  pool("cd", "pf");
  q("pf", "c", "pq");
  dq("pq", "c", "pd");
  b.node("DequantizeLinear", {"w2", "sw2", "zw2"}, {"w2d"}, "w2d");
  b.node("Conv", {"pd", "w2d"}, {"c2f"}, "conv2");
  q("c2f", "c2", "c2q");
  dq("c2q", "c2", "c2d");
  dq("pq", "c", "pd2");
  b.node("Add", {"c2d", "pd2"}, {"af"}, "add");
  q("af", "a", "aq");
  dq("aq", "a", "ad");
  dq("cq", "c", "cd2");
  OnnxBuilder::attr_i(b.node("Concat", {"ad", "cd2"}, {"kf"}, "cat"), "axis", 1);
  q("kf", "k", "kq");
  dq("kq", "k", "kd");
  b.node("GlobalAveragePool", {"kd"}, {"gf"}, "gap");
  q("gf", "g", "gq");
  dq("gq", "g", "gd");
  b.node("Flatten", {"gd"}, {"ff"}, "flat");
  q("ff", "g", "fq");
  dq("fq", "g", "y");
  return b;
}

}  // namespace

TEST_CASE("QOperator: the operator-form ops compute what their QDQ forms do, and fuse alike") {
  std::vector<float> xs(50);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = 4.f * std::sin(0.7f * float(i));
  auto fill = [&](size_t, kiln::Tensor& t) { std::copy(xs.begin(), xs.end(), t.data<float>()); };
  Graph plain = import(quantized_net(false));
  kiln::infer_shapes(plain);
  const auto want = kiln::test::run_graph_ref(plain, fill);

  Graph ops = import(quantized_net(true));  // (the expansion is at import)
  for (const kiln::Node& n : ops.nodes) CHECK(n.op.find("QLinear") == std::string::npos);
  kiln::infer_shapes(ops);
  check_same_outputs(plain, want, ops, kiln::test::run_graph_ref(ops, fill));

  // Optimised, both forms are the same graph: every Q -> DQ pair fused (the uint8 MaxPool and
  // Flatten get a DequantizeLinear before them and a QuantizeLinear after), nothing left over.
  for (bool op_form : {false, true}) {
    CAPTURE(op_form);
    Graph g = import(quantized_net(op_form));
    kiln::optimize(g, kiln::test::ref_eval());
    std::map<std::string, int> count;
    for (const kiln::Node& n : g.nodes) ++count[n.op];
    CHECK(count["QuantizeLinear"] == 0);
    CHECK(count["DequantizeLinear"] == 0);  // (y's pair fuses too)
    CHECK(count["Conv"] == 2);
    CHECK(count["QuantizeDequantize"] >= 4);
    check_same_outputs(plain, want, g, kiln::test::run_graph_ref(g, fill));
  }
}

TEST_CASE("QOperator: what the import refuses") {
  auto proto_node = [](OnnxBuilder& b, const std::string& name) -> onnx::NodeProto& {
    for (auto& n : *b.model().mutable_graph()->mutable_node())
      if (n.name() == name) return n;
    FAIL("no node " << name);
    return *b.model().mutable_graph()->mutable_node(0);
  };
  auto refused = [](OnnxBuilder& b, const std::string& what) {
    const Error e = error_of([&] { import(b); });
    CHECK(e.code() == Code::unsupported);
    CHECK_MESSAGE(mentions(e, what), std::string(e.what()));
  };
  {  // another contrib op
    OnnxBuilder b = quantized_net(true);
    proto_node(b, "add").set_op_type("QLinearSoftmax");
    refused(b, "QLinearSoftmax of domain 'com.microsoft'");
  }
  {  // a default-domain op spelled as Kiln names the contrib ones
    OnnxBuilder b = quantized_net(true);
    proto_node(b, "add").set_op_type("com.microsoft.QLinearAdd");
    proto_node(b, "add").set_domain("");
    refused(b, "com.microsoft.QLinearAdd is not supported");
  }
  {  // NHWC pooling
    OnnxBuilder b = quantized_net(true);
    for (auto& n : *b.model().mutable_graph()->mutable_node())
      if (n.op_type() == "QLinearGlobalAveragePool") n.mutable_attribute(0)->set_i(1);
    refused(b, "channels_last");
  }
  {  // an 8-bit tensor read by an op that does not just move values
    OnnxBuilder b = quantized_net(true);
    for (auto& n : *b.model().mutable_graph()->mutable_node())
      if (n.op_type() == "Flatten") n.set_op_type("Relu");
    refused(b, "'flat'");
  }
}

namespace {

// x -> Q -> average pool 3x3 s2 -> sigmoid -> leaky relu, times the pool's output -> Reshape
// [1, 36] -> MatMul by int8 weights [36, 5] (per-column scales) -> DQ = y, uint8 between (int8
// after the leaky relu). `op_form`: com.microsoft's QLinearAveragePool, QLinearSigmoid,
// QLinearLeakyRelu, QLinearMul, a Reshape of the uint8 tensor, ONNX's QLinearMatMul; else the
// QDQ form that defines them.
OnnxBuilder quantized_head(bool op_form) {
  OnnxBuilder b = contrib_builder();
  b.input("x", {1, 4, 7, 7}).output("y");
  add_grids(b, {{"x", 0.03f, 128},
                {"p", 0.02f, 100},
                {"s", 0.004f, 0},
                {"l", 0.003f, 0, onnx::TensorProto::INT8},
                {"m", 0.0025f, 3},
                {"y", 0.01f, 60}});
  std::vector<int> w(180);
  for (size_t i = 0; i < w.size(); ++i) w[i] = int((i * 41) % 251) - 125;
  init_8bit(b, "w", onnx::TensorProto::INT8, {36, 5}, w);
  b.init_f("sw", {5}, {0.01f, 0.02f, 0.015f, 0.005f, 0.03f});
  init_8bit(b, "zw", onnx::TensorProto::INT8, {5}, {0, 0, 0, 0, 0});
  b.init_i("shape", {2}, {1, 36});
  auto pool_attrs = [](onnx::NodeProto& n) {
    OnnxBuilder::attr_ints(n, "kernel_shape", {3, 3});
    OnnxBuilder::attr_ints(n, "strides", {2, 2});
    return &n;
  };
  auto contrib = [&](const char* op, std::vector<std::string> in, const std::string& out) {
    auto& n = b.node(op, std::move(in), {out}, out);
    n.set_domain("com.microsoft");
    return &n;
  };
  b.node("QuantizeLinear", {"x", "sx", "zx"}, {"xq"}, "qx");
  if (op_form) {
    pool_attrs(*contrib("QLinearAveragePool", {"xq", "sx", "zx", "sp", "zp"}, "pq"));
    contrib("QLinearSigmoid", {"pq", "sp", "zp", "ss", "zs"}, "sq");
    OnnxBuilder::attr_f(*contrib("QLinearLeakyRelu", {"sq", "ss", "zs", "sl", "zl"}, "lq"), "alpha",
                        0.1f);
    contrib("QLinearMul", {"lq", "sl", "zl", "pq", "sp", "zp", "sm", "zm"}, "mq");
    b.node("Reshape", {"mq", "shape"}, {"rq"}, "flat");
    b.node("QLinearMatMul", {"rq", "sm", "zm", "w", "sw", "zw", "sy", "zy"}, {"yq"}, "mm");
    b.node("DequantizeLinear", {"yq", "sy", "zy"}, {"y"}, "dqy");
    return b;
  }
  auto dq = [&](const std::string& q, const std::string& grid, const std::string& out) {
    dq_on(b, q, grid, out);
  };
  auto q = [&](const std::string& in, const std::string& grid, const std::string& out) {
    q_on(b, in, grid, out);
  };
  dq("xq", "x", "xd");
  pool_attrs(b.node("AveragePool", {"xd"}, {"pf"}, "pool"));
  q("pf", "p", "pq");
  dq("pq", "p", "pd");
  b.node("Sigmoid", {"pd"}, {"sf"}, "sig");
  q("sf", "s", "sq");
  dq("sq", "s", "sd");
  OnnxBuilder::attr_f(b.node("LeakyRelu", {"sd"}, {"lf"}, "leaky"), "alpha", 0.1f);
  q("lf", "l", "lq");
  dq("lq", "l", "ld");
  dq("pq", "p", "pd2");
  b.node("Mul", {"ld", "pd2"}, {"mf"}, "mul");
  q("mf", "m", "mq");
  dq("mq", "m", "md");
  b.node("Reshape", {"md", "shape"}, {"rf"}, "flat");
  OnnxBuilder::attr_i(b.node("DequantizeLinear", {"w", "sw", "zw"}, {"wd"}, "wd"), "axis", 1);
  b.node("MatMul", {"rf", "wd"}, {"yf"}, "mm");
  q("yf", "y", "yq");
  dq("yq", "y", "y");
  return b;
}

}  // namespace

TEST_CASE("QOperator: pooling, activations, Mul and QLinearMatMul compute their QDQ forms") {
  std::vector<float> xs(196);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = 3.5f * std::sin(0.37f * float(i));
  auto fill = [&](size_t, kiln::Tensor& t) { std::copy(xs.begin(), xs.end(), t.data<float>()); };
  Graph plain = import(quantized_head(false));
  kiln::infer_shapes(plain);
  const auto want = kiln::test::run_graph_ref(plain, fill);
  for (bool optimised : {false, true}) {
    CAPTURE(optimised);
    Graph g = import(quantized_head(true));
    if (optimised)
      kiln::optimize(g, kiln::test::ref_eval());
    else
      kiln::infer_shapes(g);
    int leftover = 0;
    for (const kiln::Node& n : g.nodes)
      leftover += optimised && (n.op == "QuantizeLinear" || n.op == "DequantizeLinear");
    CHECK(leftover == 0);
    check_same_outputs(plain, want, g, kiln::test::run_graph_ref(g, fill));
  }
}

TEST_CASE("QDQ: a requantization after an op that only moves values (Flatten, Transpose) drops") {
  // x -> Q/DQ(a) -> Flatten -> Transpose -> Q/DQ(a) = y1 (on a's grid: dropped) and
  // Flatten -> Q/DQ(b) = y2 (another grid: kept).
  OnnxBuilder b;
  b.input("x", {2, 3, 2, 2}).output("y1").output("y2");
  b.init_f("sa", {}, {0.1f});
  init_8bit(b, "za", onnx::TensorProto::UINT8, {}, {30});
  b.init_f("sb", {}, {0.07f});
  init_8bit(b, "zb", onnx::TensorProto::UINT8, {}, {30});
  auto qdq = [&](const std::string& in, const std::string& out, const char* s, const char* z) {
    b.node("QuantizeLinear", {in, s, z}, {out + "q"}, out + "_q");
    b.node("DequantizeLinear", {out + "q", s, z}, {out}, out + "_dq");
  };
  qdq("x", "a0", "sa", "za");
  b.node("Flatten", {"a0"}, {"f"}, "flat");
  OnnxBuilder::attr_ints(b.node("Transpose", {"f"}, {"t"}, "tr"), "perm", {1, 0});
  qdq("t", "y1", "sa", "za");
  qdq("f", "y2", "sb", "zb");
  std::vector<float> xs(24);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = -3.f + 0.29f * float(i);
  auto fill = [&](size_t, kiln::Tensor& t) { std::copy(xs.begin(), xs.end(), t.data<float>()); };
  Graph plain = import(b);
  kiln::infer_shapes(plain);
  const auto want = kiln::test::run_graph_ref(plain, fill);
  Graph g = import(b);
  kiln::optimize(g, kiln::test::ref_eval());
  std::vector<float> scales;
  for (const kiln::Node& n : g.nodes)
    if (n.op == "QuantizeDequantize") scales.push_back(n.attr_f("scale", 0));
  CHECK(scales == std::vector<float>{0.1f, 0.07f});  // a0's and y2's
  check_same_outputs(plain, want, g, kiln::test::run_graph_ref(g, fill));
}

TEST_CASE("QDQ: a nearest-neighbour Resize reads uint8 (the operator form's upsampling)") {
  // x -> Q(a) -> Resize(nearest, x2) -> DQ(a) = y: the Resize reads the bytes; after the passes
  // the dequantization sits before it (one quantize-dequantize, no Q / DQ left), the same values.
  auto model = [](const char* mode) {
    OnnxBuilder b;
    b.input("x", {1, 2, 3, 4}).output("y");
    add_grids(b, {{"a", 0.05f, 100}});
    b.init_f("scales", {4}, {1.f, 1.f, 2.f, 2.f});
    q_on(b, "x", "a", "q");
    auto& r = b.node("Resize", {"q", "", "scales"}, {"r"}, "resize");
    OnnxBuilder::attr_s(r, "mode", mode);
    dq_on(b, "r", "a", "y");
    return b;
  };
  std::vector<float> xs(24);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = -2.f + 0.37f * float(i);
  auto fill = [&](size_t, kiln::Tensor& t) { std::copy(xs.begin(), xs.end(), t.data<float>()); };
  const OnnxBuilder b = model("nearest");
  Graph plain = import(b);
  kiln::infer_shapes(plain);
  const auto want = kiln::test::run_graph_ref(plain, fill);
  Graph g = import(b);
  kiln::optimize(g, kiln::test::ref_eval());
  std::vector<std::string> ops;
  for (const kiln::Node& n : g.nodes) ops.push_back(n.op);
  CHECK(ops == std::vector<std::string>{"QuantizeDequantize", "Resize"});
  check_same_outputs(plain, want, g, kiln::test::run_graph_ref(g, fill));
  // A linear Resize interpolates: not a move of the integers, refused on bytes.
  const Error e = error_of([&] { import(model("linear")); });
  CHECK(e.code() == Code::unsupported);
  CHECK(mentions(e, "'q'"));
}
