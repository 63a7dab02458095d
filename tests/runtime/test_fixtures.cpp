// End to end: every fixture model under tests/fixtures/models/<name>/ (exported by
// tests/fixtures/gen_fixtures.py, references from PyTorch or NumPy) loads through
// kiln::Session and matches its reference outputs within the fixture's tolerance, relative to
// the largest reference magnitude.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include "isa_coverage.h"
#include "runtime/npy.h"
#include "runtime/session.h"

namespace fs = std::filesystem;
using kiln::Tensor;

namespace {

struct Fixture {
  std::string name;
  fs::path dir;
  double tol = 1e-4;
};

std::vector<Fixture> fixtures(const fs::path& root) {
  std::vector<Fixture> out;
  if (!fs::exists(root)) return out;
  for (const auto& e : fs::directory_iterator(root)) {
    if (!fs::exists(e.path() / "model.onnx")) continue;
    Fixture f{e.path().filename().string(), e.path()};
    std::ifstream info(e.path() / "info.txt");
    std::string key;
    while (info >> key)
      if (key == "tol") info >> f.tol;
    out.push_back(f);
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.name < b.name; });
  return out;
}

std::vector<Tensor> load_npys(const fs::path& dir, const std::string& prefix) {
  std::vector<Tensor> v;
  for (int i = 0; fs::exists(dir / (prefix + std::to_string(i) + ".npy")); ++i)
    v.push_back(kiln::read_npy((dir / (prefix + std::to_string(i) + ".npy")).string()));
  return v;
}

// max |a - b| / max |b| (absolute when the reference is all zeros).
double fixture_rel_error(const Tensor& got, const Tensor& ref) {
  double maxref = 0, maxdiff = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    double r =
        ref.dtype() == kiln::DType::f32 ? ref.data<float>()[i] : double(ref.data<int64_t>()[i]);
    double g =
        got.dtype() == kiln::DType::f32 ? got.data<float>()[i] : double(got.data<int64_t>()[i]);
    if (std::isnan(g) != std::isnan(r)) return INFINITY;
    maxref = std::max(maxref, std::fabs(r));
    maxdiff = std::max(maxdiff, std::fabs(g - r));
  }
  return maxref > 0 ? maxdiff / maxref : maxdiff;
}

std::vector<Tensor> run_all(const kiln::Session& s, const std::vector<Tensor>& in) {
  std::vector<Tensor> out;
  for (const auto& o : s.outputs()) out.emplace_back(o.dtype, o.shape);
  s.run(in, out);
  return out;
}

}  // namespace

// Every fixture on each execution path: JIT at the best ISA, JIT capped to AVX2, and the
// scalar reference kernels.
std::vector<std::pair<std::string, kiln::SessionOptions>> paths() {
  std::vector<std::pair<std::string, kiln::SessionOptions>> v;
  kiln::SessionOptions o;
  o.threads = 2;
  if (kiln::testing::has_isa(kiln::Isa::avx512)) v.push_back({"avx512", o});
  o.max_isa = kiln::Isa::avx2;
  if (kiln::testing::has_isa(kiln::Isa::avx2)) v.push_back({"avx2", o});
  o.max_isa.reset();
  o.reference = true;
  v.push_back({"reference", o});
  return v;
}

TEST_CASE("fixture models match their PyTorch/NumPy references on every path") {
  auto all = fixtures(fs::path(KILN_FIXTURE_DIR) / "models");
  REQUIRE(all.size() >= 20);
  // Not a structured binding: clang 14 (the sanitizer builds) cannot capture one in CAPTURE.
  for (const auto& path_opts : paths())
    for (const auto& f : all) {
      const std::string& path = path_opts.first;
      const kiln::SessionOptions& opts = path_opts.second;
      CAPTURE(path);
      CAPTURE(f.name);
      auto s = kiln::Session::load_file((f.dir / "model.onnx").string(), opts);
      auto in = load_npys(f.dir, "input_");
      auto ref = load_npys(f.dir, "output_");
      REQUIRE(in.size() == s->inputs().size());
      REQUIRE(ref.size() == s->outputs().size());
      auto out = run_all(*s, in);
      for (size_t i = 0; i < ref.size(); ++i) {
        CAPTURE(i);
        REQUIRE(out[i].shape() == ref[i].shape());
        double err = fixture_rel_error(out[i], ref[i]);
        CHECK(err <= f.tol);
      }
    }
}

TEST_CASE("the bundled demo model matches PyTorch, also from concurrent runs") {
  fs::path dir = fs::path(KILN_FIXTURE_DIR) / ".." / ".." / "examples" / "models";
  for (const auto& path_opts : paths()) {
    const std::string& path = path_opts.first;
    const kiln::SessionOptions& opts = path_opts.second;
    CAPTURE(path);
    auto s = kiln::Session::load_file((dir / "squeezenet1_1.onnx").string(), opts);
    Tensor in = kiln::read_npy((dir / "squeezenet1_1.input.npy").string());
    Tensor ref = kiln::read_npy((dir / "squeezenet1_1.ref.npy").string());
    auto out = run_all(*s, {in});
    CHECK(fixture_rel_error(out[0], ref) <= 1e-4);
    // Concurrent runs on one session give bitwise-identical outputs.
    std::vector<std::vector<Tensor>> outs(3);
    std::vector<std::thread> th;
    for (auto& o : outs) th.emplace_back([&] { o = run_all(*s, {in}); });
    for (auto& t : th) t.join();
    for (auto& o : outs)
      CHECK(
          std::equal(o[0].data<float>(), o[0].data<float>() + o[0].numel(), out[0].data<float>()));
  }
}

TEST_CASE("run rejects inputs of the wrong shape or dtype, naming the input") {
  auto all = fixtures(fs::path(KILN_FIXTURE_DIR) / "models");
  REQUIRE(!all.empty());
  auto s = kiln::Session::load_file((all[0].dir / "model.onnx").string(), {});
  std::vector<Tensor> in;
  for (const auto& i : s->inputs()) {
    kiln::Shape sh = i.shape;
    sh.push_back(2);
    in.emplace_back(i.dtype, sh);
  }
  std::vector<Tensor> out;
  for (const auto& o : s->outputs()) out.emplace_back(o.dtype, o.shape);
  try {
    s->run(in, out);
    FAIL("expected shape_mismatch");
  } catch (const kiln::Error& e) {
    CHECK(e.code() == kiln::Code::shape_mismatch);
    CHECK(std::string(e.what()).find(s->inputs()[0].name) != std::string::npos);
  }
}

TEST_CASE("bad models give clear errors, never a crash") {
  fs::path bad = fs::path(KILN_FIXTURE_DIR) / "bad";
  REQUIRE(fs::exists(bad));
  int n = 0;
  for (const auto& e : fs::directory_iterator(bad)) {
    if (e.path().extension() != ".onnx") continue;
    CAPTURE(e.path().filename().string());
    ++n;
    try {
      kiln::Session::load_file(e.path().string(), {});
      FAIL("a bad model loaded");
    } catch (const kiln::Error& err) {
      CHECK(err.code() != kiln::Code::internal);
      CHECK(std::string(err.what()).size() > 10);
    }
  }
  CHECK(n >= 8);
}
