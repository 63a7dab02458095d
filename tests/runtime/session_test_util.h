// Helpers of the session tests that load models built in memory and compare outputs
// (test_accuracy.cpp, test_precision.cpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime/session.h"

namespace kiln::sessiontest {

inline std::unique_ptr<Session> load(const std::string& bytes, const SessionOptions& o) {
  return Session::load_memory(bytes.data(), bytes.size(), o);
}

// Output 0 of one run on x.
inline Tensor run(const Session& s, const Tensor& x) {
  std::vector<Tensor> out;
  for (const auto& io : s.outputs()) out.emplace_back(io.dtype, io.shape);
  s.run({x}, out);
  return std::move(out[0]);
}

// max|got - ref| / max|ref| (infinite when got has a non-finite value).
inline double rel_error(const Tensor& got, const Tensor& ref) {
  double maxref = 0, maxdiff = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double r = ref.data<float>()[i], g = got.data<float>()[i];
    if (!std::isfinite(g)) return INFINITY;
    maxref = std::max(maxref, std::fabs(r));
    maxdiff = std::max(maxdiff, std::fabs(g - r));
  }
  return maxref > 0 ? maxdiff / maxref : maxdiff;
}

// An f32 tensor of standard-normal values from std::mt19937(seed).
inline Tensor normal_tensor(Shape s, uint64_t seed) {
  Tensor x(DType::f32, std::move(s));
  std::mt19937 rng{uint32_t(seed)};
  std::normal_distribution<float> d(0.f, 1.f);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = d(rng);
  return x;
}

// An empty folder under the tests' temporary folder.
inline std::filesystem::path fresh_dir(const std::string& name) {
  std::filesystem::path d = std::filesystem::path(KILN_TEST_TMP) / name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

}  // namespace kiln::sessiontest
