#include "graph/recurrent.h"

#include <cctype>
#include <cmath>
#include <string_view>

#include "graph/canonicalize.h"
#include "graph/infer_util.h"

namespace kiln {
namespace {

using namespace infer_detail;

// The activation functions ONNX lists for recurrent ops that Kiln computes, with whether each
// takes activation_alpha / activation_beta entries (consumed in order by the activations that
// take them, as ONNX Runtime reads the lists). Affine and ScaledTanh are refused.
struct Activation {
  const char* name;
  bool alpha, beta;
};
constexpr Activation kActivations[] = {
    {"Relu", false, false},     {"Tanh", false, false},           {"Sigmoid", false, false},
    {"LeakyRelu", true, false}, {"ThresholdedRelu", true, false}, {"HardSigmoid", true, true},
    {"Elu", true, false},       {"Softsign", false, false},       {"Softplus", false, false},
};

bool same_name(std::string_view a, std::string_view b) {  // (case-insensitive, as ORT)
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

int acts_per_direction(const std::string& op) {
  return op == "LSTM" ? 3 : op == "GRU" ? 2 : 1;
}

const std::vector<std::string>* strings_attr(const Node& n, const char* name) {
  const auto it = n.attrs.find(name);
  if (it == n.attrs.end()) return nullptr;
  if (it->second.kind != Attribute::Kind::strings)
    n.fail(Code::invalid_model, std::string("attribute '") + name + "' must be a list of strings");
  return &it->second.strings;
}

int directions_of(const Node& n) {
  const std::string d = n.attr_s("direction", "forward");
  if (d != "forward" && d != "reverse" && d != "bidirectional")
    n.fail(Code::invalid_model, "direction '" + d + "' (forward, reverse or bidirectional)");
  return d == "bidirectional" ? 2 : 1;
}

// n's activations (an LSTM / GRU / RNN) as post-ops, defaults filled in, per direction in order.
std::vector<PostOp> activations(const Graph& g, const Node& n, int directions) {
  const int per = acts_per_direction(n.op);
  std::vector<std::string> names;
  if (const auto* a = strings_attr(n, "activations")) names = *a;
  if (names.empty())
    for (int d = 0; d < directions; ++d) {
      if (n.op == "LSTM") names.insert(names.end(), {"Sigmoid", "Tanh", "Tanh"});
      if (n.op == "GRU") names.insert(names.end(), {"Sigmoid", "Tanh"});
      if (n.op == "RNN") names.push_back("Tanh");
    }
  if (names.size() != size_t(per * directions))
    n.fail(Code::invalid_model, "activations lists " + std::to_string(names.size()) +
                                    " functions, expected " + std::to_string(per * directions));
  const std::vector<float> alphas = n.attr_floats("activation_alpha"),
                           betas = n.attr_floats("activation_beta");
  size_t ai = 0, bi = 0;
  std::vector<PostOp> ops;
  for (const std::string& name : names) {
    const Activation* act = nullptr;
    for (const Activation& a : kActivations)
      if (same_name(name, a.name)) act = &a;
    if (!act)
      n.fail(Code::unsupported, "activation '" + name +
                                    "' (supported: Relu, Tanh, Sigmoid, LeakyRelu, "
                                    "ThresholdedRelu, HardSigmoid, Elu, Softsign, Softplus)");
    Node f;  // the activation as the op of that name, to read its post-op
    f.name = n.name;
    f.op = act->name;
    if (act->alpha && ai < alphas.size()) f.attrs["alpha"] = attr_f(alphas[ai++]);
    if (act->beta && bi < betas.size()) f.attrs["beta"] = attr_f(betas[bi++]);
    std::optional<PostOp> op = unary_post_op(g, f);
    if (!op) op = glue_unary_post_op(f);
    if (!op) n.fail(Code::invalid_model, "activation '" + name + "' has a non-finite parameter");
    ops.push_back(*op);
  }
  return ops;
}

}  // namespace

RecurrenceSpec recurrence_spec(const Node& n) {
  RecurrenceSpec s;
  const std::string cell = n.attr_s("cell", "");
  if (cell != "LSTM" && cell != "GRU" && cell != "RNN")
    n.fail(Code::invalid_model, "cell '" + cell + "' (LSTM, GRU or RNN)");
  s.lstm = cell == "LSTM";
  s.gru = cell == "GRU";
  s.gates = s.lstm ? 4 : s.gru ? 3 : 1;
  s.directions = directions_of(n);
  s.reverse = n.attr_s("direction", "forward") == "reverse";
  s.hidden = n.attr_i("hidden_size", 0);
  if (s.hidden < 1 || s.hidden > (int64_t(1) << 24))
    n.fail(Code::invalid_model, "hidden_size " + std::to_string(s.hidden) + " outside 1..2^24");
  s.linear_before_reset = attr_flag(n, "linear_before_reset", false);
  s.clip = n.attr_f("clip", 0.f);
  if (!(s.clip >= 0) || std::isinf(s.clip))
    n.fail(Code::invalid_model, "clip " + std::to_string(s.clip) + " is not a positive threshold");
  Node acts;  // the activations are stored as a post-op chain (graph/post_ops.h) of their own
  acts.name = n.name;
  for (const auto& [from, to] :
       {std::pair{"rnn_acts", "post_ops"}, {"rnn_alpha", "post_alpha"}, {"rnn_beta", "post_beta"}})
    if (const auto it = n.attrs.find(from); it != n.attrs.end()) acts.attrs[to] = it->second;
  const std::vector<PostOp> ops = parse_post_ops(acts, 0);
  const int per = s.acts_per_direction();
  if (ops.size() != size_t(per * s.directions))
    n.fail(Code::invalid_model, "rnn_acts has " + std::to_string(ops.size()) +
                                    " activations, expected " + std::to_string(per * s.directions));
  s.acts.resize(size_t(s.directions));
  for (int d = 0; d < s.directions; ++d)
    for (int k = 0; k < per; ++k) {
      const PostOp& op = ops[size_t(d * per + k)];
      if (op.input >= 0 || !(glue_kind(op.kind) || op.kind <= PostOp::Kind::hardsigmoid))
        n.fail(Code::invalid_model,
               std::string("rnn_acts: '") + post_op_name(op.kind) + "' is not a unary activation");
      std::vector<PostOp> chain;
      if (s.clip > 0) chain.push_back(PostOp{PostOp::Kind::clip, -s.clip, s.clip, -1});
      chain.push_back(op);
      s.acts[size_t(d)].push_back(std::move(chain));
    }
  return s;
}

bool expand_recurrent(Graph& g, const Node& n, std::vector<Node>& out) {
  if (n.op != "LSTM" && n.op != "GRU" && n.op != "RNN") return false;
  const bool lstm = n.op == "LSTM";
  const size_t max_in = lstm ? 8 : 6, max_out = lstm ? 3 : 2;
  if (n.inputs.size() < 3 || n.inputs.size() > max_in)
    n.fail(Code::invalid_model, "expects 3 to " + std::to_string(max_in) + " inputs but has " +
                                    std::to_string(n.inputs.size()));
  if (n.outputs.size() > max_out)
    n.fail(Code::invalid_model, "expects at most " + std::to_string(max_out) + " outputs but has " +
                                    std::to_string(n.outputs.size()));
  for (size_t i = 0; i < 3; ++i)
    if (n.in(i) == kNoValue)
      n.fail(Code::invalid_model, "input " + std::to_string(i) + " is required");
  const int D = directions_of(n);
  const int G = n.op == "LSTM" ? 4 : n.op == "GRU" ? 3 : 1;
  int64_t H = n.attr_i("hidden_size", 0);
  const Value& r = g.value(n.in(2));
  if (!n.has("hidden_size") && r.shape_known && r.shape.size() == 3) H = r.shape[2];
  if (H < 1 || H > (int64_t(1) << 24))
    n.fail(Code::invalid_model, "hidden_size " + std::to_string(H) + " outside 1..2^24");
  const int64_t layout = n.attr_i("layout", 0);
  if (layout != 0 && layout != 1)
    n.fail(Code::invalid_model, "layout " + std::to_string(layout) + " (0 or 1)");
  if (lstm && n.attr_i("input_forget", 0) != 0)
    n.fail(Code::unsupported, "input_forget 1 (coupled input and forget gates)");
  if (n.op == "GRU") attr_flag(n, "linear_before_reset", false);
  const std::vector<PostOp> acts = activations(g, n, D);
  const int64_t GH = G * H;

  auto op = [&](const char* o, std::vector<ValueId> in, const char* part) {
    return append_node(g, n, o, std::move(in), kNoValue, part, out);
  };
  auto transpose = [&](ValueId v, std::vector<int64_t> perm, const char* part) {
    const ValueId t = op("Transpose", {v}, part);
    out.back().attrs["perm"] = attr_ints(std::move(perm));
    return t;
  };
  auto ints = [&](const char* part, std::vector<int64_t> v) {
    return const_for(g, n, part, ints_tensor(v));
  };
  // (Batch-major layout 1: time-major for the recurrence, batch-major again after it.)
  const ValueId x = layout ? transpose(n.in(0), {1, 0, 2}, "x_time_major") : n.in(0);
  const ValueId wt = transpose(n.in(1), {2, 0, 1}, "w_t");  // [I, D, GH]
  ValueId xw = op("MatMul", {x, op("Reshape", {wt, ints("w_cols", {0, -1})}, "w_cols")}, "xw");
  ValueId rb = kNoValue;
  if (const ValueId b = n.in(3); b != kNoValue) {  // [D, 2 GH]: Wb (added here), Rb
    const ValueId axis = ints("b_axis", {1});
    const ValueId wb = op("Slice", {b, ints("wb_begin", {0}), ints("wb_end", {GH}), axis}, "wb");
    xw = op("Add", {xw, op("Reshape", {wb, ints("wb_flat", {-1})}, "wb_flat")}, "xw_bias");
    rb = op("Slice", {b, ints("rb_begin", {GH}), ints("rb_end", {2 * GH}), axis}, "rb");
  }
  auto state = [&](size_t i, const char* part) {
    const ValueId v = n.in(i);
    return v == kNoValue || !layout ? v : transpose(v, {1, 0, 2}, part);
  };
  Node rec;
  rec.name = n.name + "_recurrence";
  rec.op = "Recurrence";
  rec.inputs = {xw,
                transpose(n.in(2), {0, 2, 1}, "r_t"),
                rb,
                n.in(4),
                state(5, "h0_time_major"),
                lstm ? state(6, "c0_time_major") : kNoValue,
                lstm ? n.in(7) : kNoValue};
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    const ValueId y = n.outputs[i];
    rec.outputs.push_back(
        y == kNoValue || !layout ? y : g.add_value(unique_value_name(g, n.name + "_time_major")));
  }
  // (Y, even when the model reads only Y_h: an op's first output is never omitted here.)
  if (rec.outputs.empty()) rec.outputs.push_back(kNoValue);
  if (rec.outputs[0] == kNoValue) rec.outputs[0] = g.add_value(unique_value_name(g, n.name + "_y"));
  rec.attrs["cell"] = attr_s(n.op);
  rec.attrs["direction"] = attr_s(n.attr_s("direction", "forward"));
  rec.attrs["hidden_size"] = attr_i(H);
  if (n.op == "GRU") rec.attrs["linear_before_reset"] = attr_i(n.attr_i("linear_before_reset", 0));
  if (n.has("clip")) rec.attrs["clip"] = attr_f(n.attr_f("clip", 0.f));
  std::vector<std::string> names;
  std::vector<float> alpha, beta;
  for (const PostOp& a : acts) {
    names.push_back(post_op_name(a.kind));
    alpha.push_back(a.alpha);
    beta.push_back(a.beta);
  }
  rec.attrs["rnn_acts"] = attr_strings(std::move(names));
  rec.attrs["rnn_alpha"] = attr_floats(std::move(alpha));
  rec.attrs["rnn_beta"] = attr_floats(std::move(beta));
  recurrence_spec(rec);  // (the attributes checked once, naming the ONNX node's name)
  const std::vector<ValueId> time_major = rec.outputs;
  out.push_back(std::move(rec));
  if (layout)  // Y [T, D, N, H] -> [N, T, D, H]; Y_h, Y_c [D, N, H] -> [N, D, H]
    for (size_t i = 0; i < n.outputs.size(); ++i)
      if (n.outputs[i] != kNoValue) {  // (a Y made above is read by nothing: not transposed)
        Node t;
        t.name = n.name + "_batch_major" + std::to_string(i);
        t.op = "Transpose";
        t.inputs = {time_major[i]};
        t.outputs = {n.outputs[i]};
        t.attrs["perm"] =
            attr_ints(i == 0 ? std::vector<int64_t>{2, 0, 1, 3} : std::vector<int64_t>{1, 0, 2});
        out.push_back(std::move(t));
      }
  return true;
}

void infer_recurrence(Graph& g, Node& n) {
  const RecurrenceSpec s = recurrence_spec(n);
  const int64_t D = s.directions, H = s.hidden, GH = s.gates * H;
  expect_dtype(g, n, 0, DType::f32);
  expect_rank(g, n, 0, 3);
  const Shape& xw = input(g, n, 0).shape;
  const int64_t T = xw[0], N = xw[1];
  if (xw[2] != D * GH)
    n.fail(Code::invalid_model, "the input projection has " + std::to_string(xw[2]) +
                                    " columns, expected directions x gates x hidden_size = " +
                                    std::to_string(D * GH) + " (W's shape)");
  auto expect = [&](size_t i, const Shape& want, const char* what) {
    if (!has_input(n, i)) return;
    expect_dtype(g, n, i, DType::f32);
    if (input(g, n, i).shape != want)
      n.fail(Code::invalid_model, std::string(what) + " has shape " +
                                      shape_str(input(g, n, i).shape) + ", expected " +
                                      shape_str(want));
  };
  expect(1, {D, H, GH}, "R (transposed)");
  expect(2, {D, GH}, "the recurrence bias Rb");
  if (has_input(n, 3)) {
    expect_dtype(g, n, 3, DType::i64);  // (int32 in the model, held as int64)
    if (input(g, n, 3).shape != Shape{N})
      n.fail(Code::invalid_model, "sequence_lens has shape " + shape_str(input(g, n, 3).shape) +
                                      ", expected [" + std::to_string(N) + "] (the batch)");
  }
  expect(4, {D, N, H}, "initial_h");
  expect(5, {D, N, H}, "initial_c");
  expect(6, {D, 3 * H}, "the peepholes P");
  if (!s.lstm && (has_input(n, 5) || has_input(n, 6) || has_output(n, 2)))
    n.fail(Code::invalid_model, "initial_c, P and Y_c belong to LSTM only");
  set_output(g, n, 0, DType::f32, {T, D, N, H});
  set_output(g, n, 1, DType::f32, {D, N, H});
  set_output(g, n, 2, DType::f32, {D, N, H});
}

}  // namespace kiln
