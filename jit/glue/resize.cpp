// Resize of a 4-D f32 tensor's H and W by per-axis taps (graph/resize.h): every mode and
// coordinate transform is a table of (input index, weight) pairs built at kernel creation, so
// one generated row function serves nearest, linear, cubic and antialiased filters alike:
//   y[oh, ow] = sum_i wh[oh, i] * sum_j ww[ow, j] * x[ih(oh, i), iw(ow, j)].
// The output is planes of rows (nchw: (n, c) planes; nhwc: images, a row = W*C floats;
// blocked: (n, channel block) planes, a row = W*B floats). The C++ loop hands each output row
// its KH input row pointers and weights; the row function walks the output pixels:
// nhwc / blocked vectorise over the channels of a pixel (column table: byte offsets + weights),
// nchw over output columns with gathers (column table: int32 indices + weights per lane).
// Nearest (one tap per axis, weight 1) copies without arithmetic. Tiles: runs of output rows.
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "jit/glue/asmjit_util.h"
#include "jit/glue/glue.h"

namespace kiln {
namespace {

using glue::AsmBuilder;
using glue::Mask;
namespace aj = asmjit;
namespace x86 = asmjit::x86;

// fn(rows, wh, dst, col_idx, col_w): one output row.
using ResizeRowFn = void (*)(const float* const* rows, const float* wh, float* dst,
                             const void* col_idx, const float* col_w);

struct ResizeGeom {
  int kh = 1, kw = 1;        // taps per axis
  int64_t ow = 1, unit = 1;  // output columns; floats per pixel (nchw 1, nhwc C, blocked B)
  int64_t col_pad = 1;       // nchw: ow rounded up to the vector width (table row length)
  bool copy() const { return kh == 1 && kw == 1; }  // nearest: weights are all 1
};

struct RowArgs {
  x86::Gp rows, wh, dst, idx, w;
};

RowArgs begin_row_function(AsmBuilder& b) {
  b.begin_function(aj::FuncSignatureT<void, const float* const*, const float*, float*, const void*,
                                      const float*>());
  RowArgs a{b.gp(), b.gp(), b.gp(), b.gp(), b.gp()};
  for (uint32_t i = 0; i < 5; ++i)
    b.func()->setArg(i, std::array{a.rows, a.wh, a.dst, a.idx, a.w}[i]);
  return a;
}

// The output row's input row pointers r[i] and (weighted) broadcast weights wh[i].
void load_rows(AsmBuilder& b, const ResizeGeom& g, const RowArgs& a, std::vector<x86::Gp>& r,
               std::vector<x86::Vec>& wh) {
  auto& cc = b.cc();
  for (int i = 0; i < g.kh; ++i) {
    r.push_back(b.gp());
    cc.mov(r.back(), x86::ptr(a.rows, i * 8));
    if (g.copy()) continue;
    wh.push_back(b.vec());
    cc.vbroadcastss(wh.back(), x86::ptr(a.wh, i * 4));
  }
}

// acc = sum_i wh[i] * sum_j ww[j] * tap(i, j), where tap(i, j) loads its vector into t.
void weighted_sum(AsmBuilder& b, const ResizeGeom& g, const x86::Vec& acc,
                  const std::vector<x86::Vec>& wh, const std::vector<x86::Vec>& ww,
                  const std::function<void(int, int, const x86::Vec&)>& tap) {
  auto& cc = b.cc();
  x86::Vec t = b.vec(), v = b.vec();
  for (int i = 0; i < g.kh; ++i) {
    for (int j = 0; j < g.kw; ++j) {
      tap(i, j, v);
      if (j == 0)
        cc.vmulps(t, v, ww[size_t(j)]);
      else
        cc.vfmadd231ps(t, v, ww[size_t(j)]);
    }
    if (i == 0)
      cc.vmulps(acc, t, wh[size_t(i)]);
    else
      cc.vfmadd231ps(acc, t, wh[size_t(i)]);
  }
}

// nhwc / blocked: per output pixel, the column table holds kw byte offsets (int64) and kw
// weights; the pixel's unit floats are done in vectors of the ISA's width.
void build_channels_row(AsmBuilder& b, const ResizeGeom& g) {
  auto& cc = b.cc();
  const int V = b.width();
  const RowArgs a = begin_row_function(b);
  std::vector<x86::Gp> r;
  std::vector<x86::Vec> wh;
  load_rows(b, g, a, r, wh);
  const int64_t full = g.unit / V, tail = g.unit % V;
  const Mask m = b.mask(int(tail ? tail : V));
  x86::Gp n = b.gp(), col = b.gp(), cw = b.gp(), d = b.gp();
  cc.mov(n, g.ow);
  cc.mov(col, a.idx);
  cc.mov(cw, a.w);
  cc.mov(d, a.dst);
  std::vector<x86::Gp> off(size_t(g.kw)), q(size_t(g.kh));
  for (auto& o : off) o = b.gp();
  for (auto& p : q) p = b.gp();
  std::vector<x86::Vec> ww(size_t(g.kw));
  for (auto& w : ww) w = b.vec();
  aj::Label pixel = cc.newLabel();
  cc.bind(pixel);
  for (int j = 0; j < g.kw; ++j) {
    cc.mov(off[size_t(j)], x86::ptr(col, j * 8));
    if (!g.copy()) cc.vbroadcastss(ww[size_t(j)], x86::ptr(cw, j * 4));
  }
  for (int i = 0; i < g.kh; ++i) cc.mov(q[size_t(i)], r[size_t(i)]);
  // One vector of the pixel at byte displacement `disp` from q / d (masked: the tail).
  auto one = [&](int32_t disp, const Mask* mk) {
    x86::Vec acc = b.vec();
    auto at = [&](int i, int j) { return x86::ptr(q[size_t(i)], off[size_t(j)], 0, disp); };
    if (g.copy()) {
      b.load(acc, at(0, 0), mk);
    } else {
      weighted_sum(b, g, acc, wh, ww,
                   [&](int i, int j, const x86::Vec& v) { b.load(v, at(i, j), mk); });
    }
    b.store(x86::ptr(d, disp), acc, mk);
  };
  constexpr int64_t kUnroll = 4;
  if (full > 2 * kUnroll) {  // long pixels (nhwc with many channels): a loop of kUnroll vectors
    x86::Gp k = b.gp(), dd = b.gp();
    cc.mov(k, full / kUnroll);
    cc.mov(dd, d);
    aj::Label top = cc.newLabel();
    cc.bind(top);
    for (int64_t u = 0; u < kUnroll; ++u) one(int32_t(u * V * 4), nullptr);
    for (auto& p : q) cc.add(p, kUnroll * V * 4);
    cc.add(d, kUnroll * V * 4);
    cc.dec(k);
    cc.jnz(top);
    for (int64_t u = 0; u < full % kUnroll; ++u) one(int32_t(u * V * 4), nullptr);
    if (tail) one(int32_t(full % kUnroll * V * 4), &m);
    cc.mov(d, dd);
  } else {
    for (int64_t u = 0; u < full; ++u) one(int32_t(u * V * 4), nullptr);
    if (tail) one(int32_t(full * V * 4), &m);
  }
  cc.add(col, g.kw * 8);
  cc.add(cw, g.kw * 4);
  cc.add(d, g.unit * 4);
  cc.dec(n);
  cc.jnz(pixel);
  b.end_function();
}

// nchw: vectors of output columns; the table holds kw rows of col_pad int32 input columns and
// kw rows of col_pad weights (pad lanes: column 0, weight 0).
void build_columns_row(AsmBuilder& b, const ResizeGeom& g) {
  auto& cc = b.cc();
  const int V = b.width();
  const RowArgs a = begin_row_function(b);
  std::vector<x86::Gp> r;
  std::vector<x86::Vec> wh;
  load_rows(b, g, a, r, wh);
  const int64_t blocks = g.col_pad / V, tail = g.ow % V;
  const Mask m = b.mask(int(tail ? tail : V));
  x86::Gp idx = b.gp(), cw = b.gp(), d = b.gp();
  cc.mov(idx, a.idx);
  cc.mov(cw, a.w);
  cc.mov(d, a.dst);
  const int32_t table_row = int32_t(g.col_pad * 4);
  std::vector<x86::Vec> ww(size_t(g.kw));
  for (auto& w : ww) w = b.vec();
  x86::Vec iv = b.vec(), gm = b.vec();
  x86::KReg km = b.avx512() ? cc.newKw() : x86::KReg();
  // v = x[row i][idx_j] for the block's lanes (every lane: pad lanes read column 0).
  auto gather = [&](int i, const x86::Vec& v) {
    if (b.avx512()) {
      cc.kxnorw(km, km, km);
      cc.k(km).vgatherdps(v, x86::ptr(r[size_t(i)], iv, 2));
    } else {
      cc.vpcmpeqd(gm, gm, gm);
      cc.vgatherdps(v, x86::ptr(r[size_t(i)], iv, 2), gm);
    }
    // Keeps the index live past the gather: a gather whose destination is its index register
    // is #UD, and the register allocator could otherwise give both the same register.
    cc.vmovaps(iv, iv);
  };
  auto block = [&](const Mask* mk) {
    x86::Vec acc = b.vec();
    if (g.copy()) {
      cc.vmovups(iv, x86::ptr(idx));
      gather(0, acc);
    } else {
      for (int j = 0; j < g.kw; ++j) cc.vmovups(ww[size_t(j)], x86::ptr(cw, j * table_row));
      weighted_sum(b, g, acc, wh, ww, [&](int i, int j, const x86::Vec& v) {
        cc.vmovups(iv, x86::ptr(idx, j * table_row));
        gather(i, v);
      });
    }
    b.store(x86::ptr(d), acc, mk);
  };
  const int64_t loop = tail ? blocks - 1 : blocks;
  if (loop > 0) {
    x86::Gp n = b.gp();
    cc.mov(n, loop);
    aj::Label top = cc.newLabel();
    cc.bind(top);
    block(nullptr);
    cc.add(idx, V * 4);
    cc.add(cw, V * 4);
    cc.add(d, V * 4);
    cc.dec(n);
    cc.jnz(top);
  }
  if (tail) block(&m);
  b.end_function();
}

class ResizeKernel : public glue::GlueKernel {
 public:
  ResizeKernel(const ResizeGeom& g, const ResizeTaps& h, std::vector<int64_t> col_off,
               std::vector<int32_t> col_idx, std::vector<float> col_w, int64_t planes, int64_t ih,
               int64_t iw, Layout l, Isa isa, const std::string& name)
      : g_(g),
        h_(h),
        col_off_(std::move(col_off)),
        col_idx_(std::move(col_idx)),
        col_w_(std::move(col_w)) {
    name_ = name;
    AsmBuilder b(name_, isa);
    if (l == Layout::nchw)
      build_columns_row(b, g);
    else
      build_channels_row(b, g);
    code_ = b.finish();
    row_ = b.entry<ResizeRowFn>(code_, 0);
    oh_ = int64_t(h.idx.size()) / h.taps;
    row_in_ = iw * g.unit;
    plane_in_ = ih * row_in_;
    row_out_ = g.ow * g.unit;
    total_rows_ = planes * oh_;
    chunk_ = std::max<int64_t>(1, 4096 / std::max<int64_t>(1, row_out_));
    tiles_ = (total_rows_ + chunk_ - 1) / chunk_;
  }

  void run(const KernelArgs& a, int64_t begin, int64_t end) const override {
    const void* cols = col_off_.empty() ? static_cast<const void*>(col_idx_.data())
                                        : static_cast<const void*>(col_off_.data());
    std::array<const float*, kMaxResizeTaps> rows{};
    const int kh = g_.kh;
    for (int64_t r = begin * chunk_; r < std::min(total_rows_, end * chunk_); ++r) {
      const int64_t p = r / oh_, oh = r % oh_;
      const float* src = a.src[0] + p * plane_in_;
      for (int i = 0; i < kh; ++i) rows[size_t(i)] = src + h_.idx[size_t(oh * kh + i)] * row_in_;
      row_(rows.data(), h_.w.data() + oh * kh, a.dst[0] + r * row_out_, cols, col_w_.data());
    }
  }

 private:
  ResizeGeom g_;
  ResizeTaps h_;
  std::vector<int64_t> col_off_;  // nhwc / blocked: per pixel kw byte offsets
  std::vector<int32_t> col_idx_;  // nchw: kw rows of col_pad input columns
  std::vector<float> col_w_;
  ResizeRowFn row_ = nullptr;
  int64_t oh_ = 1, row_in_ = 0, plane_in_ = 0, row_out_ = 0, total_rows_ = 0, chunk_ = 1;
};

}  // namespace

std::unique_ptr<Kernel> create_resize_kernel(const Shape& x, const ResizeTaps& h,
                                             const ResizeTaps& w, const std::string& mode, Layout l,
                                             Isa isa, std::string* why_not) {
  if (isa != Isa::avx2 && isa != Isa::avx512) return decline(why_not, "needs avx2 or avx512");
  if (x.size() != 4) return decline(why_not, "not a 4-D resize");
  for (int64_t d : x)
    if (d <= 0) return decline(why_not, "empty tensor");
  if (h.taps < 1 || w.taps < 1 || h.taps > kMaxResizeTaps || w.taps > kMaxResizeTaps)
    return decline(why_not, "more than " + std::to_string(kMaxResizeTaps) + " taps per axis");
  for (const ResizeTaps* t : {&h, &w})
    for (uint8_t o : t->outside)
      if (o)
        return decline(why_not, "extrapolated outputs (tf_crop_and_resize) run in the reference");
  const int V = simd_width(isa), B = layout_block(l);
  if (B > 1 && B != V) return decline(why_not, "blocked layout of another ISA");
  const int64_t oh = int64_t(h.idx.size()) / h.taps, ow = int64_t(w.idx.size()) / w.taps;
  for (int64_t i : h.idx)
    if (i < 0 || i >= x[2]) return decline(why_not, "row tap outside the input");
  for (int64_t i : w.idx)
    if (i < 0 || i >= x[3]) return decline(why_not, "column tap outside the input");
  ResizeGeom g;
  g.kh = h.taps;
  g.kw = w.taps;
  g.ow = ow;
  g.unit = l == Layout::nchw ? 1 : l == Layout::nhwc ? x[1] : B;
  const int64_t planes = l == Layout::nchw   ? x[0] * x[1]
                         : l == Layout::nhwc ? x[0]
                                             : x[0] * ((x[1] + B - 1) / B);
  if (planes * oh * ow * g.unit > (int64_t(1) << 34) || x[3] * g.unit > (int64_t(1) << 24) ||
      ow * g.unit > (int64_t(1) << 24))
    return decline(why_not, "tensor too large");
  std::vector<int64_t> off;
  std::vector<int32_t> idx;
  std::vector<float> cw;
  if (l == Layout::nchw) {
    g.col_pad = (ow + V - 1) / V * V;
    idx.assign(size_t(g.kw * g.col_pad), 0);
    cw.assign(idx.size(), 0.f);
    for (int64_t o = 0; o < ow; ++o)
      for (int j = 0; j < g.kw; ++j) {
        idx[size_t(j * g.col_pad + o)] = int32_t(w.idx[size_t(o * g.kw + j)]);
        cw[size_t(j * g.col_pad + o)] = w.w[size_t(o * g.kw + j)];
      }
  } else {
    off.resize(w.idx.size());
    for (size_t i = 0; i < off.size(); ++i) off[i] = w.idx[i] * g.unit * 4;
    cw = w.w;
  }
  const std::string name =
      "resize_" + mode + "_f32_" + layout_name(l) + "__" + std::string(isa_name(isa));
  return std::make_unique<ResizeKernel>(g, h, std::move(off), std::move(idx), std::move(cw), planes,
                                        x[2], x[3], l, isa, name);
}

}  // namespace kiln
