#include "runtime/executor.h"

#include <tbb/parallel_for.h>

#include <chrono>
#include <cstdlib>
#include <cstring>

namespace kiln {

Executor::Executor(const Graph& g, const Plan& p, int threads) : g_(g), p_(p), threads_(threads) {
  if (threads_ > 1) arena_ = std::make_unique<tbb::task_arena>(threads_);
}

Executor::~Executor() = default;

std::unique_ptr<Executor::Context> Executor::acquire() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_.empty()) {
      auto c = std::move(free_.back());
      free_.pop_back();
      return c;
    }
  }
  auto c = std::make_unique<Context>();
  size_t bytes = size_t(std::max<int64_t>(p_.arena_bytes, 64));
  void* mem = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (!mem) fail(Code::out_of_memory, "cannot allocate the " + std::to_string(bytes) + "-byte run arena");
  c->arena = std::shared_ptr<void>(mem, [](void* q) { std::free(q); });
  return c;
}

void Executor::release(std::unique_ptr<Context> c) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(std::move(c));
}

void Executor::run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
                   std::vector<double>* step_ms) {
  if (step_ms) step_ms->assign(p_.steps.size(), 0.0);
  auto ctx = acquire();
  struct Guard {
    Executor* e;
    std::unique_ptr<Context>& c;
    ~Guard() { e->release(std::move(c)); }
  } guard{this, ctx};

  char* base = static_cast<char*>(ctx->arena.get());
  std::vector<float*> ptr(p_.tensors.size(), nullptr);
  for (size_t t = 0; t < p_.tensors.size(); ++t) {
    const PlanTensor& pt = p_.tensors[t];
    if (pt.offset >= 0) ptr[t] = reinterpret_cast<float*>(base + pt.offset);
    else if (g_.value(pt.value).is_const())
      ptr[t] = static_cast<float*>(const_cast<void*>(g_.value(pt.value).constant->raw()));
  }
  for (size_t i = 0; i < inputs.size(); ++i)
    ptr[size_t(p_.inputs[i])] = static_cast<float*>(const_cast<void*>(inputs[i].raw()));
  // Outputs computed by a step are written straight into the caller's buffers; outputs that
  // are constants, graph inputs or listed twice are copied at the end.
  std::vector<size_t> copies;
  for (size_t i = 0; i < outputs.size(); ++i) {
    float*& slot = ptr[size_t(p_.outputs[i])];
    if (slot == nullptr) slot = static_cast<float*>(outputs[i].raw());
    else copies.push_back(i);
  }

  std::vector<const float*> src;
  std::vector<float*> dst;
  auto body = [&] {
    for (size_t si = 0; si < p_.steps.size(); ++si) {
      const Step& s = p_.steps[si];
      const auto t0 = step_ms ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
      src.clear();
      dst.clear();
      for (int t : s.src) src.push_back(t < 0 ? nullptr : ptr[size_t(t)]);
      for (int t : s.dst) dst.push_back(t < 0 ? nullptr : ptr[size_t(t)]);
      KernelArgs args{src.data(), dst.data()};
      const int64_t tiles = s.kernel->tiles();
      if (threads_ <= 1 || tiles <= 1) {
        s.kernel->run(args, 0, tiles);
      } else {
        // Static partitioning: equal contiguous shares, one per thread, no stealing churn.
        tbb::parallel_for(
            tbb::blocked_range<int64_t>(0, tiles),
            [&](const tbb::blocked_range<int64_t>& r) { s.kernel->run(args, r.begin(), r.end()); },
            tbb::static_partitioner());
      }
      if (step_ms)
        (*step_ms)[si] =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
  };
  if (arena_) arena_->execute(body);
  else body();
  for (size_t i : copies) {
    const float* from = ptr[size_t(p_.outputs[i])];
    if (from != outputs[i].raw()) std::memcpy(outputs[i].raw(), from, outputs[i].nbytes());
  }
}

}  // namespace kiln
