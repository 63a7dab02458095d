// ONNX importer: structure validation, initializer conversion, canonical forms.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "error_of.h"
#include "graph/onnx_builder.h"
#include "graph/onnx_import.h"

using kiln::Code;
using kiln::DType;
using kiln::Error;
using kiln::Graph;
using kiln::ImportOptions;
using kiln::test::OnnxBuilder;

namespace {

using kiln::test::error_of;

using kiln::test::import;

OnnxBuilder relu_model() {
  OnnxBuilder b;
  b.input("x", {1, 2}).output("y");
  b.node("Relu", {"x"}, {"y"}, "r");
  return b;
}

}  // namespace

TEST_CASE("import: a minimal model") {
  Graph g = import(relu_model().bytes());
  REQUIRE(g.nodes.size() == 1);
  CHECK(g.nodes[0].op == "Relu");
  CHECK(g.opset == 13);
  REQUIRE(g.inputs.size() == 1);
  CHECK(g.value(g.inputs[0]).shape == kiln::Shape{1, 2});
  CHECK(g.value(g.outputs[0]).name == "y");
}

TEST_CASE("import: empty, garbage and truncated bytes are invalid_model") {
  CHECK(error_of([] { import(""); }).code() == Code::invalid_model);
  std::string garbage(1000, '\xff');
  CHECK(error_of([&] { import(garbage); }).code() == Code::invalid_model);
  OnnxBuilder b = relu_model();
  b.init_f("w", {64}, std::vector<float>(64, 1.f));
  std::string bytes = b.bytes();
  // Every truncation either fails cleanly or (if it cut at a field boundary) still imports.
  int failures = 0;
  for (size_t n = 1; n < bytes.size(); n += 7) {
    try {
      import(bytes.substr(0, n));
    } catch (const Error& e) {
      CHECK((e.code() == Code::invalid_model || e.code() == Code::unsupported));
      ++failures;
    }
  }
  CHECK(failures > 0);
}

TEST_CASE("import: structural errors name what is wrong") {
  SUBCASE("no graph") {
    onnx::ModelProto m;
    m.add_opset_import()->set_version(13);
    auto e = error_of([&] { import(m.SerializeAsString()); });
    CHECK(std::string(e.what()).find("no graph") != std::string::npos);
  }
  SUBCASE("opset out of range") {
    OnnxBuilder b(99);
    b.input("x", {1}).output("y").node("Relu", {"x"}, {"y"});
    auto e = error_of([&] { import(b.bytes()); });
    CHECK(e.code() == Code::unsupported);
    CHECK(std::string(e.what()).find("opset 99") != std::string::npos);
  }
  SUBCASE("missing input names the node and the input") {
    OnnxBuilder b;
    b.input("x", {1}).output("y").node("Add", {"x", "nowhere"}, {"y"}, "adder");
    auto e = error_of([&] { import(b.bytes()); });
    CHECK(e.code() == Code::invalid_model);
    CHECK(std::string(e.what()).find("'adder' (Add)") != std::string::npos);
    CHECK(std::string(e.what()).find("nowhere") != std::string::npos);
  }
  SUBCASE("initializer data does not match dims") {
    OnnxBuilder b = relu_model();
    b.init_f("w", {2, 3}, {1, 2, 3});
    auto e = error_of([&] { import(b.bytes()); });
    CHECK(e.code() == Code::invalid_model);
    CHECK(std::string(e.what()).find("'w'") != std::string::npos);
  }
  SUBCASE("huge dims without data are refused before allocating") {
    OnnxBuilder b = relu_model();
    b.init("big", onnx::TensorProto::FLOAT, {1000000, 1000000, 1000})->set_raw_data("abcd");
    auto e = error_of([&] { import(b.bytes()); });
    CHECK(e.code() == Code::invalid_model);
    CHECK(std::string(e.what()).find("'big'") != std::string::npos);
  }
  SUBCASE("a value produced twice") {
    OnnxBuilder b;
    b.input("x", {1}).output("y");
    b.node("Relu", {"x"}, {"y"}, "a");
    b.node("Relu", {"x"}, {"y"}, "b");
    CHECK(error_of([&] { import(b.bytes()); }).code() == Code::invalid_model);
  }
  SUBCASE("a cycle") {
    OnnxBuilder b;
    b.input("x", {1}).output("z");
    b.node("Add", {"x", "z"}, {"y"}, "a");
    b.node("Relu", {"y"}, {"z"}, "b");
    auto e = error_of([&] { import(b.bytes()); });
    CHECK(std::string(e.what()).find("cycle") != std::string::npos);
  }
  SUBCASE("unsupported dtype of an initializer") {
    OnnxBuilder b = relu_model();
    b.init("d", onnx::TensorProto::UINT16, {1})->add_int32_data(1);
    auto e = error_of([&] { import(b.bytes()); });
    CHECK(e.code() == Code::unsupported);
    CHECK(std::string(e.what()).find("UINT16") != std::string::npos);
  }
  SUBCASE("non-static spatial dimension") {
    OnnxBuilder b;
    b.output("y").node("Relu", {"x"}, {"y"});
    auto* vi = b.model().mutable_graph()->add_input();
    vi->set_name("x");
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    tt->mutable_shape()->add_dim()->set_dim_value(1);
    tt->mutable_shape()->add_dim()->set_dim_param("h");
    auto e = error_of([&] { import(b.bytes()); });
    CHECK(e.code() == Code::unsupported);
    CHECK(std::string(e.what()).find("'h'") != std::string::npos);
  }
}

TEST_CASE("import: batch dimension") {
  OnnxBuilder b;
  b.input("x", {7, 3}, onnx::TensorProto::FLOAT, "N").output("y").node("Relu", {"x"}, {"y"});
  CHECK(import(b.bytes()).value(0).shape == kiln::Shape{1, 3});  // symbolic -> 1
  ImportOptions o;
  o.batch = 4;
  Graph g = import(b.bytes(), o);
  CHECK(g.value(g.inputs[0]).shape == kiln::Shape{4, 3});
}

TEST_CASE("import: initializers listed as inputs are not runtime inputs; int32 widens") {
  OnnxBuilder b;
  b.input("x", {1, 2}).input("w", {2}).output("y");
  b.init_f("w", {2}, {1.5f, -2.f});
  auto* t = b.init("i32", onnx::TensorProto::INT32, {3});
  for (int v : {-1, 0, 70000}) t->add_int32_data(v);
  b.node("Add", {"x", "w"}, {"y"});
  Graph g = import(b.bytes());
  REQUIRE(g.inputs.size() == 1);
  CHECK(g.value(g.inputs[0]).name == "x");
  const auto& w = g.value(g.find("w"));
  REQUIRE(w.is_const());
  CHECK(w.constant->data<float>()[1] == -2.f);
  const auto& i32 = g.value(g.find("i32"));
  REQUIRE(i32.dtype == DType::i64);
  CHECK(i32.constant->data<int64_t>()[0] == -1);
  CHECK(i32.constant->data<int64_t>()[2] == 70000);
}

TEST_CASE("import: Constant nodes become constant values") {
  OnnxBuilder b;
  b.input("x", {2}).output("y");
  auto& c = b.node("Constant", {}, {"c"});
  OnnxBuilder::attr_ints(c, "value_ints", {4, 5});
  auto& c2 = b.node("Constant", {}, {"f"});
  OnnxBuilder::attr_f(c2, "value_float", 2.5f);
  b.node("Mul", {"x", "f"}, {"y"});
  Graph g = import(b.bytes());
  REQUIRE(g.nodes.size() == 1);
  const auto& cv = g.value(g.find("c"));
  REQUIRE(cv.is_const());
  CHECK(cv.shape == kiln::Shape{2});
  CHECK(cv.constant->data<int64_t>()[1] == 5);
  CHECK(g.value(g.find("f")).constant->data<float>()[0] == 2.5f);
  CHECK(g.value(g.find("f")).shape.empty());
}

TEST_CASE("import: old-opset attribute forms become canonical inputs") {
  SUBCASE("Clip opset 9") {
    OnnxBuilder b(9);
    b.input("x", {3}).output("y");
    auto& n = b.node("Clip", {"x"}, {"y"});
    OnnxBuilder::attr_f(n, "max", 6.f);
    Graph g = import(b.bytes());
    const auto& node = g.nodes[0];
    REQUIRE(node.inputs.size() == 3);
    CHECK(node.inputs[1] == kiln::kNoValue);
    CHECK(g.value(node.inputs[2]).constant->data<float>()[0] == 6.f);
    CHECK(!node.has("max"));
  }
  SUBCASE("Slice opset 9") {
    OnnxBuilder b(9);
    b.input("x", {4, 4}).output("y");
    auto& n = b.node("Slice", {"x"}, {"y"});
    OnnxBuilder::attr_ints(n, "starts", {1});
    OnnxBuilder::attr_ints(n, "ends", {3});
    OnnxBuilder::attr_ints(n, "axes", {1});
    Graph g = import(b.bytes());
    const auto& node = g.nodes[0];
    REQUIRE(node.inputs.size() == 4);
    CHECK(g.value(node.inputs[1]).constant->data<int64_t>()[0] == 1);
    CHECK(g.value(node.inputs[2]).constant->data<int64_t>()[0] == 3);
    CHECK(g.value(node.inputs[3]).constant->data<int64_t>()[0] == 1);
  }
  SUBCASE("Softmax: opset 11 defaults to axis 1 with 2-D coercion, opset 13 to axis -1") {
    for (int opset : {11, 13}) {
      OnnxBuilder b(opset);
      b.input("x", {2, 3, 4}).output("y").node("Softmax", {"x"}, {"y"});
      Graph g = import(b.bytes());
      CHECK(g.nodes[0].attr_i("axis", 99) == (opset == 11 ? 1 : -1));
      CHECK(g.nodes[0].attr_i("coerce_2d", 0) == (opset == 11 ? 1 : 0));
    }
  }
  SUBCASE("Pad opset 7 attributes") {
    OnnxBuilder b(7);
    b.input("x", {2}).output("y");
    auto& n = b.node("Pad", {"x"}, {"y"});
    OnnxBuilder::attr_ints(n, "pads", {1, 2});
    OnnxBuilder::attr_f(n, "value", 0.5f);
    Graph g = import(b.bytes());
    REQUIRE(g.nodes[0].inputs.size() == 3);
    CHECK(g.value(g.nodes[0].inputs[1]).constant->data<int64_t>()[1] == 2);
    CHECK(g.value(g.nodes[0].inputs[2]).constant->data<float>()[0] == 0.5f);
  }
}

TEST_CASE("import: unknown domains are refused, unknown ops pass to validation") {
  OnnxBuilder b;
  b.input("x", {1}).output("y");
  b.node("Relu", {"x"}, {"y"}, "custom").set_domain("com.example");
  auto e = error_of([&] { import(b.bytes()); });
  CHECK(e.code() == Code::unsupported);
  CHECK(std::string(e.what()).find("com.example") != std::string::npos);
}

TEST_CASE("import: external data stays inside the model's folder") {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(KILN_TEST_TMP) / "extdata";
  fs::create_directories(dir);
  std::vector<float> w = {1.f, 2.f, 3.f, 4.f};
  {
    std::ofstream f(dir / "w.bin", std::ios::binary);
    f.write("pad!", 4);  // data at offset 4
    f.write(reinterpret_cast<const char*>(w.data()), 16);
  }
  auto make = [&](const std::string& location) {
    OnnxBuilder b;
    b.input("x", {4}).output("y").node("Add", {"x", "w"}, {"y"});
    auto* t = b.init("w", onnx::TensorProto::FLOAT, {4});
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    auto* kv = t->add_external_data();
    kv->set_key("location");
    kv->set_value(location);
    kv = t->add_external_data();
    kv->set_key("offset");
    kv->set_value("4");
    return b.bytes();
  };
  ImportOptions o;
  o.model_dir = dir.string();
  Graph g = import(make("w.bin"), o);
  CHECK(g.value(g.find("w")).constant->data<float>()[3] == 4.f);
  CHECK(error_of([&] { import(make("../w.bin"), o); }).code() == Code::invalid_model);
  CHECK(error_of([&] { import(make("/etc/passwd"), o); }).code() == Code::invalid_model);
  CHECK(error_of([&] { import(make("missing.bin"), o); }).code() == Code::io_error);
  // From memory there is no folder: refused with a clear reason.
  CHECK(error_of([&] { import(make("w.bin")); }).code() == Code::unsupported);
}

TEST_CASE("import: a missing file is an io_error naming the path") {
  auto e = error_of([] { kiln::import_onnx_file("/nonexistent/model.onnx", {}); });
  CHECK(e.code() == Code::io_error);
  CHECK(std::string(e.what()).find("/nonexistent/model.onnx") != std::string::npos);
}
