// bool tensors and the shape builders end to end: a bool graph input and output, a mask made
// by a comparison and used by Where, an f32 Expand of a computed tensor (the bcast fast path)
// and a shape subgraph (Shape -> ConstantOfShape -> Equal -> Where -> Expand, as ViT exports
// it) that folds away at load.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "graph/onnx_builder.h"
#include "isa_coverage.h"
#include "runtime/labels.h"
#include "runtime/selection.h"
#include "runtime/session.h"
#include "test_rng.h"

namespace {

using kiln::DType;
using kiln::Tensor;
using kiln::test::randoms;

// x [2, 3, 1, 5] f32, m [2, 3, 4, 5] bool:
//   e = Expand(Relu(x), [2, 3, 4, 5])      (computed: the bcast fast path)
//   w = Where(m, e, -1)                   (runtime bool mask: the reference kernel)
//   y = w + k, with k [1, 3, 1, 1] expanded from a shape subgraph folded at load
//   gt = Greater(x, 0) (bool output), s = Size(x) folded to a constant
std::string model() {
  kiln::test::OnnxBuilder b;
  b.input("x", {2, 3, 1, 5}).input("m", {2, 3, 4, 5}, onnx::TensorProto::BOOL);
  b.output("y").output("gt");
  b.init_i("shape", {4}, {2, 3, 4, 5});
  b.init_f("minus1", {}, {-1.f});
  b.init_f("zero", {}, {0.f});
  b.init_f("kc", {3, 1, 1}, randoms(3, 1, -1.f, 1.f));
  b.node("Relu", {"x"}, {"r"});
  b.node("Expand", {"r", "shape"}, {"e"});
  b.node("Where", {"m", "e", "minus1"}, {"w"});
  // ViT's pattern: z = ConstantOfShape(Shape(shape)) (zeros); kshape = Where(z == -1, z, 1s)
  b.node("Shape", {"shape"}, {"ss"});
  b.node("ConstantOfShape", {"ss"}, {"ones_f"});
  b.node("Cast", {"ones_f"}, {"ones"});
  kiln::test::OnnxBuilder::attr_i(b.node("Cast", {"ones_f"}, {"ones_i"}), "to", 7);
  b.init_i("neg", {}, {-1});
  b.init_i("k1", {4}, {1, 1, 1, 1});
  b.node("Equal", {"ones_i", "neg"}, {"eq"});
  b.node("Where", {"eq", "ones_i", "k1"}, {"kshape"});
  b.node("Expand", {"kc", "kshape"}, {"k"});
  b.node("Add", {"w", "k"}, {"y"});
  b.node("Greater", {"x", "zero"}, {"gt"});
  return b.bytes();
}

std::vector<Tensor> run(const std::string& bytes, const kiln::SessionOptions& o,
                        const std::vector<Tensor>& in,
                        std::unique_ptr<kiln::Session>* keep = nullptr) {
  auto s = kiln::Session::load_memory(bytes.data(), bytes.size(), o);
  std::vector<Tensor> out;
  for (const kiln::IoInfo& io : s->outputs()) out.emplace_back(io.dtype, io.shape);
  s->run(in, out);
  if (keep) *keep = std::move(s);
  return out;
}

}  // namespace

TEST_CASE("dtypes session: bool input/output, Where, Expand fast path, folded shape subgraph") {
  std::string bytes = model();
  // The first Cast has no `to`: a clear error, not a crash.
  kiln::SessionOptions ro;
  ro.reference = true;
  ro.use_cache = false;
  bool threw = false;
  try {
    kiln::Session::load_memory(bytes.data(), bytes.size(), ro);
  } catch (const kiln::Error& e) {
    threw = true;
    CHECK(e.code() == kiln::Code::invalid_model);
    CHECK(std::string(e.what()).find("'to'") != std::string::npos);
  }
  CHECK(threw);
  // Fix it: Cast to float16 (a float32 rounded to half; 1.0 stays 1.0).
  {
    onnx::ModelProto m;
    REQUIRE(m.ParseFromString(bytes));
    for (auto& n : *m.mutable_graph()->mutable_node())
      if (n.op_type() == "Cast" && n.attribute_size() == 0)
        kiln::test::OnnxBuilder::attr_i(n, "to", 10);
    bytes = m.SerializeAsString();
  }
  Tensor x(DType::f32, {2, 3, 1, 5}), m(DType::boolean, {2, 3, 4, 5});
  const std::vector<float> xv = randoms(size_t(x.numel()), 2, -1.f, 1.f);
  std::copy(xv.begin(), xv.end(), x.data<float>());
  for (int64_t i = 0; i < m.numel(); ++i) m.data<uint8_t>()[i] = uint8_t((i * 7 % 5) < 3);
  const std::vector<Tensor> in{x, m};
  std::unique_ptr<kiln::Session> rs;
  const std::vector<Tensor> want = run(bytes, ro, in, &rs);
  REQUIRE(rs->inputs()[1].dtype == DType::boolean);
  REQUIRE(rs->outputs()[1].dtype == DType::boolean);
  // The reference path against a direct computation.
  int bad = 0;
  for (int64_t i = 0; i < want[0].numel(); ++i) {
    const int64_t n = i / 60, c = i / 20 % 3, w = i % 5;
    const float e = std::max(0.f, xv[size_t((n * 3 + c) * 5 + w)]);
    const float k = randoms(3, 1, -1.f, 1.f)[size_t(c)];
    bad += want[0].data<float>()[i] != (m.data<uint8_t>()[i] ? e : -1.f) + k;
  }
  CHECK(bad == 0);
  for (int64_t i = 0; i < x.numel(); ++i)
    CHECK(want[1].data<uint8_t>()[i] == uint8_t(xv[size_t(i)] > 0));
  for (kiln::Isa isa : kiln::testing::jit_isas()) {
    CAPTURE(kiln::isa_name(isa));
    kiln::SessionOptions o;
    o.use_cache = false;
    o.max_isa = isa;
    o.threads = 2;
    std::unique_ptr<kiln::Session> s;
    const std::vector<Tensor> got = run(bytes, o, in, &s);
    const kiln::Graph& g = s->graph();
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const kiln::Node& n = g.nodes[i];
      CAPTURE(n.op);
      // The shape subgraph is folded; only the data path is left.
      CHECK(n.op != "ConstantOfShape");
      CHECK(n.op != "Equal");
      if (n.op == "Expand") CHECK(s->selection().nodes[i].label.kind == kiln::LabelKind::bcast);
    }
    CHECK(std::memcmp(got[0].raw(), want[0].raw(), want[0].nbytes()) == 0);
    CHECK(std::memcmp(got[1].raw(), want[1].raw(), want[1].nbytes()) == 0);
  }
}
