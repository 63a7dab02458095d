#include "jit/winograd/winograd_conf.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "graph/error.h"
#include "jit/conv/conv_families.h"  // conv_kernel_name

namespace kiln::convjit {
namespace {

// Tiles per group. Each U element is used once per tile of a group; V and M cost scratch.
// By default a group's V and M (of one chunk) may fill L2 (half of it measured slower: bench/
// NOTES.md, "Cache budgets from the hardware model"); when U does not fit L2 anyway (late
// layers: U is 4x the conv's weights for F4) it streams from L3 once per group, and groups
// grow up to kBigGroup tiles (V within kVBudget, M of a chunk within half of L2) so that U is
// read less often: V then comes from L3 too, once per slice (T / slice width of U's traffic).
int64_t group_budget(const CacheSizes& c) {
  return c.l2;
}
int64_t m_budget(const CacheSizes& c) {
  return c.l2 / 2;
}
constexpr int64_t kBigGroup = 64;
constexpr int64_t kVBudget = 8 * 1024 * 1024;  // an L3 share, whatever the L3's total size
// L1 share of the U rows one GEMM K chunk sweeps: a third (V rows and M share the rest).
int64_t u_chunk_bytes(const CacheSizes& c) {
  return c.l1d / 3;
}
// Transformed weights above this are refused (alpha^2 / 9 = 4x the conv's weights for m = 4).
constexpr int64_t kMaxWeightBytes = int64_t(1) << 30;

// F(2x2, 3x3): points 0, 1, -1, inf.
constexpr double kBt2[16] = {1, 0,  -1, 0,  //
                             0, 1,  1,  0,  //
                             0, -1, 1,  0,  //
                             0, 1,  0,  -1};
constexpr double kG2[12] = {1, 0, 0, 0.5, 0.5, 0.5, 0.5, -0.5, 0.5, 0, 0, 1};
constexpr double kAt2[8] = {1, 1, 1,  0,  //
                            0, 1, -1, -1};

// F(4x4, 3x3): points 0, 1, -1, 2, -2, inf (Lavin & Gray).
constexpr double kBt4[36] = {4, 0,  -5, 0,  1, 0,  //
                             0, -4, -4, 1,  1, 0,  //
                             0, 4,  -4, -1, 1, 0,  //
                             0, -2, -1, 2,  1, 0,  //
                             0, 2,  -1, -2, 1, 0,  //
                             0, 4,  0,  -5, 0, 1};
constexpr double kG4[18] = {1.0 / 4,  0,         0,         //
                            -1.0 / 6, -1.0 / 6,  -1.0 / 6,  //
                            -1.0 / 6, 1.0 / 6,   -1.0 / 6,  //
                            1.0 / 24, 1.0 / 12,  1.0 / 6,   //
                            1.0 / 24, -1.0 / 12, 1.0 / 6,   //
                            0,        0,         1};
constexpr double kAt4[24] = {1, 1, 1,  1, 1,  0,  //
                             0, 1, -1, 2, -2, 0,  //
                             0, 1, 1,  4, 4,  0,  //
                             0, 1, -1, 8, -8, 1};

// Registers of a GEMM register block: accumulators, the nr weight vectors, one broadcast.
bool gemm_fits(Isa isa, int mr, int nr) {
  return mr * nr + nr + 1 <= vector_regs(isa);
}

// Estimated cycles of the GEMMs of one group of `tiles` tiles (per input channel and xi).
double group_cost(Isa isa, int64_t tiles, int mr, int nr) {
  const int64_t full = tiles / mr, tail = tiles % mr;
  return double(full) * (block_step_cycles(isa, mr, nr, true) + 0.5) +
         (tail ? block_step_cycles(isa, int(tail), nr, true) + 0.5 : 0.0);
}

}  // namespace

namespace {

// Toom-Cook F(m, r) on the first alpha - 1 of the points 0, 1, -1, 2, -2, 1/2, -1/2 and
// infinity, alpha = m + r - 1 <= 8. Evaluation of a polynomial of n coefficients at the
// points: row j = (p_j^0 .. p_j^(n-1)), the last (infinity) row picks the leading
// coefficient. Linear convolution is V^-1 diag(V_r h) V_m x, so correlation (its transpose)
// is V_m^T diag(V_r g) V^-T d: A^T = V_m^T, G = V_r, B^T = V^-T.
struct CookToom {
  static constexpr int kMax = 8;
  int m = 0, r = 0, alpha = 0;
  std::array<double, kMax * kMax> bt{};
  std::array<double, kMax * kMax> g{};   // [alpha][r]
  std::array<double, kMax * kMax> at{};  // [m][alpha]
};

CookToom make_cook_toom(int m, int r) {
  constexpr double pts[CookToom::kMax - 1] = {0, 1, -1, 2, -2, 0.5, -0.5};
  CookToom mt;
  mt.m = m;
  mt.r = r;
  const int A = mt.alpha = m + r - 1;
  auto eval = [&](int j, int n, int k) {  // row j, column k of the n-coefficient evaluation
    return j == A - 1 ? (k == n - 1 ? 1.0 : 0.0) : std::pow(pts[j], k);
  };
  // V^-1 by Gauss-Jordan on [V | I] (entries powers of 2 and their sums: exact enough; B^T's
  // entries are then rounded to the multiples of 1/64 they are).
  double aug[CookToom::kMax][2 * CookToom::kMax];
  for (int j = 0; j < A; ++j)
    for (int k = 0; k < 2 * A; ++k) aug[j][k] = k < A ? eval(j, A, k) : (k - A == j ? 1 : 0);
  for (int c = 0; c < A; ++c) {
    int piv = c;
    for (int j = c; j < A; ++j)
      if (std::fabs(aug[j][c]) > std::fabs(aug[piv][c])) piv = j;
    std::swap(aug[c], aug[piv]);
    const double d = aug[c][c];
    for (int k = 0; k < 2 * A; ++k) aug[c][k] /= d;
    for (int j = 0; j < A; ++j)
      if (j != c && aug[j][c] != 0) {
        const double f = aug[j][c];
        for (int k = 0; k < 2 * A; ++k) aug[j][k] -= f * aug[c][k];
      }
  }
  // B^T row j = column j of V^-1 scaled to its smallest entry 1 (F(4x4, 3x3)'s integer rows);
  // G row j inversely.
  for (int j = 0; j < A; ++j) {
    double s = std::numeric_limits<double>::max();
    for (int l = 0; l < A; ++l)
      if (std::fabs(aug[l][A + j]) > 1e-12) s = std::min(s, std::fabs(aug[l][A + j]));
    for (int l = 0; l < A; ++l) mt.bt[size_t(j * A + l)] = std::round(aug[l][A + j] / s * 64) / 64;
    for (int k = 0; k < r; ++k) mt.g[size_t(j * r + k)] = eval(j, r, k) * s;
  }
  // With F(4x4, 3x3)'s points, its rows' signs too: the generators' hard-coded B^T is kBt4.
  for (int j = 0; A == 6 && j < A; ++j)
    if (mt.bt[size_t(j * A + 1)] * kBt4[j * A + 1] < 0 || mt.bt[size_t(j * A)] * kBt4[j * A] < 0)
      for (int l = 0; l < A; ++l) {
        mt.bt[size_t(j * A + l)] = -mt.bt[size_t(j * A + l)];
        if (l < r) mt.g[size_t(j * r + l)] = -mt.g[size_t(j * r + l)];
      }
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < A; ++j) mt.at[size_t(i * A + j)] = eval(j, m, i);
  return mt;
}

// Stride 2, 3 taps (see WinoMatrices): F(3, 2) on the even pixels and taps, the odd ones as is.
struct StrideTwo {
  static constexpr int kA = 7, kM = 3, kR = 3;
  std::array<double, kA * kA> bt{};
  std::array<double, kA * kR> g{};
  std::array<double, kM * kA> at{};
};

StrideTwo make_stride_two() {
  const CookToom f = make_cook_toom(3, 2);  // alpha 4
  StrideTwo s;
  constexpr int A = StrideTwo::kA, R = StrideTwo::kR;
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) s.bt[size_t(i * A + 2 * j)] = f.bt[size_t(i * 4 + j)];
    for (int k = 0; k < 2; ++k) s.g[size_t(i * R + 2 * k)] = f.g[size_t(i * 2 + k)];
    for (int o = 0; o < StrideTwo::kM; ++o) s.at[size_t(o * A + i)] = f.at[size_t(o * 4 + i)];
  }
  for (int o = 0; o < StrideTwo::kM; ++o) {
    s.bt[size_t((4 + o) * A + 2 * o + 1)] = 1;
    s.g[size_t((4 + o) * R + 1)] = 1;
    s.at[size_t(o * A + 4 + o)] = 1;
  }
  return s;
}

// WinoConf::planes / xi_of / plane_of: along each axis, a transformed value's class is the
// first one with the same row of G (an axis of one value: its own); planes are the distinct
// (row class, column class) pairs in order of first appearance, their members numbered
// consecutively in (y, x) order.
void share_planes(WinoConf& c) {
  const WinoMatrices mt = c.matrices();
  auto classes = [&](int a) {
    std::vector<int> cls(static_cast<size_t>(a));
    for (int i = 0; i < a; ++i) {
      cls[size_t(i)] = i;
      for (int j = 0; j < i; ++j)
        if (std::equal(mt.g + i * mt.r, mt.g + (i + 1) * mt.r, mt.g + j * mt.r)) {
          cls[size_t(i)] = j;
          break;
        }
    }
    return cls;
  };
  const std::vector<int> cy = classes(c.ah), cx = classes(c.aw);
  c.xi_of.assign(size_t(c.a2), -1);
  c.planes.clear();
  c.plane_of.clear();
  int next = 0;
  for (int y = 0; y < c.ah; ++y)
    for (int x = 0; x < c.aw; ++x) {
      if (c.xi_of[size_t(y * c.aw + x)] >= 0) continue;  // a member of an earlier plane
      WinoConf::Plane pl{next, 0};
      for (int yy = y; yy < c.ah; ++yy)
        for (int xx = 0; xx < c.aw; ++xx)
          if (cy[size_t(yy)] == cy[size_t(y)] && cx[size_t(xx)] == cx[size_t(x)]) {
            c.xi_of[size_t(yy * c.aw + xx)] = next++;
            ++pl.count;
            c.plane_of.push_back(int(c.planes.size()));
          }
      c.planes.push_back(pl);
    }
}

}  // namespace

WinoMatrices wino_matrices(int m, int r, int stride) {
  if (stride == 2 && m == StrideTwo::kM && r == StrideTwo::kR) {
    static const StrideTwo s2 = make_stride_two();
    return {m, StrideTwo::kA, r, s2.bt.data(), s2.g.data(), s2.at.data()};
  }
  if (stride != 1)
    fail(Code::internal, "winograd: no transforms for stride " + std::to_string(stride));
  if (r == 3 && m == 2) return {2, 4, 3, kBt2, kG2, kAt2};
  if (r == 3 && m == 4) return {4, 6, 3, kBt4, kG4, kAt4};
  // F(2x2, 5x5) and the 1-D family's F(9 - r, r).
  static const std::array<CookToom, 4> all = {make_cook_toom(2, 5), make_cook_toom(6, 3),
                                              make_cook_toom(4, 5), make_cook_toom(2, 7)};
  for (const CookToom& mt : all)
    if (mt.m == m && mt.r == r) return {m, mt.alpha, r, mt.bt.data(), mt.g.data(), mt.at.data()};
  fail(Code::internal,
       "winograd: no transforms for F(" + std::to_string(m) + ", " + std::to_string(r) + ")");
}

std::string WinoConf::blocking_str() const {
  std::string s = "t" + std::to_string(tpg) + "mr" + std::to_string(mr) + "nr" +
                  std::to_string(nr) + (slices > 1 ? "s" + std::to_string(slice) : "") +
                  (k_chunks(k_max()) > 1 ? "kc" + std::to_string(kc) : "");
  if (p.dh > 1 || p.dw > 1)
    s.append("d").append(std::to_string(p.dh)).append("x").append(std::to_string(p.dw));
  return s;
}

WinoMatrices WinoConf::matrices() const {
  return wino_matrices(m, r, int(stride()));
}

std::pair<int64_t, int64_t> WinoConf::chunk_blocks(int64_t c0, int64_t c1) const {
  int64_t lo = icb, hi = 0;
  for (int64_t c = c0; c < c1; ++c) {
    lo = std::min(lo, chunk_k0[size_t(c)] / simd);
    hi = std::max(hi, (chunk_k0[size_t(c)] + chunk_k[size_t(c)] + simd - 1) / simd);
  }
  return {lo, hi};
}

std::string WinoConf::name() const {
  std::string blocking = blocking_str();
  if (one_d)
    blocking = (along_w ? "w" : "h") + std::to_string(r) +
               (alpha != kWino1dAlpha ? "a" + std::to_string(alpha) : "") + blocking;
  return conv_kernel_name(conv_family_name(family()), layout, layout, blocking, isa);
}

ConfOr<WinoConf> init_wino_conf(const ConvProblem& p, const ConvImpl& impl, Isa isa) {
  using R = ConfOr<WinoConf>;
  const bool one_d = impl.family == ConvFamily::winograd1d,
             k5 = impl.family == ConvFamily::winograd5x5,
             s2 = impl.family == ConvFamily::winograd_s2;
  if (impl.family != ConvFamily::winograd2 && impl.family != ConvFamily::winograd4 && !one_d &&
      !k5 && !s2)
    return R::no("not a winograd family");
  ConvProblem dense = p;  // check_common takes groups of 1; the groups are checked below
  dense.groups = 1;
  if (std::string why = check_common(dense, isa); !why.empty()) return R::no(why);
  if (p.groups < 1 || p.ic % p.groups || p.oc % p.groups)
    return R::no("groups do not divide the channels");
  if (one_d) {
    if (p.kh != 1 && p.kw != 1) return R::no("winograd1d needs a 1 x r or r x 1 kernel");
    const int64_t r = std::max(p.kh, p.kw);
    if (r != 3 && r != 5 && r != 7) return R::no("winograd1d needs 3, 5 or 7 taps");
  } else if (k5 && (p.kh != 5 || p.kw != 5)) {
    return R::no("winograd5x5 needs a 5x5 kernel");
  } else if (!k5 && (p.kh != 3 || p.kw != 3)) {
    return R::no("winograd needs a 3x3 kernel");
  }
  if (s2) {
    if (p.sh != 2 || p.sw != 2) return R::no("winograd_s2 needs stride 2");
    if (p.dh != 1 || p.dw != 1) return R::no("winograd_s2 needs dilation 1");
  } else if (p.sh != 1 || p.sw != 1) {
    return R::no("winograd needs stride 1");
  }
  if (p.dh < 1 || p.dw < 1) return R::no("winograd: dilation below 1");
  // The transforms load and store one channel-block vector per pixel, and the output
  // transform stores whole vectors: both sides must be the isa's blocked layout.
  if (impl.src != impl.dst) return R::no("winograd needs src and dst in the same layout");
  if (std::string why = check_blocked(impl.src, isa, "src"); !why.empty())
    return R::no("winograd: " + why);
  // Any padding works (patches touching it are copied into a zero-filled buffer); this only
  // keeps the tile arithmetic comfortably inside 32 bits.
  if (std::max({p.pt, p.pl, p.pb, p.pr}) > 1024) return R::no("padding above 1024");

  WinoConf c;
  c.p = p;
  c.isa = isa;
  c.simd = simd_width(isa);
  c.layout = impl.src;
  c.one_d = one_d;
  if (one_d) {
    // (1 x r: every kernel row is the same, a dilation along H does nothing: one phase.)
    c.along_w = p.kh == 1;
    c.r = int(c.along_w ? p.kw : p.kh);
    (c.along_w ? c.p.dh : c.p.dw) = 1;
    // 8 points, or 6 (F(4, 3), F(2, 5)) where that costs fewer transformed values over the
    // axis: alpha x tiles (Inception's 1x3 on 8 columns: 2 tiles of 4 exactly, not 2 of 6).
    const int64_t d = c.along_w ? p.dw : p.dh, len = ((c.along_w ? p.ow : p.oh) + d - 1) / d;
    auto cost = [&](int alpha) { return alpha * ((len + alpha - c.r) / (alpha - c.r + 1)); };
    c.alpha = c.r < 7 && cost(6) <= cost(kWino1dAlpha) ? 6 : kWino1dAlpha;
    c.m = c.alpha - c.r + 1;
    c.mh = c.along_w ? 1 : c.m;
    c.mw = c.along_w ? c.m : 1;
    c.ah = c.along_w ? 1 : c.alpha;
    c.aw = c.along_w ? c.alpha : 1;
  } else {
    c.s2 = s2;
    c.r = k5 ? 5 : 3;
    c.m = s2 ? 3 : impl.family == ConvFamily::winograd4 ? 4 : 2;
    c.alpha = s2 ? c.matrices().alpha : c.m + c.r - 1;
    c.mh = c.mw = c.m;
    c.ah = c.aw = c.alpha;
  }
  c.a2 = c.ah * c.aw;
  share_planes(c);
  c.icb = (p.ic + c.simd - 1) / c.simd;
  c.ocb = (p.oc + c.simd - 1) / c.simd;
  c.tiles_h = ((p.oh + c.p.dh - 1) / c.p.dh + c.mh - 1) / c.mh;
  c.tiles_w = ((p.ow + c.p.dw - 1) / c.p.dw + c.mw - 1) / c.mw;
  const int64_t icg = p.ic / p.groups, ocg = p.oc / p.groups;

  // Oc vectors per register block (= per chunk): 64 channels on AVX-512, 16 on AVX2. Grouped:
  // where groups are whole vectors, the most that divide a group's vectors (a chunk reads one
  // group's channels); otherwise one vector (the fewest channels of other groups read).
  c.nr = impl.oc_blocks > 0 ? impl.oc_blocks : (isa == Isa::avx512 ? 4 : 2);
  c.nr = int(std::min<int64_t>(c.nr, c.ocb));
  if (p.groups > 1 && impl.oc_blocks <= 0) {
    if (icg % c.simd == 0 && ocg % c.simd == 0)
      while (ocg / c.simd % c.nr) --c.nr;
    else
      c.nr = 1;
  }
  if (!gemm_fits(isa, 1, c.nr)) return R::no("winograd: oc_blocks too large for the registers");
  c.chunks = (c.ocb + c.nr - 1) / c.nr;
  c.nr_last = int(c.ocb - (c.chunks - 1) * c.nr);
  // Each chunk's K: its output channels' groups' input channels, from the first one's vector.
  c.u_chunk.assign(1, 0);
  for (int64_t ch = 0; ch < c.chunks; ++ch) {
    const int64_t oc0 = ch * c.nr * c.simd,
                  oc1 = std::min(p.oc, oc0 + int64_t(c.chunk_vectors(ch)) * c.simd);
    const int64_t k0 = oc0 / ocg * icg / c.simd * c.simd,
                  k1 = std::min(p.ic, round_up(((oc1 - 1) / ocg + 1) * icg, c.simd));
    c.chunk_k0.push_back(k0);
    c.chunk_k.push_back(k1 - k0);
    c.u_chunk.push_back(c.u_chunk.back() + (k1 - k0) * c.chunk_vectors(ch) * c.simd);
  }
  if (c.u_floats() * 4 > kMaxWeightBytes)
    return R::no("winograd: transformed weights would exceed 1 GiB");

  // Tiles per group: the most the budgets allow, then evened out over the groups. Kernel tiles
  // for 2 threads: a single group is split into 2 slices of chunks (grouped: a slice per
  // chunk, as a slice transforms only the input its chunks read), several groups into an
  // even number of groups where that costs little.
  const int64_t total = c.tiles_total();
  const int64_t v_tile = int64_t(c.a2) * c.icb * c.simd * 4,
                m_tile = int64_t(c.a2) * c.nr * c.simd * 4;
  int64_t t_cap = group_budget(impl.cache) / (v_tile + m_tile);
  if (c.u_floats() * 4 > impl.cache.l2)
    t_cap =
        std::max(t_cap, std::min({kBigGroup, kVBudget / v_tile, m_budget(impl.cache) / m_tile}));
  const int64_t t_max = std::clamp<int64_t>(t_cap, 1, total);
  const int64_t g0 = (total + t_max - 1) / t_max;
  c.groups = g0;
  c.slices = 1;
  if (g0 == 1 && c.chunks >= 2) {
    c.slices = p.groups > 1 || c.chunks % 2 ? c.chunks : 2;
  } else {
    for (int64_t g = g0; g <= std::min(total, g0 + 3); ++g) {
      const int64_t t = (total + g - 1) / g, gg = (total + t - 1) / t;
      if (gg % 2 == 0 || gg >= 32) {
        c.groups = gg;
        break;
      }
    }
  }
  c.tpg = (total + c.groups - 1) / c.groups;
  c.groups = (total + c.tpg - 1) / c.tpg;
  c.slice = (c.chunks + c.slices - 1) / c.slices;
  c.slices = (c.chunks + c.slice - 1) / c.slice;

  // Tiles per register block: the cheapest over the groups (full groups and the last one).
  if (impl.ur_w > 0) {
    c.mr = int(std::min<int64_t>(impl.ur_w, c.tpg));
    if (!gemm_fits(isa, c.mr, c.nr))
      return R::no("winograd: ur_w x oc_blocks too large for the registers");
  } else {
    double best = std::numeric_limits<double>::max();
    for (int mr = 1; mr <= c.tpg && gemm_fits(isa, mr, c.nr); ++mr) {
      const double cost = double(c.groups - 1) * group_cost(isa, c.tpg, mr, c.nr) +
                          group_cost(isa, c.last_group_tiles(), mr, c.nr);
      if (cost <= best) {
        best = cost;
        c.mr = mr;
      }
    }
  }
  // K chunk: U rows of one oc chunk within u_chunk_bytes, when the group has several register
  // blocks to share them (one block reads every U row once anyway).
  const int64_t u_row = int64_t(c.nr) * c.simd * 4;
  c.kc = std::max<int64_t>(c.simd, u_chunk_bytes(impl.cache) / u_row / c.simd * c.simd);
  if (c.tpg <= c.mr || c.kc >= c.k_max()) c.kc = c.k_max();
  return c;
}

}  // namespace kiln::convjit
