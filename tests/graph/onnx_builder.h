// Builds small ONNX ModelProtos in tests, so importer and pass tests need no fixture files.
#pragma once

#include <onnx/onnx_pb.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "graph/onnx_import.h"

namespace kiln::test {

class OnnxBuilder {
 public:
  explicit OnnxBuilder(int64_t opset = 13) {
    m_.set_ir_version(7);
    auto* o = m_.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    m_.mutable_graph()->set_name("test");
  }

  OnnxBuilder& input(const std::string& name, std::vector<int64_t> dims,
                     int elem = onnx::TensorProto::FLOAT, const std::string& sym0 = "") {
    value_info(m_.mutable_graph()->add_input(), name, dims, elem, sym0);
    return *this;
  }
  // elem: the element type the output declares (0: none).
  OnnxBuilder& output(const std::string& name, int elem = 0) {
    auto* o = m_.mutable_graph()->add_output();
    o->set_name(name);
    if (elem) o->mutable_type()->mutable_tensor_type()->set_elem_type(elem);
    return *this;
  }
  // An initializer with its name, type and dims; the caller fills its data.
  onnx::TensorProto* init(const std::string& name, int type, std::vector<int64_t> dims) {
    auto* t = m_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(type);
    for (auto d : dims) t->add_dims(d);
    return t;
  }
  OnnxBuilder& init_f(const std::string& name, std::vector<int64_t> dims, std::vector<float> v) {
    auto* t = init(name, onnx::TensorProto::FLOAT, std::move(dims));
    for (float x : v) t->add_float_data(x);
    return *this;
  }
  OnnxBuilder& init_i(const std::string& name, std::vector<int64_t> dims, std::vector<int64_t> v) {
    auto* t = init(name, onnx::TensorProto::INT64, std::move(dims));
    for (auto x : v) t->add_int64_data(x);
    return *this;
  }
  onnx::NodeProto& node(const std::string& op, std::vector<std::string> ins,
                        std::vector<std::string> outs, const std::string& name = "") {
    auto* n = m_.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? op + std::to_string(m_.graph().node_size()) : name);
    for (auto& s : ins) n->add_input(s);
    for (auto& s : outs) n->add_output(s);
    return *n;
  }
  static void attr_i(onnx::NodeProto& n, const std::string& k, int64_t v) {
    auto* a = n.add_attribute();
    a->set_name(k);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr_f(onnx::NodeProto& n, const std::string& k, float v) {
    auto* a = n.add_attribute();
    a->set_name(k);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void attr_s(onnx::NodeProto& n, const std::string& k, const std::string& v) {
    auto* a = n.add_attribute();
    a->set_name(k);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }
  static void attr_ints(onnx::NodeProto& n, const std::string& k, std::vector<int64_t> v) {
    auto* a = n.add_attribute();
    a->set_name(k);
    a->set_type(onnx::AttributeProto::INTS);
    for (auto x : v) a->add_ints(x);
  }
  onnx::ModelProto& model() { return m_; }
  std::string bytes() const { return m_.SerializeAsString(); }

 private:
  static void value_info(onnx::ValueInfoProto* vi, const std::string& name,
                         const std::vector<int64_t>& dims, int elem, const std::string& sym0) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    auto* sh = tt->mutable_shape();
    for (size_t i = 0; i < dims.size(); ++i) {
      auto* d = sh->add_dim();
      if (i == 0 && !sym0.empty())
        d->set_dim_param(sym0);
      else
        d->set_dim_value(dims[i]);
    }
  }
  onnx::ModelProto m_;
};

// Imports serialized ONNX bytes (from bytes() or a file) or a builder's model.
inline Graph import(const std::string& bytes, const ImportOptions& o = {}) {
  return import_onnx(bytes.data(), bytes.size(), o);
}
inline Graph import(const OnnxBuilder& b) {
  return import(b.bytes());
}

}  // namespace kiln::test
