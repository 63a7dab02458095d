// Load-time resource limits: a hostile model must be rejected with a clear error (naming the
// limit and what exceeds it) before it makes Kiln allocate huge amounts of memory or compute
// for a long time; models just inside the limits still load and compute correctly.
// Expected values are hand-computed.
#include <doctest/doctest.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "graph/onnx_builder.h"
#include "graph/onnx_import.h"
#include "graph/passes.h"
#include "ref_graph.h"
#include "runtime/session.h"
#include "test_infer_util.h"

using kiln::Code;
using kiln::Error;
using kiln::Graph;
using kiln::Tensor;
using kiln::test::OnnxBuilder;
using kiln::test_infer::contains;

namespace {

struct Outcome {
  bool ok = false;
  Code code = Code::ok;
  std::string msg;
};

kiln::SessionOptions opts(bool reference = false) {
  kiln::SessionOptions o;
  o.threads = 1;
  o.reference = reference;
  return o;
}

Outcome load(const std::string& bytes, const kiln::SessionOptions& o = opts()) {
  try {
    kiln::Session::load_memory(bytes.data(), bytes.size(), o);
    return {true, Code::ok, ""};
  } catch (const Error& e) {
    return {false, e.code(), e.what()};
  }
}

// The load fails with `code` and a message containing every part.
#define CHECK_REJECTED(bytes, want_code, ...)                                \
  do {                                                                       \
    Outcome o_ = load(bytes);                                                \
    CHECK_MESSAGE(!o_.ok, "the model loaded");                               \
    CHECK_MESSAGE(o_.code == (want_code), o_.msg);                           \
    for (const char* part_ : {__VA_ARGS__})                                  \
      CHECK_MESSAGE(contains(o_.msg, part_), "message: '" << o_.msg << "'"); \
  } while (0)

#define CHECK_LOADS(bytes)        \
  do {                            \
    Outcome o_ = load(bytes);     \
    CHECK_MESSAGE(o_.ok, o_.msg); \
  } while (0)

using kiln::test::ref_eval;

using kiln::test::import;

// Runs a session on one f32 input; returns its outputs.
std::vector<Tensor> run1(const kiln::Session& s, const std::vector<float>& x) {
  Tensor in(kiln::DType::f32, s.inputs().at(0).shape);
  REQUIRE(in.numel() == int64_t(x.size()));
  std::copy(x.begin(), x.end(), in.data<float>());
  std::vector<Tensor> out;
  for (const auto& o : s.outputs()) out.emplace_back(o.dtype, o.shape);
  s.run({in}, out);
  return out;
}

void add_attr_s(onnx::NodeProto& n, const std::string& k, const std::string& v) {
  auto* a = n.add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

// Raw protobuf pieces, for encodings libprotobuf never writes.
std::string pb_varint(uint64_t v) {
  std::string b;
  for (; v >= 0x80; v >>= 7) b += char((v & 0x7f) | 0x80);
  return b + char(v);
}
std::string pb_bytes(int field, const std::string& v) {
  return pb_varint(uint64_t(field) << 3 | 2) + pb_varint(v.size()) + v;
}

// x[1,4,8,8] -> Conv(w[4,2,3,3], group 2) with the given extra attributes.
OnnxBuilder conv_model(const std::function<void(onnx::NodeProto&)>& attrs) {
  OnnxBuilder b;
  b.input("x", {1, 4, 8, 8}).output("y");
  b.init_f("w", {4, 2, 3, 3}, std::vector<float>(72, 0.5f));
  auto& n = b.node("Conv", {"x", "w"}, {"y"}, "conv");
  OnnxBuilder::attr_i(n, "group", 2);
  attrs(n);
  return b;
}

OnnxBuilder pool_model(const std::function<void(onnx::NodeProto&)>& attrs) {
  OnnxBuilder b;
  b.input("x", {1, 2, 8, 8}).output("y");
  auto& n = b.node("MaxPool", {"x"}, {"y"}, "pool");
  attrs(n);
  return b;
}

}  // namespace

TEST_CASE("limits: node count; long chains load without recursion and compute correctly") {
  SUBCASE("one node more than the limit is refused before anything is built") {
    OnnxBuilder b;
    b.input("x", {1, 2}).output("v" + std::to_string(kiln::kMaxNodes));
    for (int64_t i = 0; i < kiln::kMaxNodes + 1; ++i)
      b.node("Relu", {i ? "v" + std::to_string(i) : "x"}, {"v" + std::to_string(i + 1)});
    CHECK_REJECTED(b.bytes(), Code::unsupported, "100001 nodes", "at most 100000");
  }
  SUBCASE("a 3000-deep chain of Add(+1) gives x + 3000 on the JIT and reference paths") {
    const int depth = 3000;
    OnnxBuilder b;
    b.input("x", {1, 4}).output("v" + std::to_string(depth));
    b.init_f("one", {1}, {1.f});
    for (int i = 0; i < depth; ++i)
      b.node("Add", {i ? "v" + std::to_string(i) : "x", "one"}, {"v" + std::to_string(i + 1)});
    for (bool ref : {false, true}) {
      CAPTURE(ref);
      auto s = kiln::Session::load_memory(b.bytes().data(), b.bytes().size(), opts(ref));
      std::vector<Tensor> y = run1(*s, {0.f, -1.f, 2.5f, -4000.f});
      const float want[4] = {3000.f, 2999.f, 3002.5f, -1000.f};
      for (int i = 0; i < 4; ++i) CHECK(y[0].data<float>()[i] == want[i]);
    }
  }
}

TEST_CASE("limits: the largest accepted graph loads in bounded time") {
  // kMaxNodes Max nodes (each with the input: nothing fuses or folds them): every load stage
  // must stay near-linear in the node count (the memory plan used to be quadratic: 16384 nodes
  // took ~22 s under ASan).
  OnnxBuilder b;
  b.input("x", {1, 2}).output("v" + std::to_string(kiln::kMaxNodes));
  for (int64_t i = 0; i < kiln::kMaxNodes; ++i)
    b.node("Max", {i ? "v" + std::to_string(i) : "x", "x"}, {"v" + std::to_string(i + 1)});
  const std::string bytes = b.bytes();
  auto t0 = std::chrono::steady_clock::now();
  auto s = kiln::Session::load_memory(bytes.data(), bytes.size(), opts(true));
  double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(s->graph().nodes.size() == size_t(kiln::kMaxNodes));
  // Generous: sanitizer builds on a loaded machine (Release: ~2 s). The stage times say which
  // part went quadratic.
  const kiln::LoadStats& st = s->load_stats();
  CHECK_MESSAGE(sec < 120, "loading took " << sec << " s; ms: parse " << st.parse_ms << ", passes "
                                           << st.passes_ms << ", plan " << st.plan_ms
                                           << " (profile " << st.profile_ms << ", solve "
                                           << st.solve_ms << ", jit " << st.jit_ms << ")");
  std::vector<Tensor> y = run1(*s, {-3.f, 2.f});  // max(x, x) = x all along
  CHECK(y[0].data<float>()[0] == -3.f);
  CHECK(y[0].data<float>()[1] == 2.f);
}

TEST_CASE("limits: value count") {
  OnnxBuilder b;
  b.input("x", {1}).output("y");
  b.node("Relu", {"x"}, {"y"});
  // 2 values (x, y) + initializers.
  for (int64_t i = 0; i < kiln::kMaxValues - 1; ++i) b.init_f("c" + std::to_string(i), {}, {0.f});
  CHECK_REJECTED(b.bytes(), Code::unsupported, "131073 values", "at most 131072");
}

TEST_CASE("limits: inputs and outputs per node; large Concat/Sum/Split run correctly") {
  SUBCASE("Concat with 1025 inputs, Split with 1025 outputs are refused") {
    OnnxBuilder b;
    b.input("x", {1, 2}).output("y");
    auto& cat = b.node("Concat", std::vector<std::string>(1025, "x"), {"y"}, "cat");
    OnnxBuilder::attr_i(cat, "axis", 0);
    CHECK_REJECTED(b.bytes(), Code::unsupported, "node 'cat' (Concat)", "1025 inputs",
                   "at most 1024");
    OnnxBuilder c;
    c.input("x", {2050}).output("s0");
    std::vector<std::string> outs;
    for (int i = 0; i < 1025; ++i) outs.push_back("s" + std::to_string(i));
    c.node("Split", {"x"}, outs, "split");
    CHECK_REJECTED(c.bytes(), Code::unsupported, "node 'split' (Split)", "1025 outputs");
  }
  SUBCASE("40-input Concat, 20-input Sum and 24-output Split") {
    OnnxBuilder b;
    b.input("x", {1, 24}).output("cat").output("sum");
    auto& cat = b.node("Concat", std::vector<std::string>(40, "x"), {"cat"}, "cat");
    OnnxBuilder::attr_i(cat, "axis", 0);
    b.node("Sum", std::vector<std::string>(20, "x"), {"sum"}, "sum");
    std::vector<std::string> outs;
    for (int i = 0; i < 24; ++i) {
      outs.push_back("s" + std::to_string(i));
      b.output(outs.back());
    }
    auto& split = b.node("Split", {"x"}, outs, "split");
    OnnxBuilder::attr_i(split, "axis", 1);
    std::vector<float> x(24);
    for (int i = 0; i < 24; ++i) x[size_t(i)] = float(i) - 7.5f;
    for (bool ref : {false, true}) {
      CAPTURE(ref);
      auto s = kiln::Session::load_memory(b.bytes().data(), b.bytes().size(), opts(ref));
      std::vector<Tensor> y = run1(*s, x);
      REQUIRE(y.size() == 26);
      REQUIRE(y[0].shape() == kiln::Shape{40, 24});
      for (int r = 0; r < 40; ++r)
        for (int i = 0; i < 24; ++i) CHECK(y[0].data<float>()[r * 24 + i] == x[size_t(i)]);
      for (int i = 0; i < 24; ++i) CHECK(y[1].data<float>()[i] == 20.f * x[size_t(i)]);
      for (int i = 0; i < 24; ++i) {
        REQUIRE(y[size_t(2 + i)].shape() == kiln::Shape{1, 1});
        CHECK(y[size_t(2 + i)].data<float>()[0] == x[size_t(i)]);
      }
    }
  }
}

TEST_CASE("limits: dimensions, ranks and element counts") {
  SUBCASE("an initializer with a zero dim cannot have an astronomically large one") {
    OnnxBuilder b;
    b.input("x", {1}).output("y");
    b.init("big", onnx::TensorProto::INT64, {0, int64_t(1) << 40});
    b.node("Shape", {"big"}, {"s"});
    b.node("Relu", {"x"}, {"y"});
    CHECK_REJECTED(b.bytes(), Code::invalid_model, "initializer 'big'",
                   "dimension of 1099511627776");
  }
  SUBCASE("initializer and input element counts") {
    OnnxBuilder b;
    b.input("x", {1}).output("y");
    b.init("w", onnx::TensorProto::FLOAT, {1 << 20, 1 << 13});  // 2^33 elements, no data
    b.node("Relu", {"x"}, {"y"});
    CHECK_REJECTED(b.bytes(), Code::invalid_model, "initializer 'w'", "8589934592 elements");
    OnnxBuilder c;
    c.input("x", {1, 1 << 17, 1 << 17}).output("y");  // 2^34 elements
    c.node("Relu", {"x"}, {"y"});
    CHECK_REJECTED(c.bytes(), Code::invalid_model, "graph input 'x'", "too large");
  }
  SUBCASE("rank") {
    OnnxBuilder b;
    b.input("x", std::vector<int64_t>(33, 1)).output("y");
    b.node("Relu", {"x"}, {"y"});
    CHECK_REJECTED(b.bytes(), Code::unsupported, "graph input 'x'", "rank 33");
    OnnxBuilder c;
    c.input("x", {1}).output("y");
    std::vector<int64_t> axes(32);
    for (int i = 0; i < 32; ++i) axes[size_t(i)] = i;
    c.init_i("axes", {32}, axes);
    c.node("Unsqueeze", {"x", "axes"}, {"y"}, "unsq");
    CHECK_REJECTED(c.bytes(), Code::unsupported, "node 'unsq' (Unsqueeze)", "rank 33");
    // 31 axes: rank 32 is accepted, all dims 1.
    OnnxBuilder d;
    d.input("x", {1}).output("y");
    axes.pop_back();
    d.init_i("axes", {31}, axes);
    d.node("Unsqueeze", {"x", "axes"}, {"y"}, "unsq");
    CHECK_LOADS(d.bytes());
  }
  SUBCASE("Reshape of an empty tensor to huge dims") {
    OnnxBuilder b;
    b.input("x", {1}).output("y").output("r");
    b.init("e", onnx::TensorProto::INT64, {0});
    b.init_i("spec", {2}, {0, int64_t(1) << 40});
    auto& r = b.node("Reshape", {"e", "spec"}, {"r"}, "reshape");
    OnnxBuilder::attr_i(r, "allowzero", 1);
    b.node("Relu", {"x"}, {"y"});
    CHECK_REJECTED(b.bytes(), Code::unsupported, "node 'reshape' (Reshape)", "[0,1099511627776]",
                   "limit of 2^31");
  }
  SUBCASE("node outputs above 2^31 elements") {
    OnnxBuilder b;
    b.input("x", {1, 1 << 16}).output("y");
    b.init_i("pads", {4}, {0, 0, (1 << 15) + 1, 0});  // [32769, 65536]: just above 2^31
    b.node("Pad", {"x", "pads"}, {"y"}, "pad");
    CHECK_REJECTED(b.bytes(), Code::unsupported, "node 'pad' (Pad)", "limit of 2^31 elements");
  }
}

TEST_CASE("limits: constants may not take much more memory than the file") {
  // 24M int32 zeros, varint-packed: 24 MB of file, 192 MB once widened to int64; the budget is
  // 4 x 24 MB + 64 MiB (~168 MB).
  const int n = 24 << 20;
  SUBCASE("an int32 initializer") {
    OnnxBuilder b;
    b.input("x", {1}).output("y");
    auto* t = b.init("idx", onnx::TensorProto::INT32, {n});
    t->mutable_int32_data()->Resize(n, 0);
    b.node("Relu", {"x"}, {"y"});
    CHECK_REJECTED(b.bytes(), Code::invalid_model, "initializer 'idx'", "bytes of memory");
  }
  SUBCASE("an ints attribute, packed (one byte per zero) by a hostile writer") {
    OnnxBuilder b;
    b.input("x", {1}).output("y");
    // The node comes in a second `graph` field, which protobuf merges into the first: the only
    // way to emit the packed encoding, which libprotobuf never writes for this field.
    std::string attr = pb_bytes(1, "junk") + pb_varint(20 << 3) + pb_varint(7) +
                       pb_bytes(8, std::string(size_t(n), '\0'));
    std::string node = pb_bytes(1, "x") + pb_bytes(2, "y") + pb_bytes(3, "relu") +
                       pb_bytes(4, "Relu") + pb_bytes(5, attr);
    CHECK_REJECTED(b.bytes() + pb_bytes(7, pb_bytes(1, node)), Code::invalid_model,
                   "node 'relu' (Relu) attribute 'junk'", "bytes of memory");
  }
  SUBCASE("a strings attribute (2 bytes in the file, a std::string in memory)") {
    OnnxBuilder b;
    b.input("x", {1}).output("y");
    auto& r = b.node("Relu", {"x"}, {"y"}, "relu");
    auto* a = r.add_attribute();
    a->set_name("names");
    a->set_type(onnx::AttributeProto::STRINGS);
    for (int i = 0; i < (4 << 20); ++i) a->add_strings();
    CHECK_REJECTED(b.bytes(), Code::invalid_model, "node 'relu' (Relu) attribute 'names'",
                   "bytes of memory");
  }
  SUBCASE("float data of the same element count is fine (4 bytes in file and memory)") {
    OnnxBuilder b;
    b.input("x", {1}).output("y");
    auto* t = b.init("w", onnx::TensorProto::FLOAT, {n});
    t->set_raw_data(std::string(size_t(n) * 4, '\0'));
    b.node("Relu", {"x"}, {"y"});
    CHECK(import(b.bytes()).values.size() == 3);
  }
  SUBCASE("int8 raw data widened to f32 is fine (1 byte in the file, 4 in memory)") {
    // 48 MB of int8: 192 MB as f32, more than 2 bytes per file byte + 64 MiB allow.
    const int n8 = 48 << 20;
    OnnxBuilder b;
    b.input("x", {1}).output("y");
    auto* t = b.init("q", onnx::TensorProto::INT8, {n8});
    t->set_raw_data(std::string(size_t(n8), '\x7f'));
    b.node("Relu", {"x"}, {"y"});
    const Graph g = import(b.bytes());
    const Tensor& q = *g.value(g.find("q")).constant;
    CHECK(q.dtype() == kiln::DType::f32);
    CHECK(q.data<float>()[n8 - 1] == 127.f);
  }
}

TEST_CASE("limits: constant folding is bounded in memory and work") {
  SUBCASE("total folded bytes: 16 Pads of 64 MiB fold, the 17th runs at run time") {
    OnnxBuilder b;
    b.init_f("c", {1}, {2.f});
    b.init_i("pads", {2}, {0, (1 << 24) - 1});  // [1] -> [2^24] floats = 64 MiB each
    for (int i = 0; i < 17; ++i) {
      b.node("Pad", {"c", "pads"}, {"p" + std::to_string(i)});
      b.output("p" + std::to_string(i));
    }
    Graph g = import(b.bytes());
    CHECK(kiln::infer_shapes(g, &ref_eval()) == 16);  // 16 x 64 MiB = the 1 GiB budget
    REQUIRE(g.nodes.size() == 1);
    CHECK(g.nodes[0].op == "Pad");
  }
  SUBCASE("a costly Conv on constants is left to run time, a cheap one folds") {
    OnnxBuilder b;
    b.output("big").output("small");
    // 257 x 257 outputs x 65536 multiply-adds each: ~4.3e9, far above the per-node budget.
    b.init_f("xb", {1, 1, 512, 512}, std::vector<float>(512 * 512, 1.f));
    b.init_f("wb", {1, 1, 256, 256}, std::vector<float>(256 * 256, 1.f));
    b.node("Conv", {"xb", "wb"}, {"big"}, "big_conv");
    b.init_f("xs", {1, 1, 8, 8}, std::vector<float>(64, 1.f));
    b.init_f("ws", {1, 1, 3, 3}, std::vector<float>(9, 1.f));
    b.node("Conv", {"xs", "ws"}, {"small"}, "small_conv");
    Graph g = import(b.bytes());
    CHECK(kiln::infer_shapes(g, &ref_eval()) == 1);
    REQUIRE(g.nodes.size() == 1);
    CHECK(g.nodes[0].name == "big_conv");
    const kiln::Value& small = g.value(g.find("small"));
    REQUIRE(small.is_const());
    REQUIRE(small.shape == kiln::Shape{1, 1, 6, 6});
    for (int i = 0; i < 36; ++i) CHECK(small.constant->data<float>()[i] == 9.f);  // 3x3 ones
  }
}

TEST_CASE("limits: window attribute ranges are checked at load") {
  using F = std::function<void(onnx::NodeProto&)>;
  auto ints = [](const char* k, std::vector<int64_t> v) -> F {
    return [=](onnx::NodeProto& n) { OnnxBuilder::attr_ints(n, k, v); };
  };
  auto group = [](int64_t g) -> F {
    return [=](onnx::NodeProto& n) {
      for (auto& a : *n.mutable_attribute())
        if (a.name() == "group") a.set_i(g);
    };
  };
  SUBCASE("Conv") {
    CHECK_LOADS(conv_model([](onnx::NodeProto&) {}).bytes());  // the baseline is valid
    CHECK_LOADS(conv_model(ints("pads", {1, 1, 1, 1})).bytes());
    const int64_t huge = int64_t(1) << 31;
    const std::vector<std::pair<F, std::vector<const char*>>> bad = {
        {ints("strides", {0, 1}), {"'strides'", "out of range"}},
        {ints("strides", {1, -2}), {"'strides'", "out of range"}},
        {ints("strides", {huge, 1}), {"'strides'", "out of range"}},
        {ints("dilations", {1, 0}), {"'dilations'", "out of range"}},
        {ints("pads", {0, -1, 0, 0}), {"'pads'", "out of range"}},
        {ints("pads", {huge, 0, 0, 0}), {"'pads'", "out of range"}},
        {ints("pads", {1, 1}), {"'pads'", "should have 4 values"}},
        {ints("kernel_shape", {3, 2}), {"kernel_shape", "does not match"}},
        {group(3), {"group 3", "does not divide"}},
        {group(0), {"group 0", "must be >= 1"}},
        {group(-2), {"group -2", "must be >= 1"}},
        {group(4), {"channels per group"}},
    };
    for (const auto& [attrs, parts] : bad) {
      Outcome o = load(conv_model(attrs).bytes());
      CAPTURE(o.msg);
      CHECK(!o.ok);
      CHECK(o.code == Code::invalid_model);
      CHECK(contains(o.msg, "node 'conv' (Conv)"));
      for (const char* p : parts) CHECK(contains(o.msg, p));
    }
  }
  SUBCASE("MaxPool") {
    CHECK_LOADS(pool_model(ints("kernel_shape", {2, 2})).bytes());
    CHECK_REJECTED(pool_model([](onnx::NodeProto&) {}).bytes(), Code::invalid_model,
                   "node 'pool' (MaxPool)", "'kernel_shape' is required");
    CHECK_REJECTED(pool_model(ints("kernel_shape", {0, 2})).bytes(), Code::invalid_model,
                   "'kernel_shape'", "out of range");
    CHECK_REJECTED(pool_model([](onnx::NodeProto& n) {
                     OnnxBuilder::attr_ints(n, "kernel_shape", {2, 2});
                     OnnxBuilder::attr_ints(n, "strides", {1, 0});
                   }).bytes(),
                   Code::invalid_model, "'strides'", "out of range");
    CHECK_REJECTED(pool_model([](onnx::NodeProto& n) {
                     OnnxBuilder::attr_ints(n, "kernel_shape", {2, 2});
                     add_attr_s(n, "auto_pad", "SAME_SIDEWAYS");
                   }).bytes(),
                   Code::invalid_model, "unknown auto_pad");
  }
}

TEST_CASE("limits: Pad amounts") {
  auto pad = [](std::vector<int64_t> pads) {
    OnnxBuilder b;
    b.input("x", {2, 3}).output("y");
    b.init_i("pads", {4}, pads);
    b.node("Pad", {"x", "pads"}, {"y"}, "pad");
    return b.bytes();
  };
  CHECK_LOADS(pad({1, 0, 2, 3}));
  CHECK_REJECTED(pad({0, int64_t(1) << 31, 0, 0}), Code::unsupported, "node 'pad' (Pad)",
                 "too large");
  CHECK_REJECTED(pad({0, 0, int64_t(1) << 62, 0}), Code::unsupported, "too large");
  CHECK_REJECTED(pad({0, -1, 0, 0}), Code::unsupported, "negative pads");
  // Each amount in range but the output has more than 2^31 elements.
  CHECK_REJECTED(pad({0, (int64_t(1) << 31) - 4, 0, 0}), Code::unsupported, "limit of 2^31");
}
