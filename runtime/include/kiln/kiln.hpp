// Kiln's C++ interface: header-only RAII classes over the C API (kiln/kiln.h), C++17.
//
//   kiln::Options o;
//   o.threads(2).cache_dir("/tmp/kiln-cache");
//   kiln::Session s("resnet50.onnx", o);             // throws kiln::Error on failure
//   std::vector<float> x(s.inputs()[0].elements());  // fill it
//   std::vector<float> y(s.outputs()[0].elements());
//   s.run({x.data()}, {y.data()});
//
// Every failed C call becomes a kiln::Error (a std::runtime_error) carrying the kiln_code and
// the library's message; handles are released by the destructors. Sessions are movable, not
// copyable; Session::run is const and safe to call from several threads at once (the C API's
// thread-safety rules apply unchanged).
#ifndef KILN_KILN_HPP_
#define KILN_KILN_HPP_

#include <kiln/kiln.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace kiln {
// Kiln's own C++ code also lives in namespace kiln (inside libkiln.so, never exported); the
// inline namespace gives these classes distinct symbols and type identities from it.
inline namespace api_v0 {

// A failed Kiln call: code() is the C status code, what() its message.
class Error : public std::runtime_error {
 public:
  Error(kiln_code code, const std::string& message) : std::runtime_error(message), code_(code) {}
  kiln_code code() const noexcept { return code_; }
  const char* code_name() const noexcept { return kiln_code_name(code_); }

 private:
  kiln_code code_;
};

// Throws the status as an Error (and releases it); nothing for NULL (success).
inline void check(kiln_status* status) {
  if (!status) return;
  std::unique_ptr<kiln_status, decltype(&kiln_status_release)> owned(status, kiln_status_release);
  throw Error(kiln_status_code(status), kiln_status_message(status));
}

// The library's version at run time (KILN_VERSION_STRING is the headers').
inline std::string version() {
  return kiln_version();
}
// This machine and build as JSON (kiln_machine_json).
inline std::string machine_json() {
  return kiln_machine_json();
}

// Session options: kiln_options with setters that chain. Defaults as kiln_options_init.
class Options {
 public:
  Options() { check(kiln_options_init(&o_)); }
  Options(const Options& other)
      : o_(other.o_), cache_dir_(other.cache_dir_), shapes_(other.shapes_) {
    fix();
  }
  Options& operator=(const Options& other) {
    o_ = other.o_;
    cache_dir_ = other.cache_dir_;
    shapes_ = other.shapes_;
    fix();
    return *this;
  }

  Options& threads(int32_t n) { return set(o_.threads, n); }
  Options& batch_size(int64_t n) { return set(o_.batch_size, n); }
  Options& log_level(int32_t level) { return set(o_.log_level, level); }  // kiln_log_level
  Options& tuning(kiln_tuning t) { return set(o_.tuning_mode, int32_t(t)); }
  Options& strategy(kiln_strategy s) { return set(o_.strategy, int32_t(s)); }
  Options& accuracy(kiln_accuracy a) { return set(o_.accuracy, int32_t(a)); }
  Options& precision(kiln_precision p) { return set(o_.precision, int32_t(p)); }
  Options& max_isa(kiln_isa isa) { return set(o_.max_isa, int32_t(isa)); }
  Options& disable_cache(bool off = true) { return set(o_.disable_cache, int32_t(off)); }
  Options& profile_budget_ms(double ms) { return set(o_.profile_budget_ms, ms); }
  // "" = the default folder ($KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln).
  Options& cache_dir(std::string dir) {
    cache_dir_ = std::move(dir);
    fix();
    return *this;
  }

  // Sets input `name`'s shape at load (kiln_options.input_shapes): every dim, each >= 1.
  // Symbolic dims other than the batch must be set; fixed ones may change where the model
  // takes it. Checked at session creation.
  Options& input_shape(const std::string& name, const std::vector<int64_t>& dims) {
    shapes_ += (shapes_.empty() ? "" : ",") + name + ":";
    for (size_t i = 0; i < dims.size(); ++i) shapes_ += (i ? "x" : "") + std::to_string(dims[i]);
    fix();
    return *this;
  }

  const kiln_options* get() const { return &o_; }

 private:
  template <class T, class V>
  Options& set(T& field, V v) {
    field = T(v);
    return *this;
  }
  void fix() {
    o_.cache_dir = cache_dir_.empty() ? nullptr : cache_dir_.c_str();
    o_.input_shapes = shapes_.empty() ? nullptr : shapes_.c_str();
  }

  kiln_options o_{};
  std::string cache_dir_;
  std::string shapes_;  // input_shapes' text
};

// One model input or output.
struct TensorInfo {
  std::string name;
  kiln_dtype dtype = KILN_DTYPE_F32;
  std::vector<int64_t> shape;
  size_t bytes = 0;  // what run() expects: elements() * element size (0 when dynamic)
  // The shape is decided by each run (kiln_session_output_dynamic): `shape` holds the declared
  // dims, -1 where unknown; run such a model with run_outputs().
  bool dynamic = false;
  size_t elements() const {
    size_t n = 1;
    for (int64_t d : shape) n *= size_t(d);
    return n;
  }
};

// The outputs of one run_outputs() call, owned (kiln_outputs_release when destroyed).
class Outputs {
 public:
  Outputs() = default;
  explicit Outputs(kiln_outputs* o) : o_(o, kiln_outputs_release) {}
  // Output i's elements (dense, C-ordered, of the output's dtype) and dims.
  const void* data(size_t i) const {
    const void* d = nullptr;
    const int64_t* dims = nullptr;
    size_t rank = 0;
    check(kiln_outputs_get(o_.get(), i, &d, &dims, &rank));
    return d;
  }
  std::vector<int64_t> shape(size_t i) const {
    const void* d = nullptr;
    const int64_t* dims = nullptr;
    size_t rank = 0;
    check(kiln_outputs_get(o_.get(), i, &d, &dims, &rank));
    return std::vector<int64_t>(dims, dims + rank);
  }

 private:
  std::unique_ptr<kiln_outputs, decltype(&kiln_outputs_release)> o_{nullptr, kiln_outputs_release};
};

class Session {
 public:
  explicit Session(const std::string& path, const Options& options = Options()) {
    kiln_session* s = nullptr;
    check(kiln_session_create_from_file(path.c_str(), options.get(), &s));
    adopt(s);
  }
  // From an ONNX ModelProto in memory (not needed after the call).
  static Session from_memory(const void* data, size_t size, const Options& options = Options()) {
    kiln_session* s = nullptr;
    check(kiln_session_create_from_memory(data, size, options.get(), &s));
    return Session(s);
  }

  Session(Session&&) noexcept = default;
  Session& operator=(Session&&) noexcept = default;

  const std::vector<TensorInfo>& inputs() const { return inputs_; }
  const std::vector<TensorInfo>& outputs() const { return outputs_; }
  size_t input_index(const std::string& name) const {
    size_t i = 0;
    check(kiln_session_input_index(get(), name.c_str(), &i));
    return i;
  }
  size_t output_index(const std::string& name) const {
    size_t i = 0;
    check(kiln_session_output_index(get(), name.c_str(), &i));
    return i;
  }
  kiln_isa isa() const {
    kiln_isa isa = KILN_ISA_DEFAULT;
    check(kiln_session_isa(get(), &isa));
    return isa;
  }

  // One run. inputs[i] / outputs[i] point at dense C-ordered buffers of inputs()[i].bytes /
  // outputs()[i].bytes bytes (counts and sizes are checked by the library).
  void run(const std::vector<const void*>& inputs, const std::vector<void*>& outputs) const {
    // The library checks the counts before it reads any size, so the model's sizes serve any
    // count.
    check(kiln_session_run(get(), inputs.data(), in_bytes_.data(), inputs.size(), outputs.data(),
                           out_bytes_.data(), outputs.size()));
  }
  // One run into outputs the library allocates (kiln_session_run_outputs): any model, and the
  // only way to run one whose outputs are dynamic. Inputs as for run().
  Outputs run_outputs(const std::vector<const void*>& inputs) const {
    kiln_outputs* o = nullptr;
    check(kiln_session_run_outputs(get(), inputs.data(), in_bytes_.data(), inputs.size(), &o));
    return Outputs(o);
  }
  // The inputs and outputs at another batch (dim 0 of every input): planned on first use
  // (kiln_session_run_batch). batch 0 = the session's own.
  std::vector<TensorInfo> inputs_at(int64_t batch) const {
    std::vector<TensorInfo> list = inputs_;
    if (batch > 0)
      for (TensorInfo& t : list) resize(t, t.shape.empty() ? t.shape : rebatch(t.shape, batch));
    return list;
  }
  std::vector<TensorInfo> outputs_at(int64_t batch) const {
    std::vector<TensorInfo> list = outputs_;
    if (batch <= 0) return list;
    for (size_t i = 0; i < list.size(); ++i) {
      std::vector<int64_t> dims(list[i].shape.size());
      size_t rank = 0;
      check(kiln_session_output_shape_for_batch(get(), batch, i, dims.data(), dims.size(), &rank));
      dims.resize(rank);
      resize(list[i], dims);
    }
    return list;
  }
  // One run at `batch` (kiln_session_run_batch): buffers of inputs_at(batch)[i].bytes /
  // outputs_at(batch)[i].bytes.
  void run_batch(int64_t batch, const std::vector<const void*>& inputs,
                 const std::vector<void*>& outputs) const {
    std::vector<size_t> in_bytes, out_bytes;
    for (const TensorInfo& t : inputs_at(batch)) in_bytes.push_back(t.bytes);
    for (const TensorInfo& t : outputs_at(batch)) out_bytes.push_back(t.bytes);
    in_bytes.resize(inputs.size());  // the library checks the counts first
    out_bytes.resize(outputs.size());
    check(kiln_session_run_batch(get(), batch, inputs.data(), in_bytes.data(), inputs.size(),
                                 outputs.data(), out_bytes.data(), outputs.size()));
  }
  // Float models: the input vectors in order; returns the outputs (all must be float32).
  std::vector<std::vector<float>> run(const std::vector<std::vector<float>>& inputs) const {
    std::vector<const void*> in;
    for (const auto& v : inputs) in.push_back(v.data());
    std::vector<std::vector<float>> out;
    std::vector<void*> out_ptrs;
    for (const TensorInfo& t : outputs_) {
      if (t.dtype != KILN_DTYPE_F32)
        throw Error(KILN_INVALID_ARGUMENT, "output '" + t.name + "' is not float32");
      out.emplace_back(t.elements());
    }
    for (auto& v : out) out_ptrs.push_back(v.data());
    for (size_t i = 0; i < inputs.size() && i < inputs_.size(); ++i)
      if (inputs_[i].dtype != KILN_DTYPE_F32 || inputs[i].size() != inputs_[i].elements())
        throw Error(KILN_SHAPE_MISMATCH, "input '" + inputs_[i].name + "' needs " +
                                             std::to_string(inputs_[i].elements()) +
                                             " float32 values, got " +
                                             std::to_string(inputs[i].size()));
    run(in, out_ptrs);
    return out;
  }

  // The plan as JSON (kiln_session_plan_json) and per-step times over `runs` profiled runs
  // (kiln_session_profile_json).
  std::string plan_json() const {
    const char* json = nullptr;
    check(kiln_session_plan_json(get(), &json));
    return json;
  }
  std::string profile_json(int32_t runs = 10) const {
    char* json = nullptr;
    check(kiln_session_profile_json(get(), runs, &json));
    std::unique_ptr<char, decltype(&kiln_string_release)> owned(json, kiln_string_release);
    return json;
  }

  // The C handle, for calls this header does not wrap.
  kiln_session* get() const { return s_.get(); }

 private:
  explicit Session(kiln_session* s) { adopt(s); }
  static std::vector<int64_t> rebatch(std::vector<int64_t> dims, int64_t batch) {
    dims[0] = batch;
    return dims;
  }
  // t with another shape, bytes to match.
  static void resize(TensorInfo& t, const std::vector<int64_t>& dims) {
    const size_t per = t.elements() ? t.bytes / t.elements() : (t.dtype == KILN_DTYPE_I64 ? 8 : 4);
    t.shape = dims;
    t.bytes = t.elements() * per;
  }
  void adopt(kiln_session* s) {
    s_.reset(s);
    inputs_ = infos(true);
    outputs_ = infos(false);
    for (const TensorInfo& t : inputs_) in_bytes_.push_back(t.bytes);
    for (const TensorInfo& t : outputs_) out_bytes_.push_back(t.bytes);
  }
  std::vector<TensorInfo> infos(bool input) const {
    size_t n = 0;
    check(input ? kiln_session_input_count(get(), &n) : kiln_session_output_count(get(), &n));
    std::vector<TensorInfo> list(n);
    for (size_t i = 0; i < n; ++i) {
      TensorInfo& t = list[i];
      const char* name = nullptr;
      const int64_t* dims = nullptr;
      size_t rank = 0;
      check(input ? kiln_session_input_name(get(), i, &name)
                  : kiln_session_output_name(get(), i, &name));
      check(input ? kiln_session_input_dtype(get(), i, &t.dtype)
                  : kiln_session_output_dtype(get(), i, &t.dtype));
      check(input ? kiln_session_input_shape(get(), i, &dims, &rank)
                  : kiln_session_output_shape(get(), i, &dims, &rank));
      int32_t dynamic = 0;
      if (!input) check(kiln_session_output_dynamic(get(), i, &dynamic));
      t.dynamic = dynamic != 0;
      if (!t.dynamic)
        check(input ? kiln_session_input_byte_size(get(), i, &t.bytes)
                    : kiln_session_output_byte_size(get(), i, &t.bytes));
      t.name = name;
      t.shape.assign(dims, dims + rank);
    }
    return list;
  }

  std::unique_ptr<kiln_session, decltype(&kiln_session_release)> s_{nullptr, kiln_session_release};
  std::vector<TensorInfo> inputs_, outputs_;
  std::vector<size_t> in_bytes_, out_bytes_;  // what run() passes: each buffer's size, by index
};

}  // namespace api_v0
}  // namespace kiln

#endif  // KILN_KILN_HPP_
