#include "runtime/tail_kernels.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <cstring>
#include <optional>

#include "jit/gemm/fc_kernel.h"
#include "runtime/arenas.h"
#include "runtime/ref/ref_kernels.h"

namespace kiln {
namespace {

// Rows an FC kernel is made for: small counts exactly, others rounded up to 32 (the rows past
// M are zeros, their outputs dropped), so that a varying number of proposals reuses a few.
int64_t row_bucket(int64_t m) {
  return m <= 8 ? m : (m + 31) / 32 * 32;
}

}  // namespace

TailKernels::TailKernels(Isa isa, int threads, std::set<std::string> fc_nodes)
    : isa_(isa), threads_(threads), fc_nodes_(std::move(fc_nodes)) {}

std::shared_ptr<const Kernel> TailKernels::fc_kernel(const Node& n,
                                                     const std::vector<const Tensor*>& in,
                                                     int64_t rows) const {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = kernels_[{n.name, rows}];
  e.used = ++clock_;
  if (e.tried) return e.kernel;  // made (or found not to apply) before
  e.tried = true;
  const Tensor& a = *in[0];
  const Tensor& w = *in[1];
  const bool gemm = n.op == "Gemm";
  const bool tb = gemm && n.attr_i("transB", 0) != 0;
  FcProblem p;
  p.m = rows;
  p.k = a.shape()[1];
  p.n = w.shape()[tb ? 0 : 1];
  std::optional<Tensor> bias;
  if (gemm && in.size() > 2 && in[2]) {  // C of [N] or [1, N], times beta
    const Tensor& c = *in[2];
    if (c.numel() != p.n || c.shape().empty() || c.shape().back() != p.n) return nullptr;
    bias.emplace(DType::f32, Shape{p.n});
    const float beta = n.attr_f("beta", 1.f);
    for (int64_t j = 0; j < p.n; ++j) bias->data<float>()[j] = c.data<float>()[j] * beta;
    p.bias = true;
  }
  std::string why_not;
  const float alpha = gemm ? n.attr_f("alpha", 1.f) : 1.f;
  std::unique_ptr<Kernel> k =
      create_fc_kernel(p, isa_, w, tb, alpha, bias ? &*bias : nullptr, &why_not);
  e.kernel = std::move(k);
  std::shared_ptr<const Kernel> made = e.kernel;
  if (kernels_.size() > kMaxKernels) {  // drop the least recently used (never this one)
    auto oldest = kernels_.begin();
    for (auto it = kernels_.begin(); it != kernels_.end(); ++it)
      if (it->second.used < oldest->second.used) oldest = it;
    kernels_.erase(oldest);
  }
  return made;
}

bool TailKernels::run_fc(const Node& n, const std::vector<const Tensor*>& in, Tensor& y) const {
  if (!fc_nodes_.count(n.name) || isa_ == Isa::scalar || in.size() < 2 || !in[0] || !in[1])
    return false;
  const Tensor& a = *in[0];
  const Tensor& w = *in[1];
  if (a.dtype() != DType::f32 || w.dtype() != DType::f32 || a.shape().size() != 2 ||
      w.shape().size() != 2 || y.shape().size() != 2 || a.shape()[0] == 0)
    return false;
  if (n.op == "Gemm" && n.attr_i("transA", 0) != 0) return false;
  const int64_t m = a.shape()[0], rows = row_bucket(m);
  const std::shared_ptr<const Kernel> k = fc_kernel(n, in, rows);
  if (!k) return false;
  const int64_t kk = a.shape()[1], nn = y.shape()[1];
  // Rows past M: a zero-padded copy of A, and an output buffer of the bucket's rows.
  Tensor xa = rows == m ? a : Tensor(DType::f32, {rows, kk});
  Tensor ya = rows == m ? y : Tensor(DType::f32, {rows, nn});
  if (rows != m) std::memcpy(xa.raw(), a.raw(), a.nbytes());
  const float* src[] = {xa.data<float>()};
  float* dst[] = {ya.data<float>()};
  KernelArgs args;
  args.src = src;
  args.dst = dst;
  const int64_t tiles = k->tiles();
  auto piece = [&](int64_t b, int64_t e) {
    ScratchBuffer scratch(k->scratch_bytes());
    k->run(scratch.with(args), b, e);
  };
  if (threads_ > 1 && tiles > 1)
    shared_arena(threads_).execute([&] {
      tbb::parallel_for(tbb::blocked_range<int64_t>(0, tiles),
                        [&](const tbb::blocked_range<int64_t>& r) { piece(r.begin(), r.end()); });
    });
  else
    piece(0, tiles);
  if (rows != m) std::memcpy(y.raw(), ya.raw(), y.nbytes());
  return true;
}

void TailKernels::operator()(const Node& n, const std::vector<const Tensor*>& in,
                             const std::vector<Tensor*>& out) const {
  if ((n.op == "Gemm" || n.op == "MatMul") && out.size() == 1 && out[0] && run_fc(n, in, *out[0]))
    return;
  RefKernel k = find_ref_kernel(n.op);
  if (!k) n.fail(Code::unsupported, "no kernel implements operator " + n.op);
  k(n, in, out);
}

}  // namespace kiln
