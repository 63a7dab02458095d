// Shared by the glue-op session tests: run a model on the reference path and on every ISA path
// (2 threads, no tuning cache) and compare the outputs.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "isa_coverage.h"
#include "runtime/session.h"
#include "test_rng.h"

namespace kiln::test {

// Every output of `bytes` run on input x (f32 outputs); the session is kept in *keep if given.
inline std::vector<Tensor> run_session(const std::string& bytes, const SessionOptions& o,
                                       const Tensor& x, std::unique_ptr<Session>* keep = nullptr) {
  auto s = Session::load_memory(bytes.data(), bytes.size(), o);
  std::vector<Tensor> out;
  for (const auto& info : s->outputs()) out.emplace_back(DType::f32, info.shape);
  s->run({x}, out);
  if (keep) *keep = std::move(s);
  return out;
}

// Runs `bytes` (one input of shape xs, random in [-2, 2]) on the reference path and on every ISA
// path; check(session) inspects the JIT session; outputs must match within `tol` of each
// output's largest magnitude.
template <class F>
void compare_with_reference(const std::string& bytes, const Shape& xs, double tol, F check) {
  Tensor x(DType::f32, xs);
  const std::vector<float> xv = randoms(size_t(x.numel()), 10, -2.f, 2.f);
  std::copy(xv.begin(), xv.end(), x.data<float>());
  SessionOptions ro;
  ro.reference = true;
  ro.use_cache = false;
  const std::vector<Tensor> want = run_session(bytes, ro, x);
  for (Isa isa : testing::jit_isas()) {
    CAPTURE(std::string(isa_name(isa)));
    SessionOptions o;
    o.use_cache = false;
    o.max_isa = isa;
    o.threads = 2;
    std::unique_ptr<Session> s;
    const std::vector<Tensor> got = run_session(bytes, o, x, &s);
    check(*s);
    REQUIRE(got.size() == want.size());
    for (size_t k = 0; k < got.size(); ++k) {
      CAPTURE(k);
      REQUIRE(got[k].shape() == want[k].shape());
      double maxref = 0, maxdiff = 0;
      for (int64_t i = 0; i < want[k].numel(); ++i) {
        const double w = want[k].data<float>()[i];
        maxref = std::max(maxref, std::fabs(w));
        maxdiff = std::max(maxdiff, std::fabs(double(got[k].data<float>()[i]) - w));
      }
      CHECK(maxdiff <= tol * maxref);
    }
  }
}

}  // namespace kiln::test
