// ChannelShuffle (graph/channel_shuffle.h): every output channel is one channel of one input.
// nchw: each output channel is an H*W plane of an input, copied as runs of consecutive
// channels. nhwc and blocked: an output vector of channels at a pixel is assembled from a few
// "windows" (vectors of consecutive source channels at the same pixel) by lane permutes:
// AVX-512 masked vpermps, AVX2 vpermps + vblendps. nhwc windows start at any channel, so a
// slice is a plain (unaligned) copy; blocked windows are source blocks. Blocked outputs get
// zeroed pad lanes.
#include <algorithm>
#include <climits>
#include <map>
#include <string>

#include "graph/error.h"
#include "jit/glue/asmjit_util.h"
#include "jit/glue/glue.h"

namespace kiln {

ShufflePlan plan_channel_shuffle(const ChannelShuffleSpec& s, Layout l, int lanes) {
  ShufflePlan plan;
  const bool blocked = layout_block(l) > 1;
  for (size_t o = 0; o < s.split.size(); ++o)
    for (int64_t c0 = 0; c0 < s.split[o]; c0 += lanes) {
      ShuffleVector v;
      v.output = int(o);
      v.chan = c0;
      v.valid = int(std::min<int64_t>(lanes, s.split[o] - c0));
      for (int j = 0; j < v.valid; ++j) {
        const auto loc = s.locate(s.source(o, c0 + j));
        const int k = int(loc.first);  // named copies: lambdas cannot capture bindings (clang)
        const int64_t ck = loc.second;
        auto w = std::find_if(v.windows.begin(), v.windows.end(), [&](const ShuffleWindow& x) {
          return x.input == k && ck >= x.chan && ck < x.chan + lanes;
        });
        if (w == v.windows.end()) {
          ShuffleWindow nw;
          nw.input = k;
          nw.chan = blocked ? ck / lanes * lanes : ck;
          // Blocked sources hold whole blocks (pad lanes included): no tail.
          nw.valid =
              blocked ? lanes : int(std::min<int64_t>(lanes, s.in_channels[size_t(k)] - nw.chan));
          nw.lane.assign(size_t(lanes), -1);
          v.windows.push_back(nw);
          w = v.windows.end() - 1;
        }
        w->lane[size_t(j)] = int(ck - w->chan);
      }
      plan.vectors.push_back(std::move(v));
    }
  return plan;
}

namespace {

using glue::AsmBuilder;
namespace x86 = asmjit::x86;

// src/dst: the node's operand arrays; n: image; [p0, p0 + np): pixels; offs: per-window
// source byte offsets then the destination's (blocked), unused in nhwc.
using VecFn = void (*)(const float* const* src, float* const* dst, int64_t n, int64_t p0,
                       int64_t np, const int64_t* offs);
using VecSig = asmjit::FuncSignatureT<void, const float* const*, float* const*, int64_t, int64_t,
                                      int64_t, const int64_t*>;
using glue::CopyFn;

struct Copy {  // nchw: n floats from input k / output o at the given offsets of the image
  int input, output;
  int64_t src_off, dst_off, n;
};
struct VecTile {  // nhwc / blocked: function fn over pixels [p0, p0 + np) of one image
  int fn;
  int64_t p0, np;
  size_t offs;  // into offs_
};

class ShuffleKernel : public glue::GlueKernel {
 public:
  void run(const KernelArgs& a, int64_t b, int64_t e) const override {
    for (int64_t t = b; t < e; ++t) {
      const int64_t n = t / per_image_;
      const int64_t i = t % per_image_;
      if (copy_) {
        for (size_t c = copy_tiles_[size_t(i)]; c < copy_tiles_[size_t(i) + 1]; ++c) {
          const Copy& w = copies_[c];
          copy_(a.src[w.input] + n * src_img_[size_t(w.input)] + w.src_off,
                a.dst[w.output] + n * dst_img_[size_t(w.output)] + w.dst_off, w.n);
        }
      } else {
        const VecTile& w = vec_tiles_[size_t(i)];
        fns_[size_t(w.fn)](a.src, a.dst, n, w.p0, w.np, offs_.data() + w.offs);
      }
    }
  }

  CopyFn copy_ = nullptr;
  std::vector<Copy> copies_;
  std::vector<size_t> copy_tiles_;  // tile i: copies_[copy_tiles_[i], copy_tiles_[i + 1])
  std::vector<VecFn> fns_;
  std::vector<VecTile> vec_tiles_;
  std::vector<int64_t> offs_;
  std::vector<int64_t> src_img_, dst_img_;  // floats per image
  int64_t per_image_ = 1;

  void set_tiles(int64_t N, int64_t per) {
    per_image_ = per;
    tiles_ = N * per;
  }
  void set_name(std::string n) { name_ = std::move(n); }
  void set_code(glue::ExecCode c) { code_ = std::move(c); }
};

// Generates one output vector per pixel. `win_mem(w)` / `dst_mem` address the current pixel.
class VectorEmitter {
 public:
  VectorEmitter(AsmBuilder& b, int lanes) : b_(b), cc_(b.cc()), lanes_(lanes) {}

  // acc = the vector's lanes (pad lanes zero when `zero_rest`), then stored (tail-masked to
  // v.valid when !zero_rest).
  void emit(const ShuffleVector& v, const std::vector<x86::Mem>& win_mem, const x86::Mem& dst,
            bool zero_rest) {
    x86::Vec acc = b_.vec(lanes_);
    uint32_t covered = 0;
    for (size_t w = 0; w < v.windows.size(); ++w) {
      const ShuffleWindow& win = v.windows[w];
      uint32_t bits = 0;
      bool identity = true;
      std::vector<uint32_t> idx(size_t(lanes_), 0);
      for (int j = 0; j < lanes_; ++j)
        if (win.lane[size_t(j)] >= 0) {
          bits |= 1u << j;
          idx[size_t(j)] = uint32_t(win.lane[size_t(j)]);
          identity &= win.lane[size_t(j)] == j;
        }
      // A window past the source's channels is read masked (never beyond its pixel).
      x86::Mem src = win_mem[w];
      const bool tail = win.valid < lanes_;
      if (b_.avx512()) {
        const bool first = w == 0;
        const uint32_t all = (1u << lanes_) - 1;
        auto masked = [&](uint32_t m) -> x86::Compiler& {
          if (m == all) return cc_;
          x86::KReg k = kmask(m);
          return first ? cc_.k(k).z() : cc_.k(k);
        };
        if (identity) {
          masked(bits).vmovups(acc, src);  // a masked load reads only the lanes it keeps
        } else {
          x86::Vec ix = b_.vec(lanes_);
          cc_.vmovups(ix, b_.clanes(idx, lanes_));
          if (tail) {
            x86::Vec t = b_.vec(lanes_);
            cc_.k(kmask((1u << win.valid) - 1)).z().vmovups(t, src);
            masked(bits).vpermps(acc, ix, t);
          } else {
            masked(bits).vpermps(acc, ix, src);
          }
        }
      } else {
        x86::Vec t = b_.vec(lanes_);
        if (tail) {
          glue::Mask m = b_.mask(win.valid, lanes_);
          b_.load(t, src, &m);
        } else {
          cc_.vmovups(t, src);
        }
        if (!identity) {
          x86::Vec ix = b_.vec(lanes_);
          cc_.vmovups(ix, b_.clanes(idx, lanes_));
          cc_.vpermps(t, ix, t);
        }
        if (w == 0)
          cc_.vmovaps(acc, t);
        else
          cc_.vblendps(acc, acc, t, bits);
      }
      covered |= bits;
    }
    const uint32_t all = (1u << lanes_) - 1;
    if (zero_rest) {
      if (!b_.avx512() && covered != all) {
        x86::Vec z = b_.vec(lanes_);
        cc_.vxorps(z, z, z);
        cc_.vblendps(acc, z, acc, covered);
      }
      cc_.vmovups(dst, acc);
    } else {
      glue::Mask m = b_.mask(v.valid, lanes_);
      b_.store(dst, acc, &m);
    }
  }

 private:
  x86::KReg kmask(uint32_t bits) {
    x86::KReg k = cc_.newKw();
    x86::Mem m = b_.clanes({bits}, lanes_);
    m.setSize(2);
    cc_.kmovw(k, m);
    return k;
  }

  AsmBuilder& b_;
  x86::Compiler& cc_;
  int lanes_;
};

void bind_args(AsmBuilder& b, const std::vector<x86::Gp>& args) {
  for (size_t i = 0; i < args.size(); ++i) b.func()->setArg(uint32_t(i), args[i]);
}

// One function per blocked output vector shape: its windows' source blocks and the output
// block come from offs (bytes from the image bases), the pixels from p0/np.
int build_blocked_fn(AsmBuilder& b, const ShuffleVector& v, int lanes,
                     const std::vector<int64_t>& src_img, const std::vector<int64_t>& dst_img) {
  auto& cc = b.cc();
  const int idx = b.begin_function(VecSig());
  x86::Gp src = b.gp(), dst = b.gp(), n = b.gp(), p0 = b.gp(), np = b.gp(), offs = b.gp();
  bind_args(b, {src, dst, n, p0, np, offs});
  const int64_t pix = int64_t(lanes) * 4;
  // Pointer per window and for the output: operand base + n * image + offs[w] + p0 * pix.
  auto base = [&](const x86::Gp& arr, int slot, int64_t img, int off_slot) {
    x86::Gp r = b.gp(), t = b.gp();
    cc.mov(r, x86::qword_ptr(arr, slot * 8));
    cc.imul(t, n, img * 4);
    cc.add(r, t);
    cc.add(r, x86::qword_ptr(offs, off_slot * 8));
    cc.imul(t, p0, pix);
    cc.add(r, t);
    return r;
  };
  std::vector<x86::Gp> wp;
  for (size_t w = 0; w < v.windows.size(); ++w)
    wp.push_back(base(src, v.windows[w].input, src_img[size_t(v.windows[w].input)], int(w)));
  x86::Gp out = base(dst, v.output, dst_img[size_t(v.output)], int(v.windows.size()));
  x86::Gp po = b.gp();  // byte offset of the pixel
  cc.xor_(po, po);
  asmjit::Label top = cc.newLabel(), done = cc.newLabel();
  cc.test(np, np);
  cc.jz(done);
  cc.bind(top);
  {
    VectorEmitter e(b, lanes);
    std::vector<x86::Mem> mem;
    for (const x86::Gp& p : wp) mem.push_back(x86::ptr(p, po));
    e.emit(v, mem, x86::ptr(out, po), true);
  }
  cc.add(po, pix);
  cc.dec(np);
  cc.jnz(top);
  cc.bind(done);
  b.end_function();
  return idx;
}

// One function per nhwc output: every vector of the pixel's channel row.
int build_nhwc_fn(AsmBuilder& b, const std::vector<const ShuffleVector*>& vs, int lanes, int out,
                  const ChannelShuffleSpec& s, const std::vector<int64_t>& src_img,
                  const std::vector<int64_t>& dst_img) {
  auto& cc = b.cc();
  const int idx = b.begin_function(VecSig());
  x86::Gp src = b.gp(), dst = b.gp(), n = b.gp(), p0 = b.gp(), np = b.gp(), offs = b.gp();
  bind_args(b, {src, dst, n, p0, np, offs});
  auto base = [&](const x86::Gp& arr, int slot, int64_t img, int64_t row) {
    x86::Gp r = b.gp(), t = b.gp();
    cc.mov(r, x86::qword_ptr(arr, slot * 8));
    cc.imul(t, n, img * 4);
    cc.add(r, t);
    cc.imul(t, p0, row * 4);
    cc.add(r, t);
    return r;
  };
  std::map<int, x86::Gp> in_ptr;
  for (const ShuffleVector* v : vs)
    for (const ShuffleWindow& w : v->windows)
      if (!in_ptr.count(w.input))
        in_ptr[w.input] =
            base(src, w.input, src_img[size_t(w.input)], s.in_channels[size_t(w.input)]);
  x86::Gp o = base(dst, out, dst_img[size_t(out)], s.split[size_t(out)]);
  asmjit::Label top = cc.newLabel(), done = cc.newLabel();
  cc.test(np, np);
  cc.jz(done);
  cc.bind(top);
  for (const ShuffleVector* v : vs) {
    VectorEmitter e(b, lanes);
    std::vector<x86::Mem> mem;
    for (const ShuffleWindow& w : v->windows)
      mem.push_back(x86::ptr(in_ptr[w.input], int32_t(w.chan * 4)));
    e.emit(*v, mem, x86::ptr(o, int32_t(v->chan * 4)), false);
  }
  for (auto& [k, p] : in_ptr) cc.add(p, s.in_channels[size_t(k)] * 4);
  cc.add(o, s.split[size_t(out)] * 4);
  cc.dec(np);
  cc.jnz(top);
  cc.bind(done);
  b.end_function();
  return idx;
}

// A key of what a blocked vector's code depends on (not where its blocks are).
std::string vector_shape_key(const ShuffleVector& v) {
  std::string k = std::to_string(v.output) + ":" + std::to_string(v.valid);
  for (const ShuffleWindow& w : v.windows) {
    k += "|" + std::to_string(w.input) + "," + std::to_string(w.valid);
    for (int x : w.lane) k += "," + std::to_string(x);
  }
  return k;
}

}  // namespace

std::unique_ptr<Kernel> create_channel_shuffle_kernel(const Shape& nchw_in0,
                                                      const ChannelShuffleSpec& s, Layout l,
                                                      Isa isa, std::string* why_not) {
  if (isa != Isa::avx2 && isa != Isa::avx512) return decline(why_not, "needs avx2 or avx512");
  if (nchw_in0.size() != 4) return decline(why_not, "needs 4-D inputs");
  const int B = layout_block(l);
  if (B == 16 && isa != Isa::avx512) return decline(why_not, "nChw16c needs avx512");
  const int64_t C = s.total();
  if (s.in_channels.empty() || s.split.empty() || s.groups < 1 || C % s.groups != 0)
    return decline(why_not, "inconsistent channel shuffle");
  int64_t end = s.offset;
  for (int64_t c : s.in_channels)
    if (c < 1) return decline(why_not, "an input has no channels");
  for (int64_t c : s.split) {
    if (c < 1) return decline(why_not, "an output has no channels");
    end += c;
  }
  if (s.offset < 0 || end > C) return decline(why_not, "outputs exceed the channels");
  const int64_t N = nchw_in0[0], HW = nchw_in0[2] * nchw_in0[3];
  if (N < 1 || HW < 1) return decline(why_not, "empty tensor");
  std::vector<int64_t> src_img, dst_img;
  auto image = [&](int64_t c) { return layout_elems(l, {1, c, nchw_in0[2], nchw_in0[3]}); };
  for (int64_t c : s.in_channels) src_img.push_back(image(c));
  for (int64_t c : s.split) dst_img.push_back(image(c));
  for (int64_t e : src_img)
    if (e * 4 > INT32_MAX / 2) return decline(why_not, "tensor too large");
  for (int64_t e : dst_img)
    if (e * 4 > INT32_MAX / 2) return decline(why_not, "tensor too large");

  std::string name = "split";
  if (s.groups > 1) name = "shuffle_g" + std::to_string(s.groups);
  name += std::string("_f32_") + layout_name(l) + "__" + isa_name(isa);
  auto k = std::make_unique<ShuffleKernel>();
  k->set_name(name);
  k->src_img_ = src_img;
  k->dst_img_ = dst_img;
  AsmBuilder b(name, isa);
  int64_t per = 0;
  if (l == Layout::nchw) {
    glue::build_flat_copy(b);
    // Runs of consecutive source channels become one copy; tiles of ~16k floats.
    std::vector<Copy> runs;
    for (size_t o = 0; o < s.split.size(); ++o)
      for (int64_t c = 0; c < s.split[o]; ++c) {
        const auto [in, ck] = s.locate(s.source(o, c));
        Copy* last = runs.empty() ? nullptr : &runs.back();
        if (last && last->input == in && last->output == int(o) &&
            last->src_off + last->n == ck * HW && last->dst_off + last->n == c * HW)
          last->n += HW;
        else
          runs.push_back({in, int(o), ck * HW, c * HW, HW});
      }
    int64_t total = 0;
    for (const Copy& r : runs) total += r.n;
    const int64_t chunk = glue::chunk_size(total, 4 * b.width(), 16, 16384);
    int64_t filled = 0;
    k->copy_tiles_.push_back(0);
    for (const Copy& r : runs)
      for (int64_t o = 0; o < r.n;) {
        const int64_t n = std::min(r.n - o, chunk - filled);
        k->copies_.push_back({r.input, r.output, r.src_off + o, r.dst_off + o, n});
        o += n;
        filled += n;
        if (filled == chunk) {
          k->copy_tiles_.push_back(k->copies_.size());
          filled = 0;
        }
      }
    if (filled) k->copy_tiles_.push_back(k->copies_.size());
    per = int64_t(k->copy_tiles_.size()) - 1;
  } else if (l == Layout::nhwc || B > 1) {
    const int lanes = B > 1 ? B : b.width();
    const ShufflePlan plan = plan_channel_shuffle(s, l, lanes);
    std::vector<std::pair<int, int64_t>> fn_work;  // function, floats per pixel it writes
    if (B > 1) {
      std::map<std::string, int> fn_of;
      for (const ShuffleVector& v : plan.vectors) {
        const std::string key = vector_shape_key(v);
        auto it = fn_of.find(key);
        const int fn = it != fn_of.end()
                           ? it->second
                           : (fn_of[key] = build_blocked_fn(b, v, lanes, src_img, dst_img));
        const size_t at = k->offs_.size();
        for (const ShuffleWindow& w : v.windows) k->offs_.push_back(w.chan * HW * 4);
        k->offs_.push_back(v.chan * HW * 4);
        const int64_t chunk = glue::chunk_size(HW, 1, 4, 4096 / lanes);
        for (int64_t p = 0; p < HW; p += chunk)
          k->vec_tiles_.push_back({fn, p, std::min(chunk, HW - p), at});
      }
    } else {
      for (size_t o = 0; o < s.split.size(); ++o) {
        std::vector<const ShuffleVector*> vs;
        for (const ShuffleVector& v : plan.vectors)
          if (v.output == int(o)) vs.push_back(&v);
        const int fn = build_nhwc_fn(b, vs, lanes, int(o), s, src_img, dst_img);
        const int64_t chunk =
            glue::chunk_size(HW, 1, 16 / int64_t(s.split.size()) + 1, 16384 / s.split[o] + 1);
        for (int64_t p = 0; p < HW; p += chunk)
          k->vec_tiles_.push_back({fn, p, std::min(chunk, HW - p), 0});
      }
      k->offs_.push_back(0);
    }
    per = int64_t(k->vec_tiles_.size());
  } else {
    return decline(why_not, std::string("layout ") + layout_name(l) + " is not supported");
  }
  glue::ExecCode code = b.finish();
  if (l == Layout::nchw)
    k->copy_ = b.entry<CopyFn>(code, 0);
  else
    for (int i = 0; i < b.function_count(); ++i) k->fns_.push_back(b.entry<VecFn>(code, i));
  k->set_code(std::move(code));
  k->set_tiles(N, per);
  return k;
}

}  // namespace kiln
