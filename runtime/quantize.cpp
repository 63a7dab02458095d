#include "runtime/quantize.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <vector>

#include "graph/error.h"
#include "graph/quant.h"
#include "runtime/npy.h"
#include "runtime/session.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

constexpr int kBins = 4096;              // percentile histogram
constexpr double kPercentile = 99.99;    // and 100 - it at the low end
constexpr float kWeightMax = 127.f;      // symmetric int8 weights, as ONNX Runtime's
constexpr uint32_t kRandomSeed = 20261;  // random calibration inputs: sample i uses seed + i

onnx::ModelProto read_model(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(Code::io_error, "cannot read '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  onnx::ModelProto m;
  if (!m.ParseFromString(ss.str()) || !m.has_graph())
    fail(Code::invalid_model, "'" + path + "' is not a valid ONNX model");
  for (const auto& t : m.graph().initializer())
    if (t.data_location() == onnx::TensorProto::EXTERNAL)
      fail(Code::unsupported, "'" + path + "': initializer '" + t.name() +
                                  "' is stored as external data; quantize needs the weights in "
                                  "the file");
  return m;
}

int64_t default_opset(const onnx::ModelProto& m) {
  for (const auto& o : m.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") return o.version();
  return 0;
}

std::vector<float> floats_of(const onnx::TensorProto& t) {
  int64_t n = 1;
  for (int64_t d : t.dims()) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  if (t.has_raw_data()) {
    if (t.raw_data().size() != v.size() * 4)
      fail(Code::invalid_model, "initializer '" + t.name() + "' has the wrong data size");
    std::memcpy(v.data(), t.raw_data().data(), v.size() * 4);
  } else {
    if (t.float_data_size() != n)
      fail(Code::invalid_model, "initializer '" + t.name() + "' has the wrong data size");
    std::copy(t.float_data().begin(), t.float_data().end(), v.begin());
  }
  return v;
}

int onnx_attr_i(const onnx::NodeProto& n, const std::string& name, int def) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return int(a.i());
  return def;
}
float onnx_attr_f(const onnx::NodeProto& n, const std::string& name, float def) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return a.f();
  return def;
}

// What gets quantized: activations by name, and per node its weight and bias slots.
struct QuantNode {
  int node = 0;
  int weight_axis = -1;  // per-channel axis of input 1 (-1: per tensor only)
  bool bias = false;     // input 2 is a 1-D f32 initializer
};

struct QuantSet {
  std::vector<std::string> acts;  // in first-seen order
  std::vector<QuantNode> nodes;
  int adds = 0;
};

QuantSet choose(const onnx::GraphProto& g) {
  std::map<std::string, const onnx::TensorProto*> inits;
  for (const auto& t : g.initializer()) inits[t.name()] = &t;
  std::set<std::string> consts, outputs;
  for (const auto& n : g.node())
    if (n.op_type() == "Constant")
      for (const auto& o : n.output()) consts.insert(o);
  for (const auto& o : g.output()) outputs.insert(o.name());
  std::map<std::string, std::vector<int>> readers;
  for (int i = 0; i < g.node_size(); ++i)
    for (const auto& in : g.node(i).input()) readers[in].push_back(i);
  auto activation = [&](const std::string& t) {
    return !t.empty() && !inits.count(t) && !consts.count(t);
  };
  QuantSet s;
  std::set<std::string> seen;
  auto add = [&](const std::string& t) {
    if (activation(t) && !outputs.count(t) && seen.insert(t).second) s.acts.push_back(t);
  };
  for (int i = 0; i < g.node_size(); ++i) {
    const auto& n = g.node(i);
    const std::string& op = n.op_type();
    if (op == "Add" && n.input_size() == 2 && activation(n.input(0)) && activation(n.input(1))) {
      add(n.input(0));
      add(n.input(1));
      add(n.output(0));
      ++s.adds;
      continue;
    }
    if (op != "Conv" && op != "Gemm" && op != "MatMul") continue;
    if (n.input_size() < 2 || !activation(n.input(0))) continue;
    auto w = inits.find(n.input(1));
    if (w == inits.end() || w->second->data_type() != onnx::TensorProto::FLOAT) continue;
    QuantNode q;
    q.node = i;
    const int rank = w->second->dims_size();
    if (op == "Conv")
      q.weight_axis = 0;
    else if (op == "Gemm")
      q.weight_axis = onnx_attr_i(n, "transB", 0) ? 0 : 1;
    else if (rank == 2)
      q.weight_axis = 1;
    if (q.weight_axis >= rank) q.weight_axis = -1;
    if (n.input_size() > 2 && !n.input(2).empty()) {
      auto b = inits.find(n.input(2));
      q.bias = b != inits.end() && b->second->data_type() == onnx::TensorProto::FLOAT &&
               b->second->dims_size() == 1 && (op == "Conv" || onnx_attr_f(n, "beta", 1.f) == 1.f);
    }
    add(n.input(0));
    // The output, or the output of a Relu that alone reads it (its range then starts at 0,
    // and ONNX Runtime folds that Relu into the quantized conv).
    std::string out = n.output(0);
    auto r = readers.find(out);
    if (r != readers.end() && r->second.size() == 1 && !outputs.count(out) &&
        g.node(r->second[0]).op_type() == "Relu")
      out = g.node(r->second[0]).output(0);
    add(out);
    s.nodes.push_back(q);
  }
  return s;
}

// Value statistics of one tensor over every calibration input.
struct Stats {
  float lo = std::numeric_limits<float>::infinity();
  float hi = -std::numeric_limits<float>::infinity();
  std::vector<uint64_t> hist;
  void range(const float* p, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
      if (std::isfinite(p[i])) lo = std::min(lo, p[i]), hi = std::max(hi, p[i]);
  }
  void histogram(const float* p, int64_t n) {
    hist.resize(kBins);
    if (!(hi > lo)) return;
    const double w = (double(hi) - lo) / kBins;
    for (int64_t i = 0; i < n; ++i)
      if (std::isfinite(p[i]))
        ++hist[size_t(
            std::clamp(int64_t((double(p[i]) - lo) / w), int64_t(0), int64_t(kBins - 1)))];
  }
  // The calibrated range [a, b].
  std::pair<float, float> calibrated(CalibMethod m) const {
    if (!(hi >= lo)) return {0.f, 0.f};  // never finite: an all-zero range
    if (m == CalibMethod::minmax || hist.empty() || !(hi > lo)) return {lo, hi};
    uint64_t total = 0;
    for (uint64_t c : hist) total += c;
    const double w = (double(hi) - lo) / kBins;
    const double cut = total * (100 - kPercentile) / 100;
    uint64_t acc = 0;
    int a = 0, b = kBins - 1;
    while (a < kBins - 1 && double(acc + hist[size_t(a)]) <= cut) acc += hist[size_t(a++)];
    acc = 0;
    while (b > a && double(acc + hist[size_t(b)]) <= cut) acc += hist[size_t(b--)];
    return {float(lo + a * w), float(lo + (b + 1) * w)};
  }
};

struct ActParams {
  float scale = 1, zero_point = 0;
};

// uint8 asymmetric over a range widened to hold 0 (ONNX Runtime's formula).
ActParams act_params(std::pair<float, float> r) {
  const float lo = std::min(r.first, 0.f), hi = std::max(r.second, 0.f);
  ActParams p;
  p.scale = (hi - lo) / 255.f;
  if (!(p.scale > 0) || !std::isfinite(p.scale)) return ActParams{};
  p.zero_point = std::clamp(std::nearbyint(-lo / p.scale), 0.f, 255.f);
  return p;
}

// Calibration: the model with every activation also a graph output, run on every sample.
class Calibrator {
 public:
  Calibrator(const onnx::ModelProto& m, const QuantSet& sel, const QuantizeOptions& o) : opts_(o) {
    onnx::ModelProto aug = m;
    std::set<std::string> inputs;
    for (const auto& in : m.graph().input()) inputs.insert(in.name());
    for (const std::string& t : sel.acts)
      if (!inputs.count(t)) aug.mutable_graph()->add_output()->set_name(t);
    const std::string bytes = aug.SerializeAsString();
    SessionOptions so;
    so.threads = o.threads;
    so.tune = TuneMode::none;  // calibration needs values, not the fastest plan
    so.use_cache = false;
    session_ = Session::load_memory(bytes.data(), bytes.size(), so);
    for (const std::string& t : sel.acts) {
      for (size_t k = 0; k < session_->inputs().size(); ++k)
        if (session_->inputs()[k].name == t) where_[t] = {true, k};
      for (size_t k = 0; !where_.count(t) && k < session_->outputs().size(); ++k)
        if (session_->outputs()[k].name == t) where_[t] = {false, k};
    }
    load_samples();
  }

  std::map<std::string, Stats> run() {
    std::map<std::string, Stats> stats;
    for (int pass = 0; pass < (opts_.method == CalibMethod::percentile ? 2 : 1); ++pass)
      for (const auto& sample : samples_) {
        std::shared_ptr<const Session> s = session_->at_batch(sample[0].shape()[0]);
        std::vector<Tensor> outs;
        for (const IoInfo& io : s->outputs()) outs.emplace_back(io.dtype, io.shape);
        s->run(sample, outs);
        for (const auto& [name, w] : where_) {
          const Tensor& t = w.input ? sample[w.index] : outs[w.index];
          if (t.dtype() != DType::f32) continue;
          Stats& st = stats[name];
          if (pass == 0)
            st.range(t.data<float>(), t.numel());
          else
            st.histogram(t.data<float>(), t.numel());
        }
      }
    return stats;
  }

  int samples() const { return int(samples_.size()); }

 private:
  struct Where {
    bool input = false;
    size_t index = 0;
  };

  void load_samples() {
    const auto& ins = session_->inputs();
    for (const IoInfo& io : ins)
      if (io.dtype != DType::f32 || io.shape.empty())
        fail(Code::unsupported, "input '" + io.name +
                                    "' is not a float32 tensor with a batch dim; quantize "
                                    "calibrates float32 image inputs");
    if (!opts_.calib_dir.empty()) {
      if (ins.size() != 1)
        fail(Code::unsupported,
             "--calib takes one .npy per sample for a model with one input; "
             "this one has " +
                 std::to_string(ins.size()));
      std::error_code ec;
      std::vector<std::string> files;
      for (const auto& e : fs::directory_iterator(opts_.calib_dir, ec))
        if (e.path().extension() == ".npy") files.push_back(e.path().string());
      if (ec) fail(Code::io_error, "cannot read the folder '" + opts_.calib_dir + "'");
      std::sort(files.begin(), files.end());
      if (files.empty())
        fail(Code::invalid_argument, "'" + opts_.calib_dir + "' holds no .npy file");
      for (const std::string& f : files) {
        Tensor t = read_npy(f);
        const Shape& want = ins[0].shape;
        const Shape& got = t.shape();
        if (t.dtype() != DType::f32 || got.size() != want.size() || got.empty() || got[0] < 1 ||
            !std::equal(got.begin() + 1, got.end(), want.begin() + 1))
          fail(Code::shape_mismatch, "'" + f + "' is " + dtype_name(t.dtype()) + shape_str(got) +
                                         " but input '" + ins[0].name + "' needs float32" +
                                         shape_str(want) + " (dim 0, the batch, may differ)");
        samples_.push_back({std::move(t)});
      }
      return;
    }
    if (opts_.random_samples < 1) fail(Code::invalid_argument, "no calibration samples asked for");
    for (int i = 0; i < opts_.random_samples; ++i) {
      std::mt19937 rng(kRandomSeed + uint32_t(i));
      std::normal_distribution<float> nd;
      std::vector<Tensor> sample;
      for (const IoInfo& io : ins) {
        Tensor t(DType::f32, io.shape);
        for (int64_t k = 0; k < t.numel(); ++k) t.data<float>()[k] = nd(rng);
        sample.push_back(std::move(t));
      }
      samples_.push_back(std::move(sample));
    }
  }

  QuantizeOptions opts_;
  std::unique_ptr<Session> session_;
  std::map<std::string, Where> where_;
  std::vector<std::vector<Tensor>> samples_;
};

// Writes the QDQ graph into `m`.
class Writer {
 public:
  Writer(onnx::ModelProto& m, const QuantizeOptions& o) : m_(m), opts_(o) {
    const auto& g = m.graph();
    for (const auto& t : g.initializer()) used_.insert(t.name()), inits_[t.name()] = &t;
    for (const auto& t : g.input()) used_.insert(t.name());
    for (const auto& n : g.node())
      for (const auto& out : n.output()) used_.insert(out);
  }

  void write(const QuantSet& sel, const std::map<std::string, ActParams>& acts,
             QuantizeReport* rep) {
    onnx::GraphProto& g = *m_.mutable_graph();
    const std::vector<onnx::NodeProto> old(g.node().begin(), g.node().end());
    g.clear_node();
    std::map<int, const QuantNode*> qnodes;
    for (const QuantNode& q : sel.nodes) qnodes[q.node] = &q;
    for (const auto& in : g.input())
      if (acts.count(in.name())) quantize_act(in.name(), acts.at(in.name()));
    for (int i = 0; i < int(old.size()); ++i) {
      onnx::NodeProto n = old[size_t(i)];
      for (int j = 0; j < n.input_size(); ++j) {
        auto r = renamed_.find(n.input(j));
        if (r != renamed_.end()) n.set_input(j, r->second);
      }
      auto q = qnodes.find(i);
      if (q != qnodes.end()) quantize_params(n, *q->second, rep);
      *g.add_node() = n;
      for (const auto& out : n.output())
        if (acts.count(out)) quantize_act(out, acts.at(out));
    }
    // Float weights and biases no node reads any more.
    std::set<std::string> read;
    for (const auto& n : g.node())
      for (const auto& in : n.input()) read.insert(in);
    auto* inits = g.mutable_initializer();
    for (int k = inits->size() - 1; k >= 0; --k)
      if (replaced_.count(inits->Get(k).name()) && !read.count(inits->Get(k).name()))
        inits->DeleteSubrange(k, 1);
    auto* ins = g.mutable_input();  // old exporters list initializers as inputs too
    for (int k = ins->size() - 1; k >= 0; --k)
      if (replaced_.count(ins->Get(k).name()) && !read.count(ins->Get(k).name()))
        ins->DeleteSubrange(k, 1);
    rep->activations = int(acts.size());
  }

 private:
  std::string fresh(const std::string& base) {
    std::string name = base;
    for (int k = 1; used_.count(name); ++k) name = base + "_" + std::to_string(k);
    used_.insert(name);
    return name;
  }

  onnx::TensorProto* add_init(const std::string& base, int type, std::vector<int64_t> dims) {
    onnx::TensorProto* t = m_.mutable_graph()->add_initializer();
    t->set_name(fresh(base));
    t->set_data_type(type);
    for (int64_t d : dims) t->add_dims(d);
    return t;
  }

  std::string scalar_f32(const std::string& base, float v) {
    onnx::TensorProto* t = add_init(base, onnx::TensorProto::FLOAT, {});
    t->add_float_data(v);
    return t->name();
  }

  onnx::NodeProto* add_node(const std::string& op, std::vector<std::string> ins,
                            const std::string& out, int axis = -1) {
    onnx::NodeProto* n = m_.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_name(fresh(out + "_" + op));
    for (const auto& s : ins) n->add_input(s);
    n->add_output(out);
    if (axis >= 0) {
      auto* a = n->add_attribute();
      a->set_name("axis");
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(axis);
    }
    return n;
  }

  void quantize_act(const std::string& t, const ActParams& p) {
    const std::string s = scalar_f32(t + "_scale", p.scale);
    onnx::TensorProto* z = add_init(t + "_zero_point", onnx::TensorProto::UINT8, {});
    z->set_raw_data(std::string(1, char(uint8_t(p.zero_point))));
    const std::string q = fresh(t + "_quantized"), dq = fresh(t + "_dequantized");
    add_node("QuantizeLinear", {t, s, z->name()}, q);
    add_node("DequantizeLinear", {q, s, z->name()}, dq);
    renamed_[t] = dq;
    act_scale_[dq] = p.scale;
  }

  // The int8 weight's DequantizeLinear output and its scales.
  std::pair<std::string, std::vector<float>> quantize_weight(const onnx::TensorProto& w,
                                                             const QuantNode& q,
                                                             QuantizeReport* rep) {
    const std::vector<float> wv = floats_of(w);
    const std::vector<int64_t> dims(w.dims().begin(), w.dims().end());
    const int axis = opts_.per_channel ? q.weight_axis : -1;
    const int64_t channels = axis >= 0 ? dims[size_t(axis)] : 1;
    int64_t inner = 1;
    for (size_t d = size_t(axis + 1); axis >= 0 && d < dims.size(); ++d) inner *= dims[d];
    auto channel = [&](size_t i) { return axis >= 0 ? int64_t(i / size_t(inner)) % channels : 0; };
    std::vector<float> scale(size_t(channels), 0.f);
    for (size_t i = 0; i < wv.size(); ++i)
      if (std::isfinite(wv[i]))
        scale[size_t(channel(i))] = std::max(scale[size_t(channel(i))], std::fabs(wv[i]));
    for (float& s : scale) s = s > 0 ? s / kWeightMax : 1.f;  // all-zero channel: any scale
    onnx::TensorProto* wq = add_init(w.name() + "_quantized", onnx::TensorProto::INT8, dims);
    std::string raw(wv.size(), '\0');
    for (size_t i = 0; i < wv.size(); ++i) {
      const float v =
          quantize_value(wv[i], scale[size_t(channel(i))], 0.f, {-kWeightMax, kWeightMax});
      raw[i] = char(int8_t(std::isnan(v) ? 0.f : v));
    }
    wq->set_raw_data(raw);
    const std::vector<int64_t> sdims = scale_dims(axis, channels);
    onnx::TensorProto* ws = add_init(w.name() + "_scale", onnx::TensorProto::FLOAT, sdims);
    for (float s : scale) ws->add_float_data(s);
    onnx::TensorProto* wz = add_init(w.name() + "_zero_point", onnx::TensorProto::INT8, sdims);
    wz->set_raw_data(std::string(size_t(channels), '\0'));
    const std::string wd = fresh(w.name() + "_dequantized");
    add_node("DequantizeLinear", {wq->name(), ws->name(), wz->name()}, wd, axis);
    replaced_.insert(w.name());
    ++rep->weights;
    return {wd, scale};
  }

  static std::vector<int64_t> scale_dims(int axis, int64_t channels) {
    return axis >= 0 ? std::vector<int64_t>{channels} : std::vector<int64_t>{};
  }

  // Weight (int8) and bias (int32) of node n, each through a DequantizeLinear.
  void quantize_params(onnx::NodeProto& n, const QuantNode& q, QuantizeReport* rep) {
    const onnx::TensorProto& w = *inits_.at(n.input(1));
    ++rep->nodes;
    auto cached = weights_.find(w.name());  // a weight read by several nodes: quantized once
    if (cached == weights_.end())
      cached = weights_.emplace(w.name(), quantize_weight(w, q, rep)).first;
    const auto& [wd, scale] = cached->second;
    n.set_input(1, wd);
    const int axis = opts_.per_channel ? q.weight_axis : -1;
    const int64_t channels = int64_t(scale.size());
    const std::vector<int64_t> sdims = scale_dims(axis, channels);

    // The bias at input scale x weight scale (input 0 reads its activation's DQ already).
    auto xs = act_scale_.find(n.input(0));
    if (!q.bias || xs == act_scale_.end()) return;
    const onnx::TensorProto& b = *inits_.at(n.input(2));
    const std::vector<float> bv = floats_of(b);
    const bool per_channel = axis >= 0 && int64_t(bv.size()) == channels;
    if (axis >= 0 && !per_channel) return;
    onnx::TensorProto* bq =
        add_init(b.name() + "_quantized", onnx::TensorProto::INT32, {int64_t(bv.size())});
    onnx::TensorProto* bs = add_init(b.name() + "_scale", onnx::TensorProto::FLOAT, sdims);
    for (size_t c = 0; c < size_t(channels); ++c) bs->add_float_data(xs->second * scale[c]);
    for (size_t i = 0; i < bv.size(); ++i) {
      const double s = double(bs->float_data(per_channel ? int(i) : 0));
      const double v = std::nearbyint(double(bv[i]) / s);
      bq->add_int32_data(int32_t(std::clamp(std::isnan(v) ? 0.0 : v, -2147483647.0, 2147483647.0)));
    }
    const std::string bd = fresh(b.name() + "_dequantized");
    add_node("DequantizeLinear", {bq->name(), bs->name()}, bd, per_channel ? 0 : -1);
    replaced_.insert(b.name());
    n.set_input(2, bd);
    ++rep->biases;
  }

  onnx::ModelProto& m_;
  const QuantizeOptions& opts_;
  std::set<std::string> used_;
  std::map<std::string, const onnx::TensorProto*> inits_;
  std::map<std::string, std::string> renamed_;  // activation -> its DequantizeLinear output
  std::map<std::string, float> act_scale_;      // by DequantizeLinear output
  std::set<std::string> replaced_;              // float initializers now stored quantized
  std::map<std::string, std::pair<std::string, std::vector<float>>> weights_;
};

}  // namespace

bool parse_calib_method(const std::string& s, CalibMethod* out) {
  if (s == "minmax") return *out = CalibMethod::minmax, true;
  if (s == "percentile") return *out = CalibMethod::percentile, true;
  return false;
}

QuantizeReport quantize_model(const std::string& model_path, const std::string& out_path,
                              const QuantizeOptions& o) {
  onnx::ModelProto m = read_model(model_path);
  const int64_t opset = default_opset(m);
  if (opset < 10)
    fail(Code::unsupported, "'" + model_path + "' uses opset " + std::to_string(opset) +
                                "; QuantizeLinear needs opset 10 or later (re-export the model)");
  if (o.per_channel && opset < 13)
    fail(Code::unsupported, "'" + model_path + "' uses opset " + std::to_string(opset) +
                                "; per-channel quantization needs opset 13 or later");
  const QuantSet sel = choose(m.graph());
  if (sel.nodes.empty())
    fail(Code::unsupported, "'" + model_path +
                                "' has no Conv, Gemm or MatMul with constant float weights to "
                                "quantize");
  QuantizeReport rep;
  std::map<std::string, ActParams> acts;
  {
    Calibrator cal(m, sel, o);
    rep.samples = cal.samples();
    for (const auto& [name, st] : cal.run()) acts[name] = act_params(st.calibrated(o.method));
  }
  Writer(m, o).write(sel, acts, &rep);
  rep.nodes += sel.adds;
  const std::string tmp = out_path + ".kiln-tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f || !m.SerializeToOstream(&f) || !f.flush())
      fail(Code::io_error, "cannot write '" + tmp + "'");
  }
  std::error_code ec;
  fs::rename(tmp, out_path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    fail(Code::io_error, "cannot write '" + out_path + "'");
  }
  return rep;
}

}  // namespace kiln
