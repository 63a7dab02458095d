// Helpers for the shape-inference tests: build a one-node graph by hand, run infer_node on it
// and check either the inferred shapes or the error.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "graph/infer.h"
#include "graph/ir.h"

namespace kiln::test_infer {

struct Builder {
  Graph g;

  Builder() { g.opset = 18; }

  // A runtime input with a known shape.
  ValueId in(const std::string& name, Shape shape, DType d = DType::f32) {
    ValueId id = g.add_value(name, d);
    g.value(id).shape = std::move(shape);
    g.value(id).shape_known = true;
    g.inputs.push_back(id);
    return id;
  }
  // A 1-D int64 constant.
  ValueId ints(const std::string& name, const std::vector<int64_t>& v) {
    Tensor t(DType::i64, {int64_t(v.size())});
    std::copy(v.begin(), v.end(), t.data<int64_t>());
    return g.add_const(name, t);
  }
  // A float constant of `shape` filled with `x`.
  ValueId floats(const std::string& name, Shape shape, float x = 0) {
    Tensor t(DType::f32, std::move(shape));
    std::fill(t.data<float>(), t.data<float>() + t.numel(), x);
    return g.add_const(name, t);
  }

  // Adds the node under test (named "n") with `nout` fresh outputs; kNoValue in `inputs`
  // stands for an omitted optional input.
  Node& node(const std::string& op, std::vector<ValueId> inputs, int nout = 1,
             const std::string& name = "n") {
    Node n;
    n.name = name;
    n.op = op;
    n.inputs = std::move(inputs);
    for (int i = 0; i < nout; ++i)
      n.outputs.push_back(g.add_value(name + "_out" + std::to_string(i)));
    g.nodes.push_back(std::move(n));
    return g.nodes.back();
  }
  Node& last() { return g.nodes.back(); }

  void set_i(const std::string& a, int64_t v) { last().attrs[a] = kiln::attr_i(v); }
  void set_f(const std::string& a, float v) { last().attrs[a] = kiln::attr_f(v); }
  void set_s(const std::string& a, const std::string& v) { last().attrs[a] = kiln::attr_s(v); }
  void set_ints(const std::string& a, std::vector<int64_t> v) {
    last().attrs[a] = kiln::attr_ints(std::move(v));
  }

  void infer() { infer_node(g, last()); }
  const Value& out(size_t i = 0) { return g.value(last().outputs[i]); }
  // Infers and returns output i's shape (checking it was marked known).
  Shape shape(size_t i = 0) {
    infer();
    CHECK(out(i).shape_known);
    return out(i).shape;
  }
};

inline bool contains(const std::string& s, const std::string& needle) {
  return s.find(needle) != std::string::npos;
}

// Inference of the last node must fail with `code`; the message must name the node and its op
// ("node 'n' (Conv)") and contain `needle`.
inline void check_fails(Builder& b, Code code, const std::string& needle) {
  const Node& n = b.last();
  std::string where = "node '" + n.name + "' (" + n.op + ")";
  try {
    b.infer();
    FAIL_CHECK("expected an error containing '" << needle << "' from " << where);
  } catch (const Error& e) {
    std::string msg = e.what();
    INFO("message: " << msg);
    CHECK(code_name(e.code()) == std::string(code_name(code)));
    CHECK(contains(msg, where));
    CHECK(contains(msg, needle));
  }
}

inline const std::vector<int64_t>& attr_ints(Builder& b, const std::string& a) {
  return b.last().attrs.at(a).ints;
}

}  // namespace kiln::test_infer
