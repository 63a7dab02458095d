#include "jit/conv/conv_util.h"

#include <algorithm>

#include "jit/conv/conv_kernel.h"

namespace kiln::convjit {

double block_step_cycles(Isa isa, int ur, int ob, bool bcast_reg) {
  const double fmas = double(ur) * ob;
  const bool reg = bcast_reg || isa != Isa::avx512;
  // Load uops: one per weight vector, plus one broadcast per pixel (register broadcast) or
  // one per FMA (embedded broadcast). Measured on Sapphire Rapids: with 512-bit FMAs about 2
  // loads retire per cycle alongside the 2 FMAs (3 with 256-bit).
  const double loads = ob + (reg ? ur : fmas);
  const double load_rate = isa == Isa::avx512 ? 2 : 3;
  // 2 FMA pipes; each accumulator chain takes one FMA per step, and a step cannot beat the
  // 4-cycle FMA latency plus scheduling slack (measured: 7 chains reach ~85%, 14 ~100%).
  double c = std::max({fmas / 2, loads / load_rate, 5.0});
  // Front end: ~6 uops per cycle (register broadcasts are extra instructions).
  return std::max(c, (fmas + ob + (reg ? ur : 0)) / 6);
}

int epilogue_temps(const ConvProblem& p, Isa isa) {
  // Upper bounds of EpilogueEmitter::temps_needed() per op (its documented maximum is 3);
  // AVX2 needs one for the lane mask of masked loads.
  int n = p.bias && isa != Isa::avx512 ? 1 : 0;
  for (const PostOp& op : p.post) {
    int t = 1;
    if (op.kind == PostOp::Kind::relu) t = isa == Isa::avx512 ? 0 : 1;
    if (op.kind == PostOp::Kind::sigmoid) t = 2;
    if (op.kind == PostOp::Kind::prelu) t = isa == Isa::avx512 ? 1 : 2;
    if (op.kind == PostOp::Kind::swish || op.kind == PostOp::Kind::gelu ||
        epilogue_glue_kind(op.kind))
      t = 3;
    n = std::max(n, t);
  }
  return n;
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
    if (extra_inputs(op.kind) > 0 && op.input < 0) return "post-op without its input";
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

std::string check_bf16(const ConvProblem& p, Layout src, Layout dst, Isa isa, bool bf16_src) {
  if (isa != Isa::avx512 || !host_cpu().avx512_bf16) return "bf16 needs avx512_bf16";
  auto blocked16 = [](Layout l) { return l == Layout::nChw16c || layout_bf16(l); };
  if (!blocked16(src) || !blocked16(dst))
    return "bf16 kernels take nChw16c or nChw16c_bf16 on both sides";
  if (bf16_src && !layout_bf16(src)) return "a bf16 dst needs a bf16 src";
  for (const PostOp& op : p.post)
    if (layout_bf16(dst) && op.kind == PostOp::Kind::add)
      return "a bf16 dst cannot take a residual add (it would be read in bf16)";
  return "";
}

std::string check_int8(const ConvProblem& p, Layout dst, const ConvInt8& q) {
  if (int64_t(q.w_scale.size()) != p.oc) return "int8 needs a scale per oc";
  if (dst != Layout::nChw16c_u8) return "";
  const bool qdq_last = !p.post.empty() && is_quant_dequant(p.post.back().kind);
  const auto adds = std::count_if(p.post.begin(), p.post.end(),
                                  [](const PostOp& o) { return o.kind == PostOp::Kind::add; });
  if (!qdq_last) return "a nChw16c_u8 dst needs a quantize-dequantize as the last post-op";
  if (adds > 1 || (adds == 1 && !q.residual))
    return "a nChw16c_u8 dst needs its one residual on a uint8 grid";
  return "";
}

std::vector<float> pack_bias(const float* bias, int64_t oc, int64_t padded) {
  std::vector<float> b(size_t(padded), 0.f);
  if (bias) std::copy(bias, bias + oc, b.begin());
  return b;
}

}  // namespace kiln::convjit
