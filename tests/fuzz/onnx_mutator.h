// Structure-aware mutations of ONNX models for libFuzzer's LLVMFuzzerCustomMutator. Byte-level
// mutations of a protobuf mostly break its framing, so half the time the input is parsed as a
// ModelProto and changed the way a hostile or buggy exporter would: an attribute or a dim set
// to an extreme value, an op type swapped, inputs rewired, nodes duplicated or dropped,
// initializer data truncated, the opset changed. The other half (and whenever the input does
// not parse) libFuzzer's own byte mutations run, so the parser itself is fuzzed too.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "graph/ops.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace kiln::fuzz {

class OnnxMutator {
 public:
  explicit OnnxMutator(unsigned seed) : rng_(seed) {}

  // Mutates m in place (one to three changes).
  void mutate(onnx::ModelProto& m) {
    int n = 1 + int(pick(3));
    for (int i = 0; i < n; ++i) mutate_once(m);
  }

 private:
  uint64_t pick(uint64_t n) { return n ? rng_() % n : 0; }
  bool coin() { return rng_() & 1; }

  int64_t interesting_int() {
    static const int64_t v[] = {0,
                                1,
                                -1,
                                2,
                                3,
                                -2,
                                4,
                                7,
                                8,
                                16,
                                255,
                                1024,
                                1025,
                                65535,
                                (int64_t(1) << 31) - 1,
                                int64_t(1) << 31,
                                int64_t(1) << 32,
                                -(int64_t(1) << 31),
                                int64_t(1) << 62,
                                std::numeric_limits<int64_t>::max(),
                                std::numeric_limits<int64_t>::min()};
    return v[pick(sizeof v / sizeof v[0])];
  }
  float interesting_float() {
    static const float v[] = {0.f,
                              -0.f,
                              1.f,
                              -1.f,
                              0.5f,
                              1e-30f,
                              1e30f,
                              -1e30f,
                              std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity(),
                              std::numeric_limits<float>::quiet_NaN(),
                              std::numeric_limits<float>::denorm_min()};
    return v[pick(sizeof v / sizeof v[0])];
  }
  std::string op_name() {  // any supported op (the op table itself, so new ops are covered)
    const std::vector<OpInfo>& ops = all_ops();
    return std::string(ops[pick(ops.size())].name);
  }
  std::string attr_name() {
    static const char* v[] = {"kernel_shape",
                              "strides",
                              "dilations",
                              "pads",
                              "group",
                              "auto_pad",
                              "axis",
                              "axes",
                              "perm",
                              "split",
                              "num_outputs",
                              "starts",
                              "ends",
                              "keepdims",
                              "allowzero",
                              "transA",
                              "transB",
                              "alpha",
                              "beta",
                              "epsilon",
                              "ceil_mode",
                              "count_include_pad",
                              "mode",
                              "value",
                              "value_int",
                              "value_ints",
                              "value_float",
                              "value_floats",
                              "min",
                              "max",
                              "start",
                              "end",
                              "coerce_2d",
                              "post_ops",
                              "post_alpha",
                              "post_beta",
                              "storage_order",
                              "training_mode",
                              "noop_with_empty_axes",
                              "spatial"};
    return v[pick(sizeof v / sizeof v[0])];
  }
  std::string string_value() {
    static const char* v[] = {"NOTSET",      "VALID", "SAME_UPPER", "SAME_LOWER", "constant",
                              "reflect",     "edge",  "relu",       "clip",       "add",
                              "scale_shift", "swish", "sigmoid",    "",           "bogus"};
    return v[pick(sizeof v / sizeof v[0])];
  }

  // Names a node input may refer to: graph inputs, initializers and node outputs.
  std::vector<std::string> value_names(const onnx::GraphProto& g) {
    std::vector<std::string> names;
    for (const auto& i : g.input()) names.push_back(i.name());
    for (const auto& t : g.initializer()) names.push_back(t.name());
    for (const auto& n : g.node())
      for (const auto& o : n.output()) names.push_back(o);
    return names;
  }
  std::string some_value(const onnx::GraphProto& g) {
    auto names = value_names(g);
    if (names.empty() || pick(8) == 0) return pick(2) ? "" : "fresh_" + std::to_string(pick(4));
    return names[pick(names.size())];
  }

  void set_random_attr(onnx::AttributeProto& a) {
    switch (pick(6)) {
      case 0:
        a.set_type(onnx::AttributeProto::INT);
        a.set_i(interesting_int());
        break;
      case 1: {
        a.set_type(onnx::AttributeProto::INTS);
        a.clear_ints();
        int n = int(pick(6));
        for (int k = 0; k < n; ++k) a.add_ints(pick(3) ? int64_t(pick(4)) : interesting_int());
        break;
      }
      case 2:
        a.set_type(onnx::AttributeProto::FLOAT);
        a.set_f(interesting_float());
        break;
      case 3: {
        a.set_type(onnx::AttributeProto::FLOATS);
        a.clear_floats();
        int n = int(pick(4));
        for (int k = 0; k < n; ++k) a.add_floats(interesting_float());
        break;
      }
      case 4:
        a.set_type(onnx::AttributeProto::STRING);
        a.set_s(string_value());
        break;
      default: {
        a.set_type(onnx::AttributeProto::STRINGS);
        a.clear_strings();
        int n = int(pick(3));
        for (int k = 0; k < n; ++k) a.add_strings(string_value());
        break;
      }
    }
  }

  // Changes one attribute's value, keeping its type.
  void tweak_attr(onnx::AttributeProto& a) {
    switch (a.type()) {
      case onnx::AttributeProto::INT:
        a.set_i(interesting_int());
        break;
      case onnx::AttributeProto::FLOAT:
        a.set_f(interesting_float());
        break;
      case onnx::AttributeProto::STRING:
        a.set_s(string_value());
        break;
      case onnx::AttributeProto::INTS:
        if (a.ints_size() && pick(3))
          a.set_ints(int(pick(uint64_t(a.ints_size()))), interesting_int());
        else if (coin())
          a.add_ints(interesting_int());
        else if (a.ints_size())
          a.mutable_ints()->RemoveLast();
        break;
      case onnx::AttributeProto::FLOATS:
        if (a.floats_size())
          a.set_floats(int(pick(uint64_t(a.floats_size()))), interesting_float());
        else
          a.add_floats(interesting_float());
        break;
      case onnx::AttributeProto::TENSOR:
        tweak_tensor(*a.mutable_t());
        break;
      default:
        set_random_attr(a);
        break;
    }
  }

  void tweak_tensor(onnx::TensorProto& t) {
    switch (pick(5)) {
      case 0:  // a dim
        if (t.dims_size() && coin())
          t.set_dims(int(pick(uint64_t(t.dims_size()))), interesting_int());
        else if (coin())
          t.add_dims(int64_t(pick(4)));
        else
          t.clear_dims();
        break;
      case 1:  // the element type
        t.set_data_type(int32_t(pick(17)));
        break;
      case 2:  // truncate or extend the data
        if (t.has_raw_data()) {
          std::string r = t.raw_data();
          r.resize(pick(r.size() + 9));
          t.set_raw_data(r);
        } else if (t.float_data_size()) {
          t.mutable_float_data()->RemoveLast();
        } else if (t.int64_data_size()) {
          t.add_int64_data(interesting_int());
        }
        break;
      case 3:  // one value (int64 shape operands matter most)
        if (t.int64_data_size()) {
          t.set_int64_data(int(pick(uint64_t(t.int64_data_size()))), interesting_int());
        } else if (t.float_data_size()) {
          t.set_float_data(int(pick(uint64_t(t.float_data_size()))), interesting_float());
        } else if (t.has_raw_data() && t.raw_data().size() >= 8) {
          std::string r = t.raw_data();
          size_t at = pick(r.size() / 8) * 8;
          if (t.data_type() == onnx::TensorProto::INT64) {
            int64_t v = interesting_int();
            std::memcpy(&r[at], &v, 8);
          } else {
            float v = interesting_float();
            std::memcpy(&r[at], &v, 4);
          }
          t.set_raw_data(r);
        }
        break;
      default:  // external data: must never be read from a buffer
        t.set_data_location(onnx::TensorProto::EXTERNAL);
        {
          auto* kv = t.add_external_data();
          kv->set_key(pick(2) ? "location" : "offset");
          kv->set_value(pick(2) ? "../../etc/passwd" : "123");
        }
        break;
    }
  }

  void mutate_node(onnx::GraphProto& g, onnx::NodeProto& n) {
    switch (pick(9)) {
      case 0:
        n.set_op_type(op_name());
        break;
      case 1:
        if (n.attribute_size())
          tweak_attr(*n.mutable_attribute(int(pick(uint64_t(n.attribute_size())))));
        break;
      case 2: {
        auto* a = n.add_attribute();
        a->set_name(attr_name());
        set_random_attr(*a);
        break;
      }
      case 3:
        if (n.attribute_size()) {
          n.mutable_attribute()->SwapElements(int(pick(uint64_t(n.attribute_size()))),
                                              n.attribute_size() - 1);
          n.mutable_attribute()->RemoveLast();
        }
        break;
      case 4:
        if (n.input_size()) n.set_input(int(pick(uint64_t(n.input_size()))), some_value(g));
        break;
      case 5:
        if (coin() || !n.input_size())
          n.add_input(some_value(g));
        else
          n.mutable_input()->RemoveLast();
        break;
      case 6:
        if (coin() || !n.output_size())
          n.add_output("out_" + std::to_string(pick(1000)));
        else if (n.output_size())
          n.mutable_output()->RemoveLast();
        break;
      case 7:
        if (n.output_size()) n.set_output(int(pick(uint64_t(n.output_size()))), some_value(g));
        break;
      default:
        n.set_domain(pick(4) ? "" : "com.microsoft");
        break;
    }
  }

  void mutate_once(onnx::ModelProto& m) {
    onnx::GraphProto& g = *m.mutable_graph();
    switch (pick(10)) {
      case 0:
      case 1:
      case 2:
        if (g.node_size()) mutate_node(g, *g.mutable_node(int(pick(uint64_t(g.node_size())))));
        break;
      case 3:  // duplicate a node with fresh outputs, or drop one
        if (g.node_size() && coin()) {
          onnx::NodeProto copy = g.node(int(pick(uint64_t(g.node_size()))));
          for (auto& o : *copy.mutable_output()) o += "_dup" + std::to_string(pick(100));
          *g.add_node() = copy;
        } else if (g.node_size()) {
          g.mutable_node()->SwapElements(int(pick(uint64_t(g.node_size()))), g.node_size() - 1);
          g.mutable_node()->RemoveLast();
        }
        break;
      case 4:
        if (g.initializer_size())
          tweak_tensor(*g.mutable_initializer(int(pick(uint64_t(g.initializer_size())))));
        break;
      case 5:  // a graph input's dims or type
        if (g.input_size()) {
          auto* tt = g.mutable_input(int(pick(uint64_t(g.input_size()))))
                         ->mutable_type()
                         ->mutable_tensor_type();
          auto* shape = tt->mutable_shape();
          if (shape->dim_size() && pick(4)) {
            auto* d = shape->mutable_dim(int(pick(uint64_t(shape->dim_size()))));
            if (pick(4))
              d->set_dim_value(pick(2) ? int64_t(pick(9)) : interesting_int());
            else
              d->set_dim_param("N");
          } else if (coin()) {
            shape->add_dim()->set_dim_value(int64_t(1 + pick(4)));
          } else {
            tt->set_elem_type(int32_t(pick(17)));
          }
        }
        break;
      case 6:  // graph outputs
        if (g.output_size() && coin())
          g.mutable_output(int(pick(uint64_t(g.output_size()))))->set_name(some_value(g));
        else
          g.add_output()->set_name(some_value(g));
        break;
      case 7:  // a new node of a random op wired to existing values
      {
        auto* n = g.add_node();
        n->set_op_type(op_name());
        n->set_name("fuzz_" + std::to_string(pick(1000)));
        int nin = int(pick(4));
        for (int k = 0; k < nin; ++k) n->add_input(some_value(g));
        n->add_output("fz_" + std::to_string(pick(1000)));
        if (coin()) {
          auto* a = n->add_attribute();
          a->set_name(attr_name());
          set_random_attr(*a);
        }
        if (coin()) g.add_output()->set_name(n->output(0));
        break;
      }
      case 8:
        if (m.opset_import_size()) m.mutable_opset_import(0)->set_version(int64_t(6 + pick(14)));
        break;
      default:  // a Constant node's tensor
        for (auto& n : *g.mutable_node())
          if (n.op_type() == "Constant" && n.attribute_size()) {
            tweak_attr(*n.mutable_attribute(0));
            break;
          }
        break;
    }
  }

  std::mt19937_64 rng_;
};

// The LLVMFuzzerCustomMutator body shared by the harnesses.
inline size_t mutate_model(uint8_t* data, size_t size, size_t max_size, unsigned seed) {
  onnx::ModelProto m;
  if ((seed & 1) && size > 0 && m.ParseFromArray(data, int(size))) {
    OnnxMutator(seed).mutate(m);
    std::string out;
    if (m.SerializeToString(&out) && out.size() <= max_size) {
      std::memcpy(data, out.data(), out.size());
      return out.size();
    }
  }
  return LLVMFuzzerMutate(data, size, max_size);
}

}  // namespace kiln::fuzz

// The libFuzzer entry points every ONNX-model harness shares (at file scope): the process
// setup of fuzz_util.h and the mutator above.
#define KILN_FUZZ_MODEL_HOOKS()                                                          \
  extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {                         \
    kiln::fuzz::init_process(argc, argv);                                                \
    return 0;                                                                            \
  }                                                                                      \
  extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, \
                                            unsigned seed) {                             \
    return kiln::fuzz::mutate_model(data, size, max_size, seed);                         \
  }
