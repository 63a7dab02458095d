// The chain kernel (dw_pw_kernel.h). A tile is (image, run of consecutive bands). Per band: a
// gemm1x1 kernel made for an image of `c` rows computes the expand rows the band reads and the
// scratch does not hold yet, the depthwise family's kernel runs the band's rows from there
// (run_dw_rows) into the second scratch (or the output), and a gemm1x1 kernel made for a
// band-high image runs the project 1x1 over them into the band's output rows.
#include "jit/dw/dw_pw_kernel.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>

#include "graph/error.h"
#include "graph/post_ops.h"
#include "jit/dw/dw_conf.h"
#include "jit/layout.h"

namespace kiln {
namespace {

constexpr size_t kMaxInputs = 16;  // of one node (its post-ops' operands from input 3 on)
// Expand rows + depthwise rows per band with an expand conv (L2-resident on every x86 core of
// the last years); without one, the depthwise rows alone in 128 KiB.
constexpr int64_t kExpandScratch = int64_t(256) << 10, kBandScratch = int64_t(128) << 10;
constexpr int64_t kMinPixels = 96;  // per 1x1 run: each run reads all its weights

// The expand rows the scratch holds, [h0, h1) from its row `at` on, as a tile walks its bands
// downwards. need() makes them cover [i0, i1): it forgets the rows before i0, then adds runs of
// c rows (compute(first row), into scratch row at + first - h0); a run that would pass the
// image's last row ends there instead, recomputing rows already held (into a slack of c rows
// before the scratch's row 0 when at is 0). A run past the scratch's `cap` rows first moves the
// held rows to its front (compact(from row, rows)): with cap about twice the rows a band needs,
// the rows a band reads again are copied once per few bands, not once per band.
struct RowWindow {
  int64_t c = 0, ih = 0, cap = 0, h0 = 0, h1 = 0, at = 0;
  template <class Compact, class Compute>
  void need(int64_t i0, int64_t i1, Compact&& compact, Compute&& compute) {
    if (i0 >= h1) {
      h0 = h1 = i0;
      at = 0;
    } else if (i0 > h0) {
      at += i0 - h0;
      h0 = i0;
    }
    while (h1 < i1) {
      const int64_t start = std::min(h1, ih - c);
      if (at + start + c - h0 > cap) {
        compact(at, h1 - h0);
        at = 0;
      }
      compute(start);
      h1 = start + c;
    }
  }
};

// Where the pieces of a chain are.
struct ChainShape {
  ConvProblem dw, pw;  // pw: the project conv (when there is one)
  bool expand = false, project = false;
  int64_t e_ic = 0;  // the expand conv's input channels
  double macs = 0;   // of the whole chain
  int e_inputs = 0, dw_inputs = 0;
  size_t p_inputs = 0;
  int64_t band = 0, bands = 0, segs = 0;  // depthwise rows per band; bands and tiles per image
  int64_t c = 0;                          // expand rows per run
  int64_t e_row = 0, d_row = 0;           // bytes of an expand row and of a depthwise row
  int64_t e_bytes = 0, d_bytes = 0;       // the two scratches
  int64_t e_cap = 0;                      // expand rows the scratch holds (past its slack)

  // The input rows the depthwise output rows [r0, r1) read.
  std::pair<int64_t, int64_t> input_rows(int64_t r0, int64_t r1) const {
    return {std::max<int64_t>(0, r0 * dw.sh - dw.pt),
            std::min(dw.ih, (r1 - 1) * dw.sh - dw.pt + (dw.kh - 1) * dw.dh + 1)};
  }
  std::pair<int64_t, int64_t> seg_bands(int64_t seg) const {
    return {seg * bands / segs, (seg + 1) * bands / segs};
  }
  // The most rows the expand scratch holds at once (a walk without work or compaction).
  int64_t max_held() const {
    int64_t most = 0;
    for (int64_t s = 0; s < segs; ++s) {
      RowWindow w{c, dw.ih, std::numeric_limits<int64_t>::max() / 4};
      const auto [b0, b1] = seg_bands(s);
      for (int64_t b = b0; b < b1; ++b) {
        const auto [i0, i1] = input_rows(b * band, std::min(dw.oh, (b + 1) * band));
        w.need(
            i0, i1, [](int64_t, int64_t) {}, [](int64_t) {});
        most = std::max(most, w.h1 - w.h0);
      }
    }
    return most;
  }
};

class DwChainKernel : public Kernel {
 public:
  DwChainKernel(const ChainShape& s, std::unique_ptr<Kernel> ek, std::unique_ptr<Kernel> dwk,
                std::unique_ptr<Kernel> full, std::unique_ptr<Kernel> tail)
      : s_(s),
        ek_(std::move(ek)),
        dwk_(std::move(dwk)),
        full_(std::move(full)),
        tail_(std::move(tail)) {
    // "conv_dwpw_f32_nhwc_k3s1_ow22_b4_m14oc2", with an expand "conv_pwdw..._e<its blocking>".
    auto blocking = [](const Kernel& k) {
      const std::string& n = k.name();
      const size_t at = n.find("nhwc_to_nhwc_");
      return n.substr(at + 13, n.find("__") - at - 13);
    };
    const std::string& dn = dwk_->name();
    name_ = std::string("conv_") + (s_.expand ? "pw" : "") + "dw" + (s_.project ? "pw" : "") +
            "_f32_nhwc_" + dn.substr(dn.find("nhwc_") + 5, dn.find("__") - dn.find("nhwc_") - 5) +
            "_b" + std::to_string(s_.band);
    if (ek_) name_ += "_e" + blocking(*ek_);
    if (full_) name_ += "_" + blocking(*full_);
    name_ += dn.substr(dn.find("__"));
    for (const Kernel* k : {ek_.get(), dwk_.get(), full_.get(), tail_.get()})
      if (k) sub_scratch_ = std::max(sub_scratch_, k->scratch_bytes());
    if (s_.project)
      for (const PostOp& op : s_.pw.post)
        if (op.kind == PostOp::Kind::add) spatial_.push_back(op.input);
  }

  const std::string& name() const override { return name_; }
  int64_t tiles() const override { return s_.dw.n * s_.segs; }
  int64_t scratch_bytes() const override {
    return s_.e_bytes + s_.d_bytes + round_up(sub_scratch_, 64);
  }
  double macs() const override { return s_.macs; }
  std::vector<Span> weights() const override {
    std::vector<Span> w;
    for (const Kernel* k : {ek_.get(), dwk_.get(), full_.get(), tail_.get()})
      if (k)
        for (const Span& sp : k->weights()) w.push_back(sp);
    return w;
  }

  void run(const KernelArgs& args, int64_t begin, int64_t end) const override {
    char* scratch = reinterpret_cast<char*>(scratch_floats(args));
    char* held = scratch + s_.c * s_.e_row;  // expand row h0 (after the slack)
    float* drows = reinterpret_cast<float*>(scratch + s_.e_bytes);
    void* sub = sub_scratch_ ? scratch + s_.e_bytes + s_.d_bytes : nullptr;
    const float* const* din = args.src + s_.e_inputs;
    const ConvProblem& d = s_.dw;
    std::array<const float*, kMaxInputs> dsrc{};  // the depthwise node's inputs
    std::copy(din, din + s_.dw_inputs, dsrc.begin());
    KernelArgs dwa;
    dwa.src = dsrc.data();
    dwa.dst = args.dst;  // unused: run_dw_rows writes `out`
    dwa.scratch = sub;
    for (int64_t t = begin; t < end; ++t) {
      const int64_t n = t / s_.segs;
      const auto [b0, b1] = s_.seg_bands(t % s_.segs);
      RowWindow w{s_.c, d.ih, s_.e_cap};
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t r0 = b * s_.band, r1 = std::min(d.oh, r0 + s_.band);
        int64_t dn = n;
        if (s_.expand) {
          const auto [i0, i1] = s_.input_rows(r0, r1);
          w.need(
              i0, i1,
              [&](int64_t from, int64_t rows) {
                std::memmove(held, held + from * s_.e_row, size_t(rows * s_.e_row));
              },
              [&](int64_t first) {
                run_expand(args.src, n, first, held + (w.at + first - w.h0) * s_.e_row, sub);
              });
          // The depthwise kernel reads input row r at src + r * row bytes: from the scratch.
          dsrc[0] = reinterpret_cast<const float*>(reinterpret_cast<uintptr_t>(held) +
                                                   uintptr_t((w.at - w.h0) * s_.e_row));
          dn = 0;
        }
        float* out = s_.project ? drows : args.dst[0] + (n * d.oh + r0) * d.ow * d.oc;
        if (!convjit::run_dw_rows(*dwk_, dwa, dn, r0, r1, out))
          fail(Code::internal, name_ + ": the depthwise kernel cannot run rows");
        if (s_.project) run_project(args, n, r0, r1, drows, sub);
      }
    }
  }

 private:
  // Expand rows [first, first + c) of image n into `out`.
  void run_expand(const float* const* src_in, int64_t n, int64_t first, char* out,
                  void* sub) const {
    const ConvProblem& d = s_.dw;
    std::array<const float*, kMaxInputs> src{};
    std::copy(src_in, src_in + s_.e_inputs, src.begin());
    src[0] += (n * d.ih + first) * d.iw * s_.e_ic;
    float* dst[] = {reinterpret_cast<float*>(out)};
    KernelArgs a;
    a.src = src.data();
    a.dst = dst;
    a.scratch = sub;
    ek_->run(a, 0, ek_->tiles());
  }

  // The project 1x1 over the band's depthwise rows into its output rows.
  void run_project(const KernelArgs& args, int64_t n, int64_t r0, int64_t r1, const float* rows,
                   void* sub) const {
    const float* const* pin = args.src + s_.e_inputs + s_.dw_inputs;
    const ConvProblem& pw = s_.pw;
    const int64_t first = (n * pw.oh + r0) * pw.ow;  // the band's first output pixel
    std::array<const float*, kMaxInputs> src{};
    std::copy(pin, pin + s_.p_inputs, src.begin());
    src[0] = rows;
    for (int in : spatial_) src[size_t(in)] += first * pw.oc;
    float* dst[] = {args.dst[0] + first * pw.oc};
    KernelArgs pa;
    pa.src = src.data();
    pa.dst = dst;
    pa.scratch = sub;
    const Kernel& k = r1 - r0 == s_.band ? *full_ : *tail_;
    k.run(pa, 0, k.tiles());
  }

  ChainShape s_;
  std::unique_ptr<Kernel> ek_, dwk_, full_, tail_;
  std::string name_;
  int64_t sub_scratch_ = 0;
  std::vector<int> spatial_;  // the project's inputs holding residuals (offset per band)
};

// The 1x1 over `rows` rows of one image.
ConvProblem rows_problem(const ConvProblem& p, int64_t rows) {
  ConvProblem b = p;
  b.n = 1;
  b.ih = b.oh = rows;
  return b;
}

}  // namespace

std::unique_ptr<Kernel> create_dw_chain_kernel(const ChainConv* expand, const ChainConv& dwc,
                                               const ChainConv* project, Isa isa,
                                               std::string* why_not, int64_t band) {
  const ConvProblem& dw = dwc.p;
  if (isa != Isa::avx512 && isa != Isa::avx2) return decline(why_not, "needs AVX2 or AVX-512");
  if (!expand && !project) return decline(why_not, "no 1x1 conv next to the depthwise conv");
  if (!dw.depthwise()) return decline(why_not, "the middle conv not depthwise");
  if (project) {
    const ConvProblem& pw = project->p;
    if (!pw.dense_1x1())
      return decline(why_not, "the project conv not a dense 1x1 of stride 1 without padding");
    if (pw.n != dw.n || pw.ic != dw.oc || pw.ih != dw.oh || pw.iw != dw.ow)
      return decline(why_not, "the project conv does not read the depthwise output");
  }
  if (expand) {
    const ConvProblem& e = expand->p;
    if (!e.dense_1x1())
      return decline(why_not, "the expand conv not a dense 1x1 of stride 1 without padding");
    if (e.n != dw.n || e.oc != dw.ic || e.oh != dw.ih || e.ow != dw.iw)
      return decline(why_not, "the depthwise conv does not read the expand output");
  }
  auto reads_tensor = [](const ConvProblem& p) {
    return std::any_of(p.post.begin(), p.post.end(), [](const PostOp& op) {
      return extra_inputs(op.kind) > 0 && !per_channel(op.kind);
    });
  };
  if (reads_tensor(dw)) return decline(why_not, "the depthwise conv's post-ops read a tensor");
  if (expand && reads_tensor(expand->p))
    return decline(why_not, "the expand conv's post-ops read a tensor");
  auto operands_past = [](const ChainConv* c) {
    return c && std::any_of(c->p.post.begin(), c->p.post.end(), [&](const PostOp& op) {
             return extra_inputs(op.kind) > 0 && op.input + extra_inputs(op.kind) > c->inputs;
           });
  };
  if (operands_past(expand) || operands_past(&dwc) || operands_past(project))
    return decline(why_not, "post-op operands lie past the node's inputs");
  for (const ChainConv* c : {expand, &dwc, project})
    if (c && size_t(c->inputs) > kMaxInputs) return decline(why_not, "too many post-op operands");

  ChainShape s;
  s.dw = dw;
  if (project) s.pw = project->p;
  s.e_ic = expand ? expand->p.ic : 0;
  s.macs = dw.macs() + (expand ? expand->p.macs() : 0) + (project ? project->p.macs() : 0);
  s.expand = expand != nullptr;
  s.project = project != nullptr;
  s.e_inputs = expand ? expand->inputs : 0;
  s.dw_inputs = dwc.inputs;
  s.p_inputs = project ? size_t(project->inputs) : 0;
  s.e_row = expand ? dw.iw * dw.ic * 4 : 0;
  s.d_row = project ? dw.ow * dw.oc * 4 : 0;
  // Rows per band: what fits the scratch budget, but at least kMinPixels per 1x1 run, and at
  // least 2 bands an image (2 threads at batch 1).
  if (band <= 0) {
    int64_t fit = 1, least = 1;
    if (expand) {
      const int64_t halo = std::max<int64_t>((dw.kh - 1) * dw.dh + 1 - dw.sh, 0);
      // The slack, and twice the rows a band reads with a run past them: about 5 runs' rows.
      fit = (kExpandScratch - 2 * halo * s.e_row) / (5 * dw.sh * s.e_row + s.d_row);
      least = (kMinPixels + dw.sh * dw.iw - 1) / (dw.sh * dw.iw);
    } else {
      fit = kBandScratch / s.d_row;
    }
    if (project) least = std::max(least, (kMinPixels + dw.ow - 1) / dw.ow);
    band = std::clamp<int64_t>(std::max(fit, least), 1, (dw.oh + 1) / 2);
  }
  if (band > dw.oh) return decline(why_not, "band taller than the image");
  s.band = band;
  s.bands = (dw.oh + band - 1) / band;
  // Without an expand every band is a tile; with one, a tile walks a run of bands (each run
  // computes the rows above its first band again).
  s.segs = expand ? std::min(s.bands, std::clamp<int64_t>(s.bands / 4, 2, 4)) : s.bands;
  s.c = std::min(dw.ih, band * dw.sh);
  if (expand) {
    s.e_cap = 2 * s.max_held();
    s.e_bytes = round_up((s.c + s.e_cap) * s.e_row, 64);
  }
  if (project) s.d_bytes = round_up(band * s.d_row, 64);

  std::string why;
  ConvImpl dw_impl;
  dw_impl.family = ConvFamily::depthwise;
  dw_impl.src = dw_impl.dst = Layout::nhwc;
  auto dwk = create_conv_kernel(dw, dw_impl, isa, *dwc.weights, dwc.bias, &why);
  if (!dwk) return decline(why_not, "depthwise: " + why);
  ConvImpl pw_impl;
  pw_impl.family = ConvFamily::gemm1x1;
  pw_impl.src = pw_impl.dst = Layout::nhwc;
  std::unique_ptr<Kernel> ek, full, tail;
  if (expand) {
    ek = create_conv_kernel(rows_problem(expand->p, s.c), pw_impl, isa, *expand->weights,
                            expand->bias, &why);
    if (!ek) return decline(why_not, "expand 1x1: " + why);
  }
  if (project) {
    full = create_conv_kernel(rows_problem(project->p, band), pw_impl, isa, *project->weights,
                              project->bias, &why);
    if (!full) return decline(why_not, "1x1: " + why);
    if (const int64_t rest = dw.oh % band) {
      tail = create_conv_kernel(rows_problem(project->p, rest), pw_impl, isa, *project->weights,
                                project->bias, &why);
      if (!tail) return decline(why_not, "1x1 (last band): " + why);
    }
  }
  return std::make_unique<DwChainKernel>(s, std::move(ek), std::move(dwk), std::move(full),
                                         std::move(tail));
}

}  // namespace kiln
