// Kiln C API from C++ through a small RAII wrapper: same program as classify.c (same
// pseudo-random input, so both print the same top-5).
//
//   usage: classify_cpp MODEL.onnx [THREADS]
#include <kiln/kiln.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

namespace kiln_cpp {

// Thrown for any failed status; carries the code.
class Error : public std::runtime_error {
 public:
  Error(kiln_code code, const std::string& msg) : std::runtime_error(msg), code_(code) {}
  kiln_code code() const { return code_; }

 private:
  kiln_code code_;
};

inline void check(kiln_status* st) {
  if (!st) return;
  std::unique_ptr<kiln_status, decltype(&kiln_status_release)> owned(st, kiln_status_release);
  throw Error(kiln_status_code(st), kiln_status_message(st));
}

struct TensorInfo {
  std::string name;
  kiln_dtype dtype;
  std::vector<int64_t> shape;
  size_t bytes;
};

class Session {
 public:
  explicit Session(const std::string& path, int threads = 0) {
    kiln_options o;
    check(kiln_options_init(&o));
    o.threads = threads;
    kiln_session* s = nullptr;
    check(kiln_session_create_from_file(path.c_str(), &o, &s));
    s_.reset(s);
  }

  std::vector<TensorInfo> inputs() const { return infos(true); }
  std::vector<TensorInfo> outputs() const { return infos(false); }

  // Buffers in input/output order; sizes are checked by the library.
  void run(const std::vector<std::vector<char>>& in, std::vector<std::vector<char>>& out) const {
    std::vector<const void*> ip;
    std::vector<size_t> ib;
    for (const auto& b : in) {
      ip.push_back(b.data());
      ib.push_back(b.size());
    }
    std::vector<void*> op;
    std::vector<size_t> ob;
    for (auto& b : out) {
      op.push_back(b.data());
      ob.push_back(b.size());
    }
    check(kiln_session_run(s_.get(), ip.data(), ib.data(), ip.size(), op.data(), ob.data(),
                           op.size()));
  }

 private:
  std::vector<TensorInfo> infos(bool input) const {
    size_t n = 0;
    check(input ? kiln_session_input_count(s_.get(), &n) : kiln_session_output_count(s_.get(), &n));
    std::vector<TensorInfo> out;
    for (size_t i = 0; i < n; ++i) {
      const char* name = nullptr;
      const int64_t* dims = nullptr;
      size_t rank = 0;
      TensorInfo t;
      check(input ? kiln_session_input_name(s_.get(), i, &name)
                  : kiln_session_output_name(s_.get(), i, &name));
      check(input ? kiln_session_input_dtype(s_.get(), i, &t.dtype)
                  : kiln_session_output_dtype(s_.get(), i, &t.dtype));
      check(input ? kiln_session_input_shape(s_.get(), i, &dims, &rank)
                  : kiln_session_output_shape(s_.get(), i, &dims, &rank));
      check(input ? kiln_session_input_byte_size(s_.get(), i, &t.bytes)
                  : kiln_session_output_byte_size(s_.get(), i, &t.bytes));
      t.name = name;
      t.shape.assign(dims, dims + rank);
      out.push_back(std::move(t));
    }
    return out;
  }

  std::unique_ptr<kiln_session, decltype(&kiln_session_release)> s_{nullptr, kiln_session_release};
};

}  // namespace kiln_cpp

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: %s MODEL.onnx [THREADS]\n", argv[0]);
    return 2;
  }
  try {
    std::printf("kiln %s\n", kiln_version());
    kiln_cpp::Session session(argv[1], argc == 3 ? std::stoi(argv[2]) : 0);

    uint32_t rng = 12345u;  // same generator as classify.c
    auto next_value = [&rng] {
      rng = rng * 1664525u + 1013904223u;
      return float(rng >> 8) / 8388608.0f - 1.0f;
    };
    std::vector<std::vector<char>> in;
    for (const auto& info : session.inputs()) {
      std::printf("input %zu '%s': [", in.size(), info.name.c_str());
      for (size_t k = 0; k < info.shape.size(); ++k)
        std::printf(k ? ",%lld" : "%lld", static_cast<long long>(info.shape[k]));
      std::printf("]\n");
      std::vector<char> buf(info.bytes);
      if (info.dtype == KILN_DTYPE_F32) {
        float* f = reinterpret_cast<float*>(buf.data());
        for (size_t k = 0; k < info.bytes / sizeof(float); ++k) f[k] = next_value();
      }
      in.push_back(std::move(buf));
    }
    auto outs = session.outputs();
    std::vector<std::vector<char>> out;
    for (const auto& info : outs) out.emplace_back(info.bytes);
    session.run(in, out);

    if (outs[0].dtype != KILN_DTYPE_F32) throw std::runtime_error("output 0 is not float32");
    const float* scores = reinterpret_cast<const float*>(out[0].data());
    size_t n = out[0].size() / sizeof(float), n_top = std::min<size_t>(5, n);
    std::vector<size_t> idx(n);
    std::iota(idx.begin(), idx.end(), size_t(0));
    // Ties keep the lower index, like classify.c.
    std::partial_sort(idx.begin(), idx.begin() + long(n_top), idx.end(), [&](size_t a, size_t b) {
      return scores[a] > scores[b] || (scores[a] == scores[b] && a < b);
    });
    std::printf("top-%zu of output '%s' (%zu values):\n", n_top, outs[0].name.c_str(), n);
    for (size_t t = 0; t < n_top; ++t)
      std::printf("  #%zu  class %zu  score %.6f\n", t + 1, idx[t], scores[idx[t]]);
    return 0;
  } catch (const kiln_cpp::Error& e) {
    std::fprintf(stderr, "kiln error (%s): %s\n", kiln_code_name(e.code()), e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
  }
  return 1;
}
