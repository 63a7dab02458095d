// The depthwise family against the reference Conv (runtime/ref with group = C) on both ISA
// paths and both layouts (blocked and NHWC), over swept shapes. Every operand sits next to a
// PROT_NONE page — once ending at it, once starting right after one — so a read or write one
// element outside a tensor faults, and the fault is turned into a test failure.
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "jit/dw/dw_conf.h"
#include "jit/dw/dw_kernel.h"
#include "test_conv_util.h"
#include "test_segv.h"

namespace kiln::convtest {
namespace {

using K = PostOp::Kind;
using convjit::DwWeights;

// The operands of one case in NCHW / plain form; weights are [C, 1, kh, kw].
Operands make_dw_operands(const ConvProblem& p, uint64_t seed) {
  Operands o;
  o.x = random_tensor({p.n, p.ic, p.ih, p.iw}, seed);
  o.w = random_tensor({p.oc, 1, p.kh, p.kw}, seed + 1);
  o.b = random_tensor({p.oc}, seed + 2);
  uint64_t s = seed + 3;
  for (const PostOp& op : p.post) {
    if (op.kind == K::add) o.extra.push_back(random_tensor({p.n, p.oc, p.oh, p.ow}, s++));
    if (op.kind == K::scale_shift) {
      o.extra.push_back(random_tensor({p.oc}, s++, 0.5f, 1.5f));
      o.extra.push_back(random_tensor({p.oc}, s++));
    }
    if (op.kind == K::prelu) o.extra.push_back(random_tensor({p.oc}, s++, -1.f, 2.f));
  }
  return o;
}

// ---------------------------------------------------------------------------------------------
// Guarded buffers: `n` floats either ending exactly at a PROT_NONE page or starting exactly
// after one.

class Guarded {
 public:
  Guarded(const std::vector<float>& v, bool at_end) : n_(v.size()) {
    page_ = size_t(sysconf(_SC_PAGESIZE));
    pages_ = (n_ * 4 + page_ - 1) / page_ + 2;  // guard + data + guard
    void* p =
        mmap(nullptr, pages_ * page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(p != MAP_FAILED);
    base_ = static_cast<char*>(p);
    REQUIRE(mprotect(base_, page_, PROT_NONE) == 0);
    REQUIRE(mprotect(base_ + (pages_ - 1) * page_, page_, PROT_NONE) == 0);
    data_ = at_end ? reinterpret_cast<float*>(base_ + (pages_ - 1) * page_) - n_
                   : reinterpret_cast<float*>(base_ + page_);
    if (n_) std::memcpy(data_, v.data(), n_ * 4);
  }
  ~Guarded() { munmap(base_, pages_ * page_); }
  Guarded(const Guarded&) = delete;
  Guarded& operator=(const Guarded&) = delete;
  float* data() { return data_; }
  std::vector<float> copy() const { return std::vector<float>(data_, data_ + n_); }

 private:
  size_t n_, page_ = 0, pages_ = 0;
  char* base_ = nullptr;
  float* data_ = nullptr;
};

// Runs tiles [b, e); false if the kernel faulted.
bool run_guarded(const Kernel& k, const KernelArgs& a, int64_t b, int64_t e) {
  return test::runs_without_segv([&] { k.run(a, b, e); });
}

// Runs `k` with every operand guarded (at the end or the start of its mapping), tiles in two
// halves, the second first, into a NaN-filled output. Returns the output in layout `l`.
std::vector<float> run_dw(const Kernel& k, const ConvProblem& p, const Operands& o, Layout l,
                          bool at_end, float src_pad = NAN) {
  const Shape ys{p.n, p.oc, p.oh, p.ow};
  Guarded src(to_layout(o.x, l, src_pad), at_end);
  std::vector<std::unique_ptr<Guarded>> extra;
  std::vector<const float*> ins{src.data(), nullptr, nullptr};
  for (const Tensor& e : o.extra) {
    const bool residual = e.shape().size() == 4;
    extra.push_back(std::make_unique<Guarded>(
        residual ? to_layout(e, l, 0.f)
                 : std::vector<float>(e.data<float>(), e.data<float>() + e.numel()),
        at_end));
    ins.push_back(extra.back()->data());
  }
  Guarded dst(std::vector<float>(size_t(layout_elems(l, ys)), NAN), at_end);
  float* outs[] = {dst.data()};
  KernelArgs a;
  a.src = ins.data();
  a.dst = outs;
  const int64_t t = k.tiles();
  const bool ok = run_guarded(k, a, t / 2, t) && run_guarded(k, a, 0, t / 2);
  CHECK_MESSAGE(ok, "kernel touched memory outside its operands (guard "
                        << (at_end ? "after" : "before") << " each buffer)");
  return dst.copy();
}

ConvImpl dw_impl(Layout l, int ur_w = 0) {
  ConvImpl i;
  i.family = ConvFamily::depthwise;
  i.src = i.dst = l;
  i.ur_w = ur_w;
  return i;
}

Layout nhwc_or_blocked(Isa isa, bool nhwc) {
  return nhwc ? Layout::nhwc : blocked_layout(isa);
}

// Checks one kernel against the reference, guard pages after and before every buffer.
void check_kernel(const Kernel& k, const ConvProblem& p, Layout l, const Operands& o,
                  const Tensor& ref) {
  INFO("kernel " << k.name());
  const Shape ys{p.n, p.oc, p.oh, p.ow};
  for (bool at_end : {true, false}) {
    std::vector<float> got_l = run_dw(k, p, o, l, at_end);
    Tensor got(DType::f32, ys);
    convert_layout(got_l.data(), l, got.data<float>(), Layout::nchw, ys);
    std::string first;
    // The only difference from the reference is FMA vs separate multiply and add over
    // kh*kw products (see count_mismatches for the tolerance).
    const int64_t bad = count_mismatches(got, ref, p.kh * p.kw, &first);
    CHECK_MESSAGE(bad == 0, bad << " mismatches, first " << first);
  }
}

// Builds the kernel through the public factory and checks it; returns its name.
std::string check_dw(const ConvProblem& p, Isa isa, Layout l, uint64_t seed, int ur_w = 0) {
  INFO("problem " << p.str() << " isa " << isa_name(isa) << " layout " << layout_name(l));
  Operands o = make_dw_operands(p, seed);
  std::string why;
  auto k = create_conv_kernel(p, dw_impl(l, ur_w), isa, o.w, p.bias ? &o.b : nullptr, &why);
  REQUIRE_MESSAGE(k != nullptr, "kernel not created: " << why);
  check_kernel(*k, p, l, o, reference(p, o));
  return k->name();
}

ConvProblem dw_problem(Shp s, std::vector<PostOp> post = {}) {
  s.oc = s.ic;
  ConvProblem p = problem(s, std::move(post));
  p.groups = p.ic;
  return p;
}

// ---------------------------------------------------------------------------------------------

TEST_CASE("depthwise matches the reference over swept shapes (both ISAs, both layouts)") {
  const int64_t kC[] = {1, 3, 8, 16, 17, 24, 32, 40, 144};
  const int64_t kHW[] = {1, 2, 7, 14, 15, 56};
  const std::vector<std::vector<PostOp>> chains = {
      {},
      chain({op(K::relu)}),
      chain({op(K::clip, 0.f, 6.f)}),
      chain({op(K::add), op(K::relu)}),
      chain({op(K::scale_shift), op(K::add), op(K::clip, 0.f, 6.f)}),
  };
  int64_t cases = 0;
  for (Isa isa : isas())
    for (bool nhwc : {false, true}) {
      const Layout l = nhwc_or_blocked(isa, nhwc);
      uint64_t i = 0;
      for (size_t ci = 0; ci < std::size(kC); ++ci)
        for (size_t hi = 0; hi < std::size(kHW); ++hi)
          for (int64_t k : {3, 5})
            for (int64_t s : {1, 2}) {
              ++i;
              Shp sh{.ic = kC[ci], .ih = kHW[hi], .iw = kHW[(hi + ci + size_t(k)) % 6]};
              sh.kh = sh.kw = k;
              sh.sh = sh.sw = s;
              // Pads: symmetric k/2, asymmetric, or none (when the window fits the input).
              const int mode = int(i % 3);
              const int64_t h = k / 2;
              if (mode == 1) {
                sh.pt = h;
                sh.pl = 0;
                sh.pb = h - 1;
                sh.pr = k - 1;
              } else if (mode == 2 && sh.ih >= k && sh.iw >= k) {
                sh.pt = sh.pl = sh.pb = sh.pr = 0;
              } else {
                sh.pt = sh.pl = sh.pb = sh.pr = h;
              }
              // Small inputs: enough bottom/right padding for one output.
              sh.pb = std::max<int64_t>(sh.pb, k - sh.ih - sh.pt);
              sh.pr = std::max<int64_t>(sh.pr, k - sh.iw - sh.pl);
              sh.n = (i + ci + hi) % 4 == 3 ? 2 : 1;  // batch 2 across all (k, s)
              sh.bias = i % 5 != 2;
              check_dw(dw_problem(sh, chains[i % chains.size()]), isa, l, 1000 + i);
              ++cases;
            }
    }
  MESSAGE(cases << " depthwise cases checked");
}

// Computed weights (create_conv_kernel_runtime_weights): packed per run by the kernel's packer
// (check_runtime_weights), both layouts, channel tails, strides, pads, post-op chains.
TEST_CASE("depthwise with run-time weights matches the reference (both ISAs, both layouts)") {
  uint64_t seed = 7000;
  for (Isa isa : isas())
    for (bool nhwc : {false, true})
      for (int64_t c : {2, 3, 16, 17, 40, 144})
        for (int64_t k : {3, 5})
          for (int64_t s : {1, 2}) {
            Shp sh{.n = c % 2 ? 2 : 1, .ic = c, .ih = 15, .iw = 7};
            sh.kh = sh.kw = k;
            sh.sh = sh.sw = s;
            sh.pt = sh.pl = sh.pb = sh.pr = k / 2;
            sh.bias = c != 16;
            const auto post = c % 3 ? chain({op(K::scale_shift), op(K::add), op(K::relu)})
                                    : std::vector<PostOp>{};
            check_runtime_weights(dw_problem(sh, post), dw_impl(nhwc_or_blocked(isa, nhwc)), isa,
                                  seed);
            seed += 2;
          }
}

TEST_CASE("depthwise: every weight mode and forced block widths") {
  uint64_t seed = 5000;
  const std::vector<std::string> shapes = {
      "g19ic19ih11iw23_oc19oh11ow23kh3kw3sh1sw1ph1pw1",
      "mb2g33ic33ih9iw20_oc33oh5ow10kh5kw5sh2sw2pt2pl1pb2pr2",
      "g16ic16ih6iw31_oc16oh6ow16kh3kw5sh1sw2pt0pl2pb2pr2",
  };
  for (Isa isa : isas())
    for (bool nhwc : {false, true})
      for (const std::string& s : shapes)
        for (DwWeights w : {DwWeights::all, DwWeights::row, DwWeights::stream})
          for (int ur : {1, 2, 3, 4, 5, 7, 8, 12, 16, 24}) {
            const ConvProblem p = problem(s, chain({op(K::add), op(K::clip, 0.f, 6.f)}));
            const Layout l = nhwc_or_blocked(isa, nhwc);
            auto c = convjit::init_dw_conf(p, dw_impl(l, ur), isa, w);
            if (!c) {
              // Only a register shortage may refuse a forced blocking.
              CHECK_MESSAGE(c.reason.find("no register blocking fits") == 0, c.reason);
              continue;
            }
            CHECK(c.conf->weights == w);
            CHECK(c.conf->ur_w == std::min<int64_t>(ur, p.ow));
            INFO("problem " << p.str() << " isa " << isa_name(isa) << " " << layout_name(l));
            Operands o = make_dw_operands(p, seed++);
            auto k = convjit::make_dw_kernel(*c.conf, o.w, &o.b);
            check_kernel(*k, p, l, o, reference(p, o));
          }
}

TEST_CASE("depthwise: dilation, odd kernels, padding wider than the kernel") {
  uint64_t seed = 6000;
  const std::vector<std::string> shapes = {
      "g20ic20ih12iw13_oc20oh12ow13kh3kw3sh1sw1dh2dw2ph2pw2",
      "mb2g9ic9ih10iw17_oc9oh5ow8kh3kw3sh2sw2dh1dw3pt1pl3pb0pr1",
      "g17ic17ih15iw15_oc17oh15ow15kh7kw7sh1sw1ph3pw3",
      "g24ic24ih8iw9_oc24oh8ow9kh1kw1sh1sw1ph0pw0",
      "g5ic5ih6iw7_oc5oh6ow7kh1kw5sh1sw1ph0pw2",
      // Whole output rows and columns that read only padding.
      "g16ic16ih4iw5_oc16oh9ow12kh3kw3sh1sw1pt4pl5pb3pr4",
      "g3ic3ih1iw1_oc3oh3ow3kh5kw5sh2sw2ph4pw4",
      "g40ic40ih2iw3_oc40oh1ow1kh5kw3sh2sw1pt3pl0pb1pr0_nobias",
  };
  for (Isa isa : isas())
    for (bool nhwc : {false, true})
      for (const std::string& s : shapes)
        check_dw(problem(s, chain({op(K::relu)})), isa, nhwc_or_blocked(isa, nhwc), seed++);
}

// Large kernels (RepLKNet's 31 / 29 / 27 / 13, band kernels, 9x9 dilated, maps smaller than the
// kernel): the cost model streams their taps (more taps than registers); every weight mode
// where it fits must agree.
TEST_CASE("depthwise: large kernels, streamed taps") {
  uint64_t seed = 6500;
  const std::vector<std::string> shapes = {
      "g17ic17ih40iw37_oc17oh40ow37kh31kw31sh1sw1ph15pw15",
      "mb2g20ic20ih24iw24_oc20oh24ow24kh21kw21sh1sw1ph10pw10_nobias",
      "g40ic40ih7iw7_oc40oh7ow7kh13kw13sh1sw1ph6pw6",
      "g32ic32ih20iw23_oc32oh10ow12kh13kw13sh2sw2ph6pw6",
      "g24ic24ih18iw18_oc24oh18ow18kh9kw9sh1sw1dh2dw2ph8pw8",
      "g16ic16ih12iw30_oc16oh12ow30kh1kw11sh1sw1ph0pw5",
      "g16ic16ih30iw12_oc16oh30ow12kh11kw1sh1sw1ph5pw0",
      "g19ic19ih16iw16_oc19oh16ow16kh17kw17sh1sw1pt9pl3pb7pr13",
  };
  const auto post = chain({op(K::scale_shift), op(K::add), op(K::relu)});
  for (Isa isa : isas())
    for (bool nhwc : {false, true})
      for (const std::string& s : shapes) {
        const ConvProblem p = problem(s, post);
        const Layout l = nhwc_or_blocked(isa, nhwc);
        const std::string name = check_dw(p, isa, l, seed++);
        // A kernel row wider than the registers leaves only streamed taps.
        if (p.kw + 2 > (isa == Isa::avx512 ? 32 : 16))
          CHECK_MESSAGE(name.find("ws__") != std::string::npos, name);
        for (DwWeights w : {DwWeights::all, DwWeights::row, DwWeights::stream}) {
          auto c = convjit::init_dw_conf(p, dw_impl(l), isa, w);
          if (!c) continue;  // (a register shortage: the other tests check the reason)
          INFO("problem " << p.str() << " " << c.conf->name());
          Operands o = make_dw_operands(p, seed++);
          check_kernel(*convjit::make_dw_kernel(*c.conf, o.w, &o.b), p, l, o, reference(p, o));
        }
      }
}

TEST_CASE("depthwise: post-op chains that need epilogue scratch registers") {
  uint64_t seed = 7000;
  const std::vector<std::vector<PostOp>> chains = {
      chain({op(K::sigmoid)}),
      chain({op(K::swish), op(K::add)}),
      chain({op(K::scale_shift), op(K::hardswish), op(K::add)}),
      chain({op(K::leaky_relu, 0.1f), op(K::hardsigmoid, 0.2f, 0.5f), op(K::scale_shift)}),
      chain({op(K::prelu), op(K::add)}),
      chain({op(K::scale_shift), op(K::prelu), op(K::tanh)}),
  };
  const std::vector<std::string> shapes = {
      "g21ic21ih9iw18_oc21oh9ow18kh3kw3sh1sw1ph1pw1",
      "mb2g35ic35ih8iw8_oc35oh4ow4kh5kw5sh2sw2pt2pl2pb1pr2_nobias",
  };
  for (Isa isa : isas())
    for (bool nhwc : {false, true})
      for (const auto& c : chains)
        for (const std::string& s : shapes)
          check_dw(problem(s, c), isa, nhwc_or_blocked(isa, nhwc), seed++);
}

TEST_CASE("depthwise: finite pad lanes in, finite pad lanes out (blocked)") {
  // layout.h: pad lanes hold finite values and kernels keep them so; with zero-padded
  // weights and bias the output pad lanes are post-ops of 0.
  for (Isa isa : isas()) {
    const ConvProblem p =
        problem("mb2g21ic21ih7iw9_oc21oh7ow9kh3kw3sh1sw1ph1pw1", chain({op(K::add), op(K::relu)}));
    Operands o = make_dw_operands(p, 8000);
    std::string why;
    const Layout l = blocked_layout(isa);
    auto k = create_conv_kernel(p, dw_impl(l), isa, o.w, &o.b, &why);
    REQUIRE(k);
    std::vector<float> out = run_dw(*k, p, o, l, true, 0.f);
    int64_t bad = 0;
    for (float v : out) bad += std::isfinite(v) ? 0 : 1;
    CHECK(bad == 0);
  }
}

TEST_CASE("depthwise: kernel names") {
  for (Isa isa : isas()) {
    const ConvProblem p = problem("g32ic32ih56iw56_oc32oh56ow56kh3kw3sh1sw1ph1pw1");
    const std::string b = check_dw(p, isa, blocked_layout(isa), 9000, 8);
    CHECK(b == std::string("conv_dw_f32_") + layout_name(blocked_layout(isa)) + "_k3s1_ow8" +
                   (b.find("wr__") != std::string::npos ? "wr" : "") + "__" + isa_name(isa));
    const ConvProblem q = problem("g17ic17ih9iw9_oc17oh3ow9kh5kw3sh2sw1dh2dw1ph2pw1");
    const std::string n = check_dw(q, isa, Layout::nhwc, 9001, 4);
    CHECK(n.find("conv_dw_f32_nhwc_k5x3s2x1d2x1_ow4") == 0);
    CHECK(n.find(std::string("__") + isa_name(isa)) != std::string::npos);
  }
}

}  // namespace
}  // namespace kiln::convtest
