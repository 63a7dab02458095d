#include "jit/conv/conv_util.h"

#include <algorithm>

namespace kiln::convjit {

double block_step_cycles(Isa isa, int ur, int ob, bool bcast_reg) {
  const double fmas = double(ur) * ob;
  const bool reg = bcast_reg || isa != Isa::avx512;
  // Load uops: one per weight vector, plus one broadcast per pixel (register broadcast) or
  // one per FMA (embedded broadcast).
  const double loads = ob + (reg ? ur : fmas);
  double c = std::max({fmas / 2, loads / 3, ob / 2.0, 4.0});
  // Front end: ~6 uops per cycle (register broadcasts are extra instructions).
  c = std::max(c, (fmas + ob + (reg ? ur : 0)) / 6);
  // Weights stream from L2 for all but small layers: ~32 bytes per cycle sustained.
  c = std::max(c, ob * (simd_width(isa) * 4.0) / 32);
  return c;
}

std::string check_common(const ConvProblem& p, Isa isa) {
  if (isa != Isa::avx512 && isa != Isa::avx2) return "needs isa avx2 or avx512";
  if (int(isa) > int(detect_isa()))
    return std::string("isa ") + isa_name(isa) + " is not supported by this CPU";
  if (p.groups != 1) return "groups > 1";
  if (p.n < 1 || p.ic < 1 || p.oc < 1 || p.oh < 1 || p.ow < 1 || p.ih < 1 || p.iw < 1)
    return "empty problem";
  if (p.kh < 1 || p.kw < 1 || p.sh < 1 || p.sw < 1 || p.dh < 1 || p.dw < 1)
    return "invalid kernel, stride or dilation";
  if (p.pt < 0 || p.pl < 0 || p.pb < 0 || p.pr < 0) return "negative padding";
  if ((p.ih + p.pt + p.pb - (p.dh * (p.kh - 1) + 1)) / p.sh + 1 != p.oh ||
      (p.iw + p.pl + p.pr - (p.dw * (p.kw - 1) + 1)) / p.sw + 1 != p.ow)
    return "output shape does not match the window";
  if (int(p.post.size()) > kMaxPostOps)
    return "more than " + std::to_string(kMaxPostOps) + " fused post-ops";
  for (const PostOp& op : p.post)
    if ((op.kind == PostOp::Kind::add || op.kind == PostOp::Kind::scale_shift) && op.input < 0)
      return "post-op without its input";
  // Offsets inside one image must fit the 32-bit displacements the generators emit.
  const int64_t big = int64_t(1) << 28;
  if (round_up(p.ic, 16) * p.ih * p.iw > big || round_up(p.oc, 16) * p.oh * p.ow > big)
    return "image too large for 32-bit offsets";
  return "";
}

std::string check_blocked(Layout l, Isa isa, const char* what) {
  if (l == Layout::nChw16c && isa != Isa::avx512)
    return std::string(what) + " layout nChw16c needs isa avx512";
  if (l == Layout::nChw8c && isa != Isa::avx2)
    return std::string(what) + " layout nChw8c needs isa avx2";
  if (l != Layout::nChw16c && l != Layout::nChw8c)
    return std::string(what) + " layout " + layout_name(l) + " is not blocked";
  return "";
}

std::vector<float> pack_bias(const float* bias, int64_t oc, int64_t padded) {
  std::vector<float> b(size_t(padded), 0.f);
  if (bias) std::copy(bias, bias + oc, b.begin());
  return b;
}

}  // namespace kiln::convjit
