// The conv family table (see conv_families.h) and create_conv_kernel.
#include "jit/conv/conv_families.h"

#include <algorithm>
#include <array>

#include "graph/error.h"
#include "jit/dw/dw_conf.h"
#include "jit/grouped/grouped_conf.h"
#include "jit/im2col/im2col_kernel.h"
#include "jit/winograd/winograd_kernel.h"

namespace kiln {
namespace {

using namespace convjit;

using Pairs = std::vector<std::pair<Layout, Layout>>;

bool dense(const ConvProblem& p) {
  return p.groups == 1;
}
bool one_by_one(const ConvProblem& p) {
  return dense(p) && p.kh == 1 && p.kw == 1;
}
// Winograd: 3x3 stride 1, dense or grouped. Groups narrower than 24 channels on either side
// are not offered: with 16 (RegNetX-400MF / 800MF) the transforms outweigh the GEMMs' savings
// in the network, with 8 the zero weights of neighbouring groups (bench/NOTES.md, "grouped
// Winograd"), and every offered label costs profiling at load. Dilated: where each phase (the
// outputs d apart) has at least 4 rows and columns; on fewer (DeepLab's ASPP: d = 12..36 on
// 28x28) most of the tiles and patches are padding the direct family skips.
// F(2x2, 5x5) takes 5x5 kernels under the same rules, the 1-D family its groups rule.
bool winograd_groups(const ConvProblem& p) {
  if (dense(p)) return true;
  if (p.depthwise() || p.groups < 1 || p.ic % p.groups || p.oc % p.groups) return false;
  return p.ic / p.groups >= 24 && p.oc / p.groups >= 24;
}
bool winograd_shape_k(const ConvProblem& p, int64_t k) {
  if (p.kh != k || p.kw != k || p.sh != 1 || p.sw != 1) return false;
  const bool dilated = p.dh != 1 || p.dw != 1;
  if (dilated && ((p.oh + p.dh - 1) / p.dh < 4 || (p.ow + p.dw - 1) / p.dw < 4)) return false;
  return winograd_groups(p);
}
bool winograd_shape(const ConvProblem& p) {
  return winograd_shape_k(p, 3);
}
bool winograd5x5_shape(const ConvProblem& p) {
  return winograd_shape_k(p, 5);
}
// Stride-2 3x3 (the stage openings and stems of most CNNs), undilated, dense or grouped as above.
bool winograd_s2_shape(const ConvProblem& p) {
  return p.kh == 3 && p.kw == 3 && p.sh == 2 && p.sw == 2 && p.dh == 1 && p.dw == 1 &&
         winograd_groups(p);
}

// Winograd 1-D: a 1 x r or r x 1 kernel (r = 3, 5, 7), stride 1, dense or grouped as above;
// dilated along the axis where each phase has at least 2 outputs (1-D convs: WaveNet / TCN).
bool winograd1d_shape(const ConvProblem& p) {
  if ((p.kh != 1) == (p.kw != 1) || p.sh != 1 || p.sw != 1) return false;
  const int64_t r = std::max(p.kh, p.kw);
  if (r != 3 && r != 5 && r != 7) return false;
  const int64_t d = p.kh == 1 ? p.dw : p.dh, o = p.kh == 1 ? p.ow : p.oh;
  return d >= 1 && (o + d - 1) / d >= 2 && winograd_groups(p);
}

// im2col: dense, or grouped with at least 48 output channels per group that are not whole
// 16-channel vectors (a GEMM per group; NHWC): there it beats the grouped family, which wastes
// the lanes of vectors straddling two groups (RegNetY-8GF's 56). Narrower groups run faster on
// the grouped family (a GEMM one or two vectors wide reuses each broadcast for one or two
// FMAs), and on whole-vector groups the two tie, im2col paying layout conversions in the
// network: not offered (every offered label costs profiling at load). Measurements:
// bench/NOTES.md, "grouped im2col".
bool im2col_shape(const ConvProblem& p) {
  if (dense(p)) return true;
  if (p.depthwise() || p.groups < 1 || p.ic % p.groups || p.oc % p.groups) return false;
  const int64_t ocg = p.oc / p.groups;
  return ocg >= 48 && ocg % 16 != 0;
}

// The fraction of vector lanes that carry real channels when src and dst are blocked.
double lanes(const ConvProblem& p, Layout src, Layout dst) {
  const int64_t blk = std::max(layout_block(src), layout_block(dst));
  const int64_t icg = p.ic / std::max<int64_t>(1, p.groups);
  return double(icg) / double(round_up(icg, blk)) * double(p.oc) / double(round_up(p.oc, blk));
}
// The bf16 variants of the blocked families: bf16 src, f32 or bf16 dst.
Pairs bf16_pairs(const ConvProblem&) {
  return Pairs{{Layout::nChw16c_bf16, Layout::nChw16c},
               {Layout::nChw16c_bf16, Layout::nChw16c_bf16}};
}

// Wide enough that the GEMMs outweigh the transforms (per conv group).
bool wide(const ConvProblem& p) {
  const int64_t g = std::max<int64_t>(1, p.groups);
  return p.ic / g >= 32 && p.oc / g >= 32;
}

// A row's create: the family's conf for (p, impl, isa), then its kernel factory.
template <auto init, auto make>
std::unique_ptr<Kernel> conf_then_kernel(const ConvProblem& p, const ConvImpl& impl, Isa isa,
                                         const Tensor& w, const Tensor* b,
                                         const std::string& code_key, std::string* why_not) {
  auto c = init(p, impl, isa);
  if (!c) return *why_not = c.reason, nullptr;
  return make(*c.conf, w, b, code_key);
}

ConfOr<DwConf> dw_conf(const ConvProblem& p, const ConvImpl& impl, Isa isa) {
  return init_dw_conf(p, impl, isa);  // its weight mode is the cost model's choice
}
ConfOr<Gemm1x1Conf> gemm1x1_conf(const ConvProblem& p, const ConvImpl& impl, Isa isa) {
  return init_gemm1x1_conf(p, impl, isa);  // nothing forced
}

// f32: im2col / im2row + GEMM (jit/im2col/); int8 (ConvImpl::int8, QDQ models): the gemm1x1
// microkernel over an im2row packing (conv_gemm1x1_conf.h).
std::unique_ptr<Kernel> im2col_create(const ConvProblem& p, const ConvImpl& impl, Isa isa,
                                      const Tensor& w, const Tensor* b, const std::string& key,
                                      std::string* why_not) {
  if (impl.int8)
    return conf_then_kernel<gemm1x1_conf, make_gemm1x1_kernel>(p, impl, isa, w, b, key, why_not);
  return conf_then_kernel<im2col::init_im2col_conf, im2col::make_im2col_kernel>(p, impl, isa, w, b,
                                                                                key, why_not);
}

// f32: the grouped family's kernels (jit/grouped/); int8 (groups filling whole channel blocks,
// alone or merged: int8_group_merge): the gemm1x1 microkernel reading the windows in place,
// each oc group its conv group's K.
std::unique_ptr<Kernel> grouped_create(const ConvProblem& p, const ConvImpl& impl, Isa isa,
                                       const Tensor& w, const Tensor* b, const std::string& key,
                                       std::string* why_not) {
  if (impl.int8)
    return conf_then_kernel<gemm1x1_conf, make_gemm1x1_kernel>(p, impl, isa, w, b, key, why_not);
  return conf_then_kernel<init_grouped_conf, make_grouped_kernel>(p, impl, isa, w, b, key, why_not);
}

// What a kernel's code is a function of (shared_code.h): the conf's inputs.
std::string code_key(const ConvProblem& p, const ConvImpl& impl, Isa isa) {
  return p.str() + '|' + conv_family_name(impl.family) + '|' + layout_name(impl.src) + '|' +
         layout_name(impl.dst) + "|u" + std::to_string(impl.ur_w) + "o" +
         std::to_string(impl.oc_blocks) + '|' + isa_name(isa) + "|L1d" +
         std::to_string(impl.cache.l1d) + "L2" + std::to_string(impl.cache.l2) + "L3" +
         std::to_string(impl.cache.l3) + (impl.int8 ? "|int8" : "") +
         (impl.int8 && impl.int8->x_zero != 0 ? "|xz" : "") +  // (depthwise subtracts it)
         (impl.int8 && impl.int8->residual && layout_u8(impl.dst)
              ? "|res" + std::to_string(impl.int8->residual->scale) + "," +
                    std::to_string(impl.int8->residual->zero)
              : "");
}

// Rows in the order candidates are offered (ties in the solver go to the earlier one).
const std::vector<ConvFamilyRow>& rows() {
  static const std::vector<ConvFamilyRow> r = {
      {ConvFamily::depthwise, "depthwise", [](const ConvProblem& p) { return p.depthwise(); },
       [](const ConvProblem&, Layout b) {
         return Pairs{{b, b}, {Layout::nhwc, Layout::nhwc}};
       },
       conf_then_kernel<dw_conf, make_dw_kernel>,
       [](const ConvProblem&, Layout, Layout) { return 0.25; },
       /*memory_bound=*/true, /*fixed_baseline=*/true, /*transform_error=*/0,
       [](const ConvProblem&) {
         // (f32 arithmetic: bf16 on either side only halves the bytes moved.)
         const Layout h = Layout::nChw16c_bf16, f = Layout::nChw16c;
         return Pairs{{h, h}, {h, f}, {f, h}};
       }},
      {ConvFamily::grouped, "grouped",
       [](const ConvProblem& p) { return p.groups > 1 && !p.depthwise(); },
       [](const ConvProblem&, Layout b) {
         return Pairs{{b, b}};
       },
       grouped_create,
       [](const ConvProblem& p, Layout s, Layout) {
         return grouped_efficiency(p, layout_block(s), layout_bf16(s));
       },
       false, /*fixed_baseline=*/true, /*transform_error=*/0, bf16_pairs},
      {ConvFamily::gemm1x1, "gemm1x1", one_by_one,
       [](const ConvProblem&, Layout b) {
         return Pairs{{b, b}, {Layout::nhwc, Layout::nhwc}};
       },
       conf_then_kernel<gemm1x1_conf, make_gemm1x1_kernel>,
       [](const ConvProblem& p, Layout s, Layout d) {
         // (bf16: twice the multiply-adds per instruction; measured ~1.7x the f32 rate.)
         return (s == Layout::nhwc ? 0.7 : 0.8) * lanes(p, s, d) * (layout_bf16(s) ? 1.6 : 1.0);
       },
       false, false, /*transform_error=*/0, bf16_pairs},
      {ConvFamily::direct, "direct", dense,
       [](const ConvProblem& p, Layout b) {
         // First layers with few input channels read NCHW directly (no padded channel blocks),
         // and write NHWC too where the next layers run NHWC (whole channel vectors only).
         if (p.ic > 8) return Pairs{{b, b}};
         if (layout_bf16(b) || p.oc % layout_block(b)) return Pairs{{b, b}, {Layout::nchw, b}};
         return Pairs{{b, b}, {Layout::nchw, b}, {Layout::nchw, Layout::nhwc}};
       },
       conf_then_kernel<init_direct_conf, make_direct_kernel>,
       [](const ConvProblem& p, Layout s, Layout d) {
         return s == Layout::nchw ? 0.6 * double(p.oc) / double(round_up(p.oc, layout_block(d)))
                                  : 0.75 * lanes(p, s, d) * (layout_bf16(s) ? 1.6 : 1.0);
       },
       false, true, /*transform_error=*/0, bf16_pairs},
      {ConvFamily::winograd4, "winograd4", winograd_shape,
       [](const ConvProblem&, Layout b) {
         return Pairs{{b, b}};
       },
       conf_then_kernel<init_wino_conf, make_wino_kernel>,
       [](const ConvProblem& p, Layout, Layout) { return wide(p) ? 1.6 : 0.4; }, false, false,
       /*transform_error=*/1.0},
      {ConvFamily::winograd2, "winograd2", winograd_shape,
       [](const ConvProblem&, Layout b) {
         return Pairs{{b, b}};
       },
       conf_then_kernel<init_wino_conf, make_wino_kernel>,
       [](const ConvProblem& p, Layout, Layout) { return wide(p) ? 1.2 : 0.4; }, false, false,
       /*transform_error=*/0.1},
      {ConvFamily::winograd1d, "winograd1d", winograd1d_shape,
       [](const ConvProblem&, Layout b) {
         return Pairs{{b, b}};
       },
       conf_then_kernel<init_wino_conf, make_wino_kernel>,
       [](const ConvProblem& p, Layout, Layout) {
         // Multiplies saved: r x m outputs per alpha = 8 GEMMs (1.75x for 7 taps).
         const int64_t r = std::max(p.kh, p.kw);
         return wide(p) ? 0.55 * double(r * (kWino1dAlpha - r + 1)) / kWino1dAlpha : 0.4;
       },
       // (Inception-v3's layers: ~1e-6 over the direct sums' error, F4's adds ~7e-6:
       // tests/jit/test_winograd.cpp.)
       false, false, /*transform_error=*/0.15},
      {ConvFamily::winograd5x5, "winograd5x5", winograd5x5_shape,
       [](const ConvProblem&, Layout b) {
         return Pairs{{b, b}};
       },
       conf_then_kernel<init_wino_conf, make_wino_kernel>,
       // (25 x 4 multiplies a tile in 36 GEMMs: 2.8x fewer.)
       [](const ConvProblem& p, Layout, Layout) { return wide(p) ? 1.5 : 0.4; }, false, false,
       // (AlexNet's / Inception-v3's 5x5 layers: ~2e-6 over the direct sums', F4's ~7e-6.)
       /*transform_error=*/0.4},
      {ConvFamily::winograd_s2, "winograd_s2", winograd_s2_shape,
       [](const ConvProblem&, Layout b) {
         return Pairs{{b, b}};
       },
       conf_then_kernel<init_wino_conf, make_wino_kernel>,
       // (81 / 49 = 1.65x fewer multiplies; kiln_kernel_bench: 1.0-1.2x the FMA peak from 25
       // tiles (15 x 15 outputs) up, 0.6x on ResNet-50's 7 x 7 at batch 1, where each U element
       // (2.8x the weights, streaming from L3) serves 9 tiles.)
       [](const ConvProblem& p, Layout, Layout) {
         const int64_t tiles = p.n * ((p.oh + 2) / 3) * ((p.ow + 2) / 3);
         return !wide(p) ? 0.4 : tiles >= 25 ? 1.1 : 0.6;
       },
       false, false,
       // Its transforms' coefficients are 0, +-1 and 1/2: on ResNet-50's stride-2 layers it
       // differs from the f32 reference as much as the direct family does (tests/jit/
       // test_winograd.cpp), so the accuracy guard, which cannot tell it from exact rounding,
       // does not weigh it, and `strict` allows it.
       /*transform_error=*/0, nullptr, /*integer_exact=*/false},
      {ConvFamily::im2col, "im2col", im2col_shape,
       [](const ConvProblem& p, Layout) {
         if (!dense(p)) return Pairs{{Layout::nhwc, Layout::nhwc}};  // a GEMM per conv group
         return Pairs{{Layout::nhwc, Layout::nhwc}, {Layout::nchw, Layout::nchw}};
       },
       im2col_create,
       [](const ConvProblem& p, Layout, Layout) {
         const double e = p.kh * p.kw == 1 ? 0.6 : 0.45;
         if (dense(p)) return e;
         const int64_t ocg = p.oc / p.groups;  // a group's last vector may be partly empty
         return e * double(ocg) / double(round_up(ocg, 16));
       },
       false, false},
  };
  return r;
}

// Rows by ConvFamily value, checked once: every value has exactly one row.
const std::array<const ConvFamilyRow*, kNumConvFamilies>& by_id() {
  static const auto table = [] {
    std::array<const ConvFamilyRow*, kNumConvFamilies> t{};
    for (const ConvFamilyRow& r : rows()) {
      const int i = int(r.id);
      if (i < 0 || i >= kNumConvFamilies || t[size_t(i)])
        fail(Code::internal,
             std::string("conv family table: bad or repeated row '") + r.name + "'");
      t[size_t(i)] = &r;
    }
    for (const ConvFamilyRow* r : t)
      if (!r) fail(Code::internal, "conv family table: a ConvFamily value has no row");
    return t;
  }();
  return table;
}

}  // namespace

const std::vector<ConvFamilyRow>& conv_families() {
  return rows();
}

const ConvFamilyRow& conv_family(ConvFamily f) {
  const int i = int(f);
  if (i < 0 || i >= kNumConvFamilies) fail(Code::invalid_argument, "unknown conv family");
  return *by_id()[size_t(i)];
}

const char* conv_family_name(ConvFamily f) {
  const int i = int(f);
  return i >= 0 && i < kNumConvFamilies ? by_id()[size_t(i)]->name : "?";
}

std::optional<ConvFamily> parse_conv_family(const std::string& name) {
  for (const ConvFamilyRow& r : rows())
    if (name == r.name) return r.id;
  return std::nullopt;
}

namespace convjit {

std::string conv_kernel_name(const char* family, Layout src, Layout dst,
                             const std::string& blocking, Isa isa, bool int8) {
  return std::string("conv_") + family + "_" + (int8 ? "int8" : layout_elem_name(src)) + "_" +
         layout_name(src) + "_to_" + layout_name(dst) + "_" + blocking + "__" + isa_name(isa);
}

}  // namespace convjit

std::unique_ptr<Kernel> create_conv_kernel(const ConvProblem& p, const ConvImpl& impl, Isa isa,
                                           const Tensor& weights, const Tensor* bias,
                                           std::string* why_not) {
  std::string why;
  const int64_t g = p.groups > 0 ? p.groups : 1;
  if (weights.dtype() != DType::f32 || weights.shape() != Shape{p.oc, p.ic / g, p.kh, p.kw})
    return decline(why_not, "weights are not f32 " + shape_str({p.oc, p.ic / g, p.kh, p.kw}));
  if (p.bias != (bias != nullptr))
    return decline(why_not, "bias presence does not match the problem");
  if (bias && (bias->dtype() != DType::f32 || bias->shape() != Shape{p.oc}))
    return decline(why_not, "bias is not f32 [" + std::to_string(p.oc) + "]");
  const int f = int(impl.family);
  if (f < 0 || f >= kNumConvFamilies) return decline(why_not, "unknown conv family");
  auto k = by_id()[size_t(f)]->create(p, impl, isa, weights, bias, code_key(p, impl, isa), &why);
  return k ? std::move(k) : decline(why_not, why);
}

bool conv_family_runtime_weights(ConvFamily f, const ConvProblem& p) {
  // (im2col: any groups, depthwise too — with constant weights other families serve the groups
  // im2col_shape leaves out; here the alternative is the scalar reference.)
  return f == ConvFamily::im2col || (f == ConvFamily::depthwise && p.depthwise()) ||
         (f == ConvFamily::direct && dense(p));
}

std::unique_ptr<Kernel> create_conv_kernel_runtime_weights(const ConvProblem& p,
                                                           const ConvImpl& impl, Isa isa,
                                                           std::string* why_not) {
  if (!conv_family_runtime_weights(impl.family, p) || impl.int8 || layout_bf16(impl.src) ||
      layout_bf16(impl.dst))
    return decline(why_not, std::string("the ") + conv_family_name(impl.family) +
                                (impl.int8 ? " int8" : "") +
                                " family packs its weights at load for this problem (computed "
                                "weights: im2col, depthwise f32)");
  if (impl.family == ConvFamily::depthwise) {
    auto c = init_dw_conf(p, impl, isa);
    if (!c) return decline(why_not, c.reason);
    return make_dw_kernel_runtime_weights(*c.conf, code_key(p, impl, isa));
  }
  if (impl.family == ConvFamily::direct) {
    auto c = init_direct_conf(p, impl, isa);
    if (!c) return decline(why_not, c.reason);
    return make_direct_kernel_runtime_weights(*c.conf, code_key(p, impl, isa));
  }
  auto c = im2col::init_im2col_conf(p, impl, isa);
  if (!c) return decline(why_not, c.reason);
  return im2col::make_im2col_kernel_runtime_weights(*c.conf, code_key(p, impl, isa));
}

}  // namespace kiln
