// The time loop of an LSTM / GRU / RNN (the internal Recurrence op, graph/recurrent.h; glue.h).
// The input projection XW was computed for every step at once before it (a MatMul). Per step,
// a block of up to kRows batch rows multiplies its states by R^T (packed at construction: gate
// by gate, each padded to whole register blocks) into the gates, with the bias Rb as the
// accumulators' start: one pass over R^T per step for the block, the products in registers
// (AVX-512 / AVX2 FMA, below). The activations run on the glue eltwise kernels (any ONNX
// activation the cell names, the clip first when set); the gate arithmetic is plain loops.
// Tiles: directions x blocks of batch rows (independent recurrences).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "jit/glue/glue.h"

namespace kiln {
namespace {

constexpr int kRows = 4;  // batch rows sharing each load of R^T

// y[r][0, cols) = init[0, cols) (zeros without) + sum_{k < K} x[r][k] b[k][0, cols) for
// r < R; cols a multiple of 2 vectors, b packed in panels of 2 vectors' columns by K rows, one
// after the other (each panel one sequential stream: a per-step pass over R^T reads megabytes).
template <int R>
__attribute__((target("avx512f"))) void gemm_avx512(const float* x, int64_t ldx, int64_t K,
                                                    const float* b, int64_t cols, const float* init,
                                                    float* y, int64_t ldy) {
  for (int64_t j = 0; j < cols; j += 32) {
    __m512 acc[R][2];
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < 2; ++v)
        acc[r][v] = init ? _mm512_loadu_ps(init + j + 16 * v) : _mm512_setzero_ps();
    const float* bj = b + j * K;
    for (int64_t k = 0; k < K; ++k, bj += 32) {
      const __m512 b0 = _mm512_loadu_ps(bj), b1 = _mm512_loadu_ps(bj + 16);
      for (int r = 0; r < R; ++r) {
        const __m512 xr = _mm512_set1_ps(x[r * ldx + k]);
        acc[r][0] = _mm512_fmadd_ps(xr, b0, acc[r][0]);
        acc[r][1] = _mm512_fmadd_ps(xr, b1, acc[r][1]);
      }
    }
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < 2; ++v) _mm512_storeu_ps(y + r * ldy + j + 16 * v, acc[r][v]);
  }
}

template <int R>
__attribute__((target("avx2,fma"))) void gemm_avx2(const float* x, int64_t ldx, int64_t K,
                                                   const float* b, int64_t cols, const float* init,
                                                   float* y, int64_t ldy) {
  for (int64_t j = 0; j < cols; j += 16) {
    __m256 acc[R][2];
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < 2; ++v)
        acc[r][v] = init ? _mm256_loadu_ps(init + j + 8 * v) : _mm256_setzero_ps();
    const float* bj = b + j * K;
    for (int64_t k = 0; k < K; ++k, bj += 16) {
      const __m256 b0 = _mm256_loadu_ps(bj), b1 = _mm256_loadu_ps(bj + 8);
      for (int r = 0; r < R; ++r) {
        const __m256 xr = _mm256_set1_ps(x[r * ldx + k]);
        acc[r][0] = _mm256_fmadd_ps(xr, b0, acc[r][0]);
        acc[r][1] = _mm256_fmadd_ps(xr, b1, acc[r][1]);
      }
    }
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < 2; ++v) _mm256_storeu_ps(y + r * ldy + j + 8 * v, acc[r][v]);
  }
}

using GemmFn = void (*)(const float*, int64_t, int64_t, const float*, int64_t, const float*, float*,
                        int64_t);

GemmFn gemm_for(Isa isa, int rows) {
  static constexpr GemmFn k512[] = {gemm_avx512<1>, gemm_avx512<2>, gemm_avx512<3>, gemm_avx512<4>};
  static constexpr GemmFn k256[] = {gemm_avx2<1>, gemm_avx2<2>, gemm_avx2<3>, gemm_avx2<4>};
  static_assert(kRows == 4);
  return (isa == Isa::avx512 ? k512 : k256)[rows - 1];
}

class RecurrenceKernel final : public Kernel {
 public:
  RecurrenceKernel(const RecurrenceProblem& p, Isa isa, std::string name,
                   std::vector<std::vector<std::unique_ptr<Kernel>>> acts)
      : p_(p), isa_(isa), name_(std::move(name)), acts_(std::move(acts)) {
    const int64_t H = s_.hidden, G = s_.gates, D = s_.directions;
    const int64_t block = 2 * simd_width(isa);
    hp_ = (H + block - 1) / block * block;
    blocks_ = (p.batch + kRows - 1) / kRows;
    // R^T [D, H, G * H] -> per direction, columns c = g * hp + j (gate g, unit j; zeros past
    // H) in panels of `block` columns by H rows: element (k, c) at c / block * H * block +
    // k * block + c % block. Rb [D, G * H] -> [D, G * hp], zero padded.
    rt_.assign(size_t(D * H * G * hp_), 0.f);
    rb_.assign(size_t(D * G * hp_), 0.f);
    const float* rt = p.rt->data<float>();
    for (int64_t d = 0; d < D; ++d)
      for (int64_t g = 0; g < G; ++g) {
        for (int64_t k = 0; k < H; ++k)
          for (int64_t j = 0; j < H; ++j) {
            const int64_t col = g * hp_ + j;
            rt_[size_t(d * H * G * hp_ + col / block * H * block + k * block + col % block)] =
                rt[(d * H + k) * G * H + g * H + j];
          }
        if (p.rb)
          std::copy_n(p.rb->data<float>() + (d * G + g) * H, H, rb_.begin() + (d * G + g) * hp_);
      }
    if (p.p) peep_.assign(p.p->data<float>(), p.p->data<float>() + p.p->numel());
    p_.rt = p_.rb = p_.p = nullptr;  // (packed above; the caller's tensors may go)
  }

  const std::string& name() const override { return name_; }
  int64_t tiles() const override { return s_.directions * blocks_; }
  // Per tile: h, c, the gates (G * hp) and one more state-sized row, for each of kRows rows.
  int64_t scratch_bytes() const override {
    return int64_t(sizeof(float)) * kRows * (s_.gates + 3) * hp_;
  }
  double macs() const override {
    return double(p_.steps) * double(p_.batch) * s_.directions * s_.gates * double(s_.hidden) *
           double(s_.hidden);
  }
  std::vector<Span> weights() const override { return {{rt_.data(), rt_.size() * sizeof(float)}}; }

  void run(const KernelArgs& a, int64_t begin, int64_t end) const override {
    float* scratch = scratch_floats(a);
    for (int64_t t = begin; t < end; ++t) {
      const int64_t n0 = t % blocks_ * kRows;
      run_block(a, t / blocks_, n0, int(std::min<int64_t>(kRows, p_.batch - n0)), scratch);
    }
  }

 private:
  // dst = act(src) over H floats (in place when they are the same row).
  void activate(int d, int k, const float* src, float* dst) const {
    const float* s[1] = {src};
    float* o[1] = {dst};
    KernelArgs a;
    a.src = s;
    a.dst = o;
    const Kernel& e = *acts_[size_t(d)][size_t(k)];
    e.run(a, 0, e.tiles());
  }

  void run_block(const KernelArgs& a, int64_t d, int64_t n0, int rows, float* scratch) const {
    const int64_t T = p_.steps, N = p_.batch, D = s_.directions, H = s_.hidden, G = s_.gates;
    const int64_t GH = G * H, ld = G * hp_;  // (a row of gates in scratch)
    float* h = scratch;
    float* c = h + kRows * hp_;
    float* gates = c + kRows * hp_;
    float* tmp = gates + kRows * ld;
    const float* xw = a.src[0];
    const auto* lens = p_.lens ? reinterpret_cast<const int64_t*>(a.src[3]) : nullptr;
    float* y = a.dst[0];
    const bool back = s_.reverse || d == 1;
    const float* rt = rt_.data() + d * H * ld;
    const float* rb = rb_.data() + d * ld;  // (zeros without a bias)
    const float* pp = peep_.empty() ? nullptr : peep_.data() + d * 3 * H;
    const GemmFn gemm = gemm_for(isa_, rows);

    int64_t len[kRows], longest = 0;
    for (int r = 0; r < rows; ++r) {
      const int64_t n = n0 + r;
      len[r] = lens ? lens[n] : T;
      if (len[r] < 0 || len[r] > T)
        fail(Code::invalid_argument, name_ + ": sequence_lens[" + std::to_string(n) +
                                         "] = " + std::to_string(len[r]) + " is outside [0, " +
                                         std::to_string(T) + "]");
      longest = std::max(longest, len[r]);
      for (int64_t j = 0; j < H; ++j) {
        h[r * hp_ + j] = p_.h0 ? a.src[4][(d * N + n) * H + j] : 0.f;
        c[r * hp_ + j] = p_.c0 ? a.src[5][(d * N + n) * H + j] : 0.f;
      }
      if (y)  // (steps past the row's length: zeros)
        for (int64_t t = len[r]; t < T; ++t) std::fill_n(y + ((t * D + d) * N + n) * H, H, 0.f);
    }
    for (int64_t step = 0; step < longest; ++step) {
      const float* x[kRows];  // each row's step of XW (a row past its length: none)
      int64_t at[kRows];
      for (int r = 0; r < rows; ++r) {
        at[r] = back ? len[r] - 1 - step : step;
        x[r] = step < len[r] ? xw + ((at[r] * N + n0 + r) * D + d) * GH : nullptr;
      }
      // The gates' recurrent part, h R^T + Rb (GRU without linear_before_reset: z and r only).
      const int64_t first = s_.gru && !s_.linear_before_reset ? 2 * hp_ : ld;
      gemm(h, hp_, H, rt, first, rb, gates, ld);
      if (s_.lstm)
        lstm_rows(d, rows, x, h, c, gates, tmp, pp);
      else if (s_.gru)
        gru_rows(d, rows, x, h, gates, tmp, rt, rb, gemm);
      else
        for (int r = 0; r < rows; ++r) {
          if (!x[r]) continue;
          float* g = gates + r * ld;
          for (int64_t j = 0; j < H; ++j) g[j] += x[r][j];
          activate(int(d), 0, g, h + r * hp_);
        }
      if (y)
        for (int r = 0; r < rows; ++r)
          if (x[r]) std::copy_n(h + r * hp_, H, y + ((at[r] * D + d) * N + n0 + r) * H);
    }
    for (int r = 0; r < rows; ++r) {
      const int64_t o = (d * N + n0 + r) * H;
      if (p_.y_h && a.dst[1]) std::copy_n(h + r * hp_, H, a.dst[1] + o);
      if (p_.y_c && a.dst[2]) std::copy_n(c + r * hp_, H, a.dst[2] + o);
    }
  }

  // LSTM: gates i, o, f, c (each hp apart); peepholes P i, o, f.
  void lstm_rows(int64_t d, int rows, const float* const* x, float* h, float* c, float* gates,
                 float* tmp, const float* pp) const {
    const int64_t H = s_.hidden, ld = 4 * hp_;
    for (int r = 0; r < rows; ++r) {
      if (!x[r]) continue;
      const float* xr = x[r];
      float *gi = gates + r * ld, *go = gi + hp_, *gf = go + hp_, *gc = gf + hp_;
      float *cr = c + r * hp_, *hr = h + r * hp_, *hc = tmp + r * hp_;
      for (int64_t j = 0; j < H; ++j) {
        gi[j] += xr[j];
        go[j] += xr[H + j];
        gf[j] += xr[2 * H + j];
        gc[j] += xr[3 * H + j];
      }
      if (pp)
        for (int64_t j = 0; j < H; ++j) {
          gi[j] += pp[j] * cr[j];
          gf[j] += pp[2 * H + j] * cr[j];
        }
      activate(int(d), 0, gi, gi);
      activate(int(d), 0, gf, gf);
      activate(int(d), 1, gc, gc);
      for (int64_t j = 0; j < H; ++j) cr[j] = gf[j] * cr[j] + gi[j] * gc[j];
      if (pp)
        for (int64_t j = 0; j < H; ++j) go[j] += pp[H + j] * cr[j];
      activate(int(d), 0, go, go);
      activate(int(d), 2, cr, hc);
      for (int64_t j = 0; j < H; ++j) hr[j] = go[j] * hc[j];
    }
  }

  // GRU: gates z, r, h (each hp apart).
  void gru_rows(int64_t d, int rows, const float* const* x, float* h, float* gates, float* tmp,
                const float* rt, const float* rb, GemmFn gemm) const {
    const int64_t H = s_.hidden, ld = 3 * hp_;
    for (int r = 0; r < rows; ++r) {
      if (!x[r]) continue;
      float *gz = gates + r * ld, *gr = gz + hp_;
      for (int64_t j = 0; j < H; ++j) {
        gz[j] += x[r][j];
        gr[j] += x[r][H + j];
      }
      activate(int(d), 0, gz, gz);
      activate(int(d), 0, gr, gr);
    }
    if (!s_.linear_before_reset) {  // (r . h) R_h^T + Rb_h, every row of the block at once
      for (int r = 0; r < rows; ++r)
        for (int64_t j = 0; j < hp_; ++j)
          tmp[r * hp_ + j] = j < H ? gates[r * ld + hp_ + j] * h[r * hp_ + j] : 0.f;
      gemm(tmp, hp_, H, rt + 2 * hp_ * H, hp_, rb + 2 * hp_, gates + 2 * hp_, ld);  // (its panels)
    }
    for (int r = 0; r < rows; ++r) {
      if (!x[r]) continue;
      float *gz = gates + r * ld, *gr = gz + hp_, *gh = gr + hp_, *hr = h + r * hp_;
      if (s_.linear_before_reset)
        for (int64_t j = 0; j < H; ++j) gh[j] = x[r][2 * H + j] + gr[j] * gh[j];
      else
        for (int64_t j = 0; j < H; ++j) gh[j] += x[r][2 * H + j];
      activate(int(d), 1, gh, gh);
      for (int64_t j = 0; j < H; ++j) hr[j] = (1.f - gz[j]) * gh[j] + gz[j] * hr[j];
    }
  }

  RecurrenceProblem p_;
  const RecurrenceSpec& s_ = p_.spec;
  Isa isa_;
  std::string name_;
  std::vector<std::vector<std::unique_ptr<Kernel>>> acts_;  // [direction][f, g, h]
  int64_t hp_ = 0, blocks_ = 1;
  std::vector<float> rt_, rb_, peep_;
};

}  // namespace

std::unique_ptr<Kernel> create_recurrence_kernel(const RecurrenceProblem& p, Isa isa,
                                                 std::string* why_not) {
  if (isa != Isa::avx2 && isa != Isa::avx512) return decline(why_not, "needs avx2 or avx512");
  const RecurrenceSpec& s = p.spec;
  if (!p.rt || p.steps < 1 || p.batch < 1)
    return decline(why_not, "R is not constant, or no steps");
  std::vector<std::vector<std::unique_ptr<Kernel>>> acts(size_t(s.directions));
  for (int d = 0; d < s.directions; ++d)
    for (const std::vector<PostOp>& chain : s.acts[size_t(d)]) {
      auto k = create_eltwise_kernel(s.hidden, chain, isa, why_not);
      if (!k) return nullptr;
      acts[size_t(d)].push_back(std::move(k));
    }
  const std::string cell = s.lstm ? "lstm" : s.gru ? "gru" : "rnn";
  const std::string name = "recurrence_" + cell + "_d" + std::to_string(s.directions) + "_h" +
                           std::to_string(s.hidden) + "__" + isa_name(isa);
  return std::make_unique<RecurrenceKernel>(p, isa, name, std::move(acts));
}

}  // namespace kiln
