// _kiln: the extension module behind the `kiln` Python package (kiln/__init__.py is the public
// API and its documentation). It is built on the public C API only (kiln/kiln.h, libkiln.so,
// through the RAII classes of kiln/kiln.hpp), so Python sees exactly the status codes, messages
// and thread safety C callers see.
//
// Arrays are checked here, before the C call, so that a mistake gets a message naming the input
// and what was expected; nothing is converted or copied (a float64 array is an error, not a
// silent cast). The GIL is released while a model loads and runs: C API runs on one session are
// thread-safe, so Python threads run one session concurrently.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kiln/kiln.hpp"

namespace py = pybind11;

namespace {

// ---- errors ---------------------------------------------------------------------------------

// The Python exception classes a kiln::Error becomes, indexed by kiln_code. They are defined in
// kiln/__init__.py (so that IoError can also be an OSError and OutOfMemory a MemoryError) and
// registered once by set_error_types. Plain references, never released: the module lives until the
// interpreter ends, and a static py::object would be destroyed after it.
PyObject* g_error_types[KILN_INTERNAL + 1] = {};

// Python class name of each kiln_code: the one table between the C codes and the classes.
struct CodeName {
  const char* cls;
  kiln_code code;
};
constexpr CodeName kCodeNames[] = {{"InvalidArgument", KILN_INVALID_ARGUMENT},
                                   {"InvalidModel", KILN_INVALID_MODEL},
                                   {"Unsupported", KILN_UNSUPPORTED},
                                   {"ShapeMismatch", KILN_SHAPE_MISMATCH},
                                   {"IoError", KILN_IO_ERROR},
                                   {"OutOfMemory", KILN_OUT_OF_MEMORY},
                                   {"Internal", KILN_INTERNAL}};

void set_error_types(const py::dict& classes) {
  for (const CodeName& c : kCodeNames) {
    if (!classes.contains(c.cls))
      throw std::invalid_argument(std::string("no exception class for ") + c.cls);
    py::object cls = classes[c.cls];
    cls.attr("code") = int(c.code);
    Py_XDECREF(g_error_types[c.code]);
    g_error_types[c.code] = cls.release().ptr();
  }
}

[[noreturn]] void raise(kiln_code code, const std::string& msg) {
  throw kiln::Error(code, msg);
}

void translate(std::exception_ptr p) {
  try {
    if (p) std::rethrow_exception(p);
  } catch (const kiln::Error& e) {
    const kiln_code code = e.code();
    PyObject* cls = code >= 0 && code <= KILN_INTERNAL ? g_error_types[code] : nullptr;
    PyErr_SetString(cls ? cls : PyExc_RuntimeError, e.what());
  }
}

// ---- option values --------------------------------------------------------------------------

// Names of the kiln_options enum values, as the CLI spells them.
struct Choice {
  const char* name;
  int32_t value;
};
constexpr Choice kStrategies[] = {{"global", KILN_STRATEGY_GLOBAL},
                                  {"local", KILN_STRATEGY_LOCAL},
                                  {"fixed", KILN_STRATEGY_FIXED},
                                  {"heuristic", KILN_STRATEGY_HEURISTIC}};
constexpr Choice kTunings[] = {
    {"none", KILN_TUNING_NONE}, {"fast", KILN_TUNING_FAST}, {"full", KILN_TUNING_FULL}};
constexpr Choice kAccuracies[] = {{"default", KILN_ACCURACY_DEFAULT},
                                  {"strict", KILN_ACCURACY_STRICT},
                                  {"fast", KILN_ACCURACY_FAST}};
constexpr Choice kPrecisions[] = {{"f32", KILN_PRECISION_F32}, {"bf16", KILN_PRECISION_BF16}};
constexpr Choice kIsas[] = {
    {"scalar", KILN_ISA_SCALAR}, {"avx2", KILN_ISA_AVX2}, {"avx512", KILN_ISA_AVX512}};
constexpr Choice kLogLevels[] = {{"trace", KILN_LOG_TRACE}, {"debug", KILN_LOG_DEBUG},
                                 {"info", KILN_LOG_INFO},   {"warn", KILN_LOG_WARN},
                                 {"error", KILN_LOG_ERROR}, {"critical", KILN_LOG_CRITICAL},
                                 {"off", KILN_LOG_OFF}};

std::string allowed(const char* option, const Choice* c, size_t n, bool none_ok) {
  std::string s = std::string(option) + " must be ";
  if (none_ok) s += "None or ";
  s += "one of ";
  for (size_t i = 0; i < n; ++i) s += (i ? ", '" : "'") + std::string(c[i].name) + "'";
  return s;
}

template <size_t N>
int32_t choice(const char* option, const Choice (&c)[N], const std::optional<std::string>& v,
               int32_t none_value, bool none_ok) {
  if (!v) {
    if (none_ok) return none_value;
    raise(KILN_INVALID_ARGUMENT, allowed(option, c, N, false) + ", not None");
  }
  for (const Choice& x : c)
    if (*v == x.name) return x.value;
  raise(KILN_INVALID_ARGUMENT, allowed(option, c, N, none_ok) + ", not '" + *v + "'");
}

const char* choice_name(const Choice* c, size_t n, int32_t v) {
  for (size_t i = 0; i < n; ++i)
    if (c[i].value == v) return c[i].name;
  return "unknown";
}

// ---- sessions -------------------------------------------------------------------------------

py::dtype numpy_dtype(kiln_dtype t) {
  switch (t) {
    case KILN_DTYPE_U8:
      return py::dtype::of<uint8_t>();
    case KILN_DTYPE_I8:
      return py::dtype::of<int8_t>();
    case KILN_DTYPE_I32:
      return py::dtype::of<int32_t>();
    case KILN_DTYPE_I64:
      return py::dtype::of<int64_t>();
    case KILN_DTYPE_BOOL:
      return py::dtype::of<bool>();
    case KILN_DTYPE_F64:
      return py::dtype::of<double>();
    default:
      return py::dtype::of<float>();
  }
}

bool dtype_matches(const py::array& a, kiln_dtype t) {
  return a.dtype().attr("__eq__")(numpy_dtype(t)).cast<bool>();  // numpy's dtype equality
}

// A model input or output as the checks and numpy need it.
struct Io {
  std::string name;
  std::vector<py::ssize_t> dims;
  kiln_dtype dtype;
  size_t bytes = 0;
  py::dtype np_dtype;
};

std::vector<Io> io_list(const std::vector<kiln::TensorInfo>& infos) {
  std::vector<Io> list;
  for (const kiln::TensorInfo& t : infos)
    list.push_back({t.name, std::vector<py::ssize_t>(t.shape.begin(), t.shape.end()), t.dtype,
                    t.bytes, numpy_dtype(t.dtype)});
  return list;
}

std::string tuple_str(const std::vector<py::ssize_t>& dims) {
  std::string s = "(";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + (dims.size() == 1 ? ",)" : ")");
}

std::string names(const std::vector<Io>& list) {
  std::string s;
  for (const Io& io : list) s += (s.empty() ? "'" : ", '") + io.name + "'";
  return s.empty() ? "none" : s;
}

std::string type_name(py::handle h) {
  return py::str(h.get_type().attr("__name__"));
}

// Holds a Python buffer (bytes, bytearray, memoryview, ...) for the duration of a load.
struct BufferView {
  Py_buffer view{};
  explicit BufferView(py::handle h) {
    if (PyObject_GetBuffer(h.ptr(), &view, PyBUF_SIMPLE) != 0) throw py::error_already_set();
  }
  ~BufferView() { PyBuffer_Release(&view); }
  BufferView(const BufferView&) = delete;
  BufferView& operator=(const BufferView&) = delete;
};

// Checks one array against the model's input/output: dtype, shape (with any_batch, dim 0 may
// differ), C order, alignment and, for outputs, that it is writeable.
py::array checked(py::handle h, const Io& io, const char* kind, bool output, bool any_batch) {
  const std::string what = std::string(kind) + " '" + io.name + "'";
  if (!py::isinstance<py::array>(h))
    throw py::type_error(what + ": expected a numpy.ndarray, got " + type_name(h));
  auto a = py::reinterpret_borrow<py::array>(h);
  if (!dtype_matches(a, io.dtype)) {
    const std::string want = py::str(py::handle(io.np_dtype));
    raise(KILN_SHAPE_MISMATCH, what + ": dtype is " + std::string(py::str(a.dtype())) +
                                   ", expected " + want +
                                   " (arrays are not converted: use .astype(numpy." + want + "))");
  }
  std::vector<py::ssize_t> shape(a.shape(), a.shape() + a.ndim());
  const bool batch_only = any_batch && !shape.empty() && shape.size() == io.dims.size() &&
                          std::equal(shape.begin() + 1, shape.end(), io.dims.begin() + 1);
  if (shape != io.dims && !batch_only)
    raise(KILN_SHAPE_MISMATCH, what + ": shape is " + tuple_str(shape) + ", expected " +
                                   tuple_str(io.dims) +
                                   (any_batch ? " (dim 0, the batch, may differ)" : ""));
  if (!(a.flags() & py::array::c_style))
    raise(KILN_INVALID_ARGUMENT,
          what + " is not C-contiguous (use numpy.ascontiguousarray to make a C-ordered copy)");
  if (reinterpret_cast<uintptr_t>(a.data()) % size_t(a.itemsize()) != 0)
    raise(KILN_INVALID_ARGUMENT, what + ": data is not aligned to its element size (" +
                                     std::to_string(a.itemsize()) + " bytes)");
  if (output && !a.writeable()) raise(KILN_INVALID_ARGUMENT, what + " is read-only");
  return a;
}

// The caller's arrays in the model's order (a dict by name or a list/tuple by position), each
// checked. Outputs not given are allocated.
std::vector<py::array> bind(py::handle given, const std::vector<Io>& list, const char* kind,
                            bool output, bool any_batch = false) {
  std::vector<py::array> arrays(list.size());
  std::vector<bool> have(list.size(), false);
  const std::string plural = std::string(kind) + "s";
  if (given.is_none() && output) {
    // all allocated below
  } else if (PyDict_Check(given.ptr())) {
    for (auto item : py::reinterpret_borrow<py::dict>(given)) {
      if (!py::isinstance<py::str>(item.first))
        throw py::type_error(plural + " must be keyed by name (str), got a key of type " +
                             type_name(item.first));
      const std::string name = item.first.cast<std::string>();
      size_t i = 0;
      while (i < list.size() && list[i].name != name) ++i;
      if (i == list.size())
        raise(KILN_INVALID_ARGUMENT, "unknown " + std::string(kind) + " name '" + name +
                                         "' (the model's " + plural + ": " + names(list) + ")");
      arrays[i] = checked(item.second, list[i], kind, output, any_batch);
      have[i] = true;
    }
  } else if (PyList_Check(given.ptr()) || PyTuple_Check(given.ptr())) {
    auto seq = py::reinterpret_borrow<py::sequence>(given);
    if (seq.size() != list.size())
      raise(KILN_INVALID_ARGUMENT, std::to_string(seq.size()) + " " + plural +
                                       " given by position, the model has " +
                                       std::to_string(list.size()) + " (" + names(list) + ")");
    for (size_t i = 0; i < list.size(); ++i) {
      arrays[i] = checked(seq[i], list[i], kind, output, any_batch);
      have[i] = true;
    }
  } else {
    throw py::type_error(plural + " must be a dict {name: numpy.ndarray} or a list/tuple of " +
                         "arrays in model order, got " + type_name(given));
  }
  for (size_t i = 0; i < list.size(); ++i) {
    if (have[i]) continue;
    if (!output)
      raise(KILN_INVALID_ARGUMENT,
            "missing input '" + list[i].name + "' (the model's inputs: " + names(list) + ")");
    arrays[i] = py::array(list[i].np_dtype, list[i].dims);
  }
  return arrays;
}

class Session {
 public:
  // Loads from a path (from_bytes false) or from a buffer holding the ONNX bytes.
  Session(py::handle source, bool from_bytes, int32_t threads,
          const std::optional<std::string>& log_level, int64_t batch,
          const std::optional<std::string>& cache_dir, const std::optional<std::string>& tune,
          const std::optional<std::string>& max_isa, const std::optional<std::string>& strategy,
          bool disable_cache, double profile_budget_ms, const std::optional<std::string>& accuracy,
          const std::optional<std::string>& precision,
          const std::map<std::string, std::vector<int64_t>>& shapes) {
    kiln::Options o;
    for (const auto& [name, dims] : shapes) o.input_shape(name, dims);
    o.threads(threads)
        .batch_size(batch)
        .log_level(choice("log_level", kLogLevels, log_level, -1, true))
        .tuning(kiln_tuning(choice("tune", kTunings, tune, 0, false)))
        .max_isa(kiln_isa(choice("max_isa", kIsas, max_isa, KILN_ISA_DEFAULT, true)))
        .strategy(kiln_strategy(choice("strategy", kStrategies, strategy, 0, false)))
        .accuracy(kiln_accuracy(choice("accuracy", kAccuracies, accuracy, 0, false)))
        .precision(kiln_precision(choice("precision", kPrecisions, precision, 0, false)))
        .disable_cache(disable_cache)
        .profile_budget_ms(profile_budget_ms)
        .cache_dir(cache_dir.value_or(""));
    if (from_bytes) {
      BufferView b(source);
      py::gil_scoped_release nogil;
      s_ = kiln::Session::from_memory(b.view.buf, size_t(b.view.len), o);
    } else {
      const std::string path = source.cast<std::string>();
      py::gil_scoped_release nogil;
      s_.emplace(path, o);
    }
    inputs_ = io_list(s_->inputs());
    outputs_ = io_list(s_->outputs());
    for (const kiln::TensorInfo& t : s_->outputs())
      if (t.dynamic) dynamic_ = t.name;
    for (const Io& io : inputs_)
      if (!io.dims.empty()) {
        batch_ = io.dims[0];
        break;
      }
  }

  // Waits (without the GIL) for runs in progress, then releases the C session. Idempotent.
  // (The destructor needs no lock: a run or close in progress holds a reference to this.)
  void close() {
    py::gil_scoped_release nogil;
    std::unique_lock<std::shared_mutex> lock(mu_);
    s_.reset();
    closed_ = true;
  }
  bool closed() const { return closed_; }

  // (name, shape, dtype) per input or output, in model order.
  py::list io(bool input) const {
    py::list l;
    for (const Io& io : input ? inputs_ : outputs_) {
      py::tuple shape(io.dims.size());
      for (size_t i = 0; i < io.dims.size(); ++i) shape[i] = io.dims[i];
      l.append(py::make_tuple(io.name, shape, io.np_dtype));
    }
    return l;
  }

  std::string isa() {
    kiln_isa isa = KILN_ISA_DEFAULT;
    with_session([&](const kiln::Session& s) { isa = s.isa(); });
    return choice_name(kIsas, std::size(kIsas), isa);
  }

  std::string plan_json() {
    std::string json;
    with_session([&](const kiln::Session& s) { json = s.plan_json(); });
    return json;
  }

  std::string profile_json(int32_t runs) {
    std::string json;
    with_session([&](const kiln::Session& s) { json = s.profile_json(runs); });
    return json;
  }

  // Runs once: feeds and out are a dict by name or a list/tuple in model order; out may name
  // only some outputs (the others are allocated). Returns {name: array} for every output.
  py::dict run(py::handle feeds, py::handle out) {
    if (!dynamic_.empty()) return run_dynamic(feeds, out);
    Call c = prepare(feeds, out);
    with_session([&](const kiln::Session& s) { run_call(s, c); });
    py::dict d;
    for (size_t i = 0; i < outputs_.size(); ++i) d[py::str(outputs_[i].name)] = c.out[i];
    return d;
  }

  // Times `runs` runs after `warmup` untimed ones, all without the GIL, on the given inputs and
  // outputs it allocates once. Returns milliseconds per run.
  std::vector<double> time_runs(py::handle feeds, int runs, int warmup) {
    if (runs < 1 || warmup < 0)
      raise(KILN_INVALID_ARGUMENT, "runs must be >= 1 and warmup >= 0, got runs=" +
                                       std::to_string(runs) + ", warmup=" + std::to_string(warmup));
    std::vector<double> ms;
    ms.reserve(size_t(runs));
    if (!dynamic_.empty()) {  // every run allocates its outputs (kiln_session_run_outputs)
      const std::vector<py::array> in = bind(feeds, std::as_const(inputs_), "input", false);
      std::vector<const void*> ptrs;
      for (const py::array& a : in) ptrs.push_back(a.data());
      with_session([&](const kiln::Session& s) {
        for (int i = 0; i < warmup + runs; ++i) {
          const auto t0 = std::chrono::steady_clock::now();
          s.run_outputs(ptrs);
          const std::chrono::duration<double, std::milli> dt =
              std::chrono::steady_clock::now() - t0;
          if (i >= warmup) ms.push_back(dt.count());
        }
      });
      return ms;
    }
    Call c = prepare(feeds, py::none());
    with_session([&](const kiln::Session& s) {
      for (int i = 0; i < warmup + runs; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        run_call(s, c);
        const std::chrono::duration<double, std::milli> dt = std::chrono::steady_clock::now() - t0;
        if (i >= warmup) ms.push_back(dt.count());
      }
    });
    return ms;
  }

 private:
  // A model whose output sizes each run decides: run at the loaded shapes into outputs the
  // library allocates, copied into fresh arrays.
  py::dict run_dynamic(py::handle feeds, py::handle out) {
    if (closed_) raise(KILN_INVALID_ARGUMENT, "the session is closed");
    if (!out.is_none())
      raise(KILN_INVALID_ARGUMENT, "output '" + dynamic_ +
                                       "' has a size each run decides: out= cannot be given for "
                                       "this model (run returns new arrays)");
    const std::vector<py::array> in = bind(feeds, std::as_const(inputs_), "input", false);
    std::vector<const void*> ptrs;
    for (const py::array& a : in) ptrs.push_back(a.data());
    kiln::Outputs r;
    with_session([&](const kiln::Session& s) { r = s.run_outputs(ptrs); });
    py::dict d;
    for (size_t i = 0; i < outputs_.size(); ++i) {
      const std::vector<int64_t> dims = r.shape(i);
      py::array a(outputs_[i].np_dtype, std::vector<py::ssize_t>(dims.begin(), dims.end()));
      if (a.nbytes()) std::memcpy(a.mutable_data(), r.data(i), size_t(a.nbytes()));
      d[py::str(outputs_[i].name)] = a;
    }
    return d;
  }

  // One run's checked arrays (kept alive for the call), the pointers the C call takes, and the
  // batch: 0 = the session's own, else another (kiln_session_run_batch) and its shapes.
  struct Call {
    std::vector<py::array> in, out;
    std::vector<const void*> in_ptr;
    std::vector<void*> out_ptr;
    int64_t batch = 0;
    std::vector<Io> in_io, out_io;
  };

  Call prepare(py::handle feeds, py::handle out) {
    if (closed_) raise(KILN_INVALID_ARGUMENT, "the session is closed");
    Call c;
    c.in = bind(feeds, std::as_const(inputs_), "input", false, true);
    c.in_io = inputs_;
    c.out_io = outputs_;
    // Arrays of the loaded shapes run as they are (inputs may have different dim 0s, e.g. a
    // broadcast operand); otherwise dim 0 is a batch every input shares.
    bool loaded_shapes = true;
    for (size_t i = 0; i < c.in.size(); ++i)
      loaded_shapes &= std::equal(c.in[i].shape(), c.in[i].shape() + c.in[i].ndim(),
                                  inputs_[i].dims.begin(), inputs_[i].dims.end());
    for (size_t i = 0; i < c.in.size() && !loaded_shapes; ++i) {
      if (c.in[i].ndim() == 0) continue;
      const int64_t b = c.in[i].shape(0);
      if (c.batch == 0) c.batch = b;
      if (b != c.batch)
        raise(KILN_SHAPE_MISMATCH, "input '" + inputs_[i].name + "' has batch (dim 0) " +
                                       std::to_string(b) + ", the inputs before it " +
                                       std::to_string(c.batch) + ": every input takes one batch");
    }
    if (c.batch == batch_) c.batch = 0;
    if (c.batch) {  // planned here if new, so that time_runs times runs only
      with_session([&](const kiln::Session& s) {
        c.in_io = io_list(s.inputs_at(c.batch));
        c.out_io = io_list(s.outputs_at(c.batch));
      });
    }
    c.out = bind(out, std::as_const(c.out_io), "output", true);
    for (const py::array& a : c.in) c.in_ptr.push_back(a.data());
    for (py::array& a : c.out) c.out_ptr.push_back(a.mutable_data());
    check_overlaps(c);
    return c;
  }

  static void run_call(const kiln::Session& s, const Call& c) {
    if (c.batch)
      s.run_batch(c.batch, c.in_ptr, c.out_ptr);
    else
      s.run(c.in_ptr, c.out_ptr);
  }

  // kiln_session_run's outputs must not overlap each other or an input.
  void check_overlaps(const Call& c) const {
    auto overlap = [](const void* a, size_t an, const void* b, size_t bn) {
      auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
      return an && bn && pa < pb + bn && pb < pa + an;
    };
    const std::vector<Io>&ins = c.in_io, &outs = c.out_io;
    for (size_t i = 0; i < outs.size(); ++i) {
      for (size_t j = 0; j < ins.size(); ++j)
        if (overlap(c.out_ptr[i], outs[i].bytes, c.in_ptr[j], ins[j].bytes))
          raise(KILN_INVALID_ARGUMENT,
                "output '" + outs[i].name + "' shares memory with input '" + ins[j].name + "'");
      for (size_t j = 0; j < i; ++j)
        if (overlap(c.out_ptr[i], outs[i].bytes, c.out_ptr[j], outs[j].bytes))
          raise(KILN_INVALID_ARGUMENT,
                "outputs '" + outs[j].name + "' and '" + outs[i].name + "' share memory");
    }
  }

  // Calls f(session) without the GIL, holding the session open (close() waits for it).
  template <class F>
  void with_session(F&& f) {
    py::gil_scoped_release nogil;
    std::shared_lock<std::shared_mutex> lock(mu_);
    if (!s_) raise(KILN_INVALID_ARGUMENT, "the session is closed");
    f(*s_);
  }

  std::optional<kiln::Session> s_;
  std::shared_mutex mu_;  // runs hold it shared, close() exclusively
  std::atomic<bool> closed_{false};
  std::vector<Io> inputs_, outputs_;
  std::string dynamic_;  // the first output whose size each run decides ("": none)
  int64_t batch_ = 0;    // the batch loaded (dim 0 of the first input with dims)
};

}  // namespace

PYBIND11_MODULE(_kiln, m) {
  m.doc() = "Kiln's C API for the kiln package (use `import kiln`, not this module).";
  py::register_exception_translator(translate);
  m.def("version", &kiln::version);
  m.def("machine_json", &kiln::machine_json);
  m.def("set_error_types", &set_error_types, py::arg("classes"));

  py::class_<Session>(m, "Session")
      .def(py::init<py::handle, bool, int32_t, const std::optional<std::string>&, int64_t,
                    const std::optional<std::string>&, const std::optional<std::string>&,
                    const std::optional<std::string>&, const std::optional<std::string>&, bool,
                    double, const std::optional<std::string>&, const std::optional<std::string>&,
                    const std::map<std::string, std::vector<int64_t>>&>(),
           py::arg("source"), py::arg("from_bytes"), py::kw_only(), py::arg("threads"),
           py::arg("log_level").none(true), py::arg("batch"), py::arg("cache_dir").none(true),
           py::arg("tune").none(true), py::arg("max_isa").none(true),
           py::arg("strategy").none(true), py::arg("disable_cache"), py::arg("profile_budget_ms"),
           py::arg("accuracy").none(true), py::arg("precision").none(true), py::arg("shapes"))
      .def("close", &Session::close)
      .def_property_readonly("closed", &Session::closed)
      .def("io", &Session::io, py::arg("input"))
      .def("isa", &Session::isa)
      .def("plan_json", &Session::plan_json)
      .def("profile_json", &Session::profile_json, py::arg("runs"))
      .def("run", &Session::run, py::arg("feeds"), py::arg("out") = py::none())
      .def("time_runs", &Session::time_runs, py::arg("feeds"), py::arg("runs"), py::arg("warmup"));
}
