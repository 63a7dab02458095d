// kiln_kernel_bench: per-layer time of every JIT conv family (direct, gemm1x1, depthwise,
// winograd2, winograd4, im2col) in every layout combination it accepts, at 1 thread, against
// this machine's measured single-core FMA peak (and copy bandwidth for depthwise). The layers
// are a shape list of tests/shapes/ (the files the kernel tests read): by default ResNet-50's
// convs; resnet50, vgg16 and mobilenetv2 (its depthwise convs) carry each layer's count in the
// network, so the summary totals are the network's conv time.
//
//   kiln_kernel_bench [--set resnet50|vgg16|mobilenetv2|all|LIST] [--isa avx512|avx2|both]
//                     [--family A,B..] [--layout SUBSTR] [--layer SUBSTR] [--reps N]
//                     [--json FILE] [--post relu] [--all-layouts] [--why]
//                     [--sweep] [--top N] [--kchunk A,B..] [--tune K=V,..]...
//                     [--shape IC,IH,OC,K,S[,G]|PROBLEM]... [--clean F] [--stream-mb N]
//                     [--cold] [--bandwidth] [--tiles R,C] [--l2 KB,..] [--int8]
// --int8 adds the int8 kernels of QDQ models (add_int8) on machines with AVX512-VNNI.
// "Effective GFLOP/s" = 2 x the direct convolution's multiply-adds / time, for every family
// (so Winograd, which does fewer multiplies, compares directly); depthwise rows also show GB/s
// (bytes = input + output + weights) and its % of the single-core copy bandwidth measured for
// buffers far beyond L3 (--stream-mb each), in L3 and in L2 (--bandwidth: on every row).
// --family takes comma-separated substrings of family names (e.g. direct,gemm1x1). Families a layer
// does not suit are listed with the factory's reason (--why; always in the JSON). Tuning: --sweep
// tries every register blocking that fits (direct and gemm1x1: ur x ob; depthwise: weight mode x
// block width); --kchunk forces K splits; --tiles R,C adds the depthwise conf with a forced tile
// plan (row chunks, channel-vector chunks);
// --tune adds a candidate with forced conf values (direct / gemm1x1), keys ur, ob, bcast,
// pack, mouter, chunk, kc, pfs, pfd, pfn (prefetch src / dst / the next group's weights), pfe
// (K steps per pfn prefetch), family, layout; e.g. --tune family=gemm1x1,ur=6,ob=4,bcast=1.
//
// Timing (timing.h): per layer and isa all candidates are sampled in interleaved rounds; a
// sample is the thread CPU time of >= 2 ms of back-to-back runs after one warm-up run (same
// buffers, so operands are cache-resident as far as they fit, as when the previous layer has
// just written the input); --cold instead writes a --stream-mb buffer before every sample, a
// single run. Short FMA and L2 probes around each sample tell whether the core was shared
// (work on a sibling vCPU slows ours without descheduling us: bench/NOTES.md); the reported
// time is the median of the clean samples (of all when fewer than 3 were clean, counted in
// "contended"), "min" the fastest sample. "share" is the median FMA-probe rate around the
// samples / peak (1: the FMA units were not shared). Other tenants' cache and memory traffic
// slows kernels even at share ~1 (bench/NOTES.md), so compare the fastest samples.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "bench_main.h"
#include "fma_peak.h"
#include "graph/error.h"
#include "jit/conv/conv_families.h"
#include "jit/conv/conv_kernel.h"
#include "jit/cpu.h"
#include "jit/dw/dw_conf.h"
#include "jit/dw/dw_kernel.h"
#include "jit/layout.h"
#include "layers.h"
#include "report.h"
#include "timing.h"

namespace kiln::bench {
namespace {

// Forced conf values of a tuning candidate (-1 / 0 / "": the conf's own choice).
struct Variant {
  std::string spec, family, layout;
  int ur = 0, ob = 0, bcast = -1, pack = -1, mouter = -1, pfs = -1, pfd = -1, pfn = -1, pfe = -1;
  int64_t chunk = -1, kc = -1;
};

Variant parse_variant(const std::string& spec) {
  Variant v;
  v.spec = spec;
  for (size_t pos = 0; pos < spec.size();) {
    size_t e = spec.find(',', pos);
    if (e == std::string::npos) e = spec.size();
    const std::string kv = spec.substr(pos, e - pos);
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) fail(Code::invalid_argument, "--tune takes KEY=VALUE,..: " + kv);
    const std::string k = kv.substr(0, eq), val = kv.substr(eq + 1);
    const int64_t n = std::atoll(val.c_str());
    const std::pair<const char*, int*> ints[] = {
        {"ur", &v.ur},     {"ob", &v.ob},         {"bcast", &v.bcast},
        {"pack", &v.pack}, {"mouter", &v.mouter}, {"pfs", &v.pfs},
        {"pfd", &v.pfd},   {"pfn", &v.pfn},       {"pfe", &v.pfe}};
    const std::pair<const char*, int64_t*> longs[] = {{"chunk", &v.chunk}, {"kc", &v.kc}};
    bool known = true;
    if (k == "family") {
      v.family = val;
    } else if (k == "layout") {
      v.layout = val;
    } else {
      known = false;
      for (auto [name, field] : ints)
        if (k == name) *field = int(n), known = true;
      for (auto [name, field] : longs)
        if (k == name) *field = n, known = true;
    }
    if (!known) fail(Code::invalid_argument, "--tune: unknown key " + k);
    pos = e + 1;
  }
  return v;
}

struct Options {
  std::vector<Isa> isas;
  std::string set = "resnet50";
  int reps = 15;
  std::string json, layer, family, layout, post;
  bool sweep = false, all_layouts = false, why = false;
  bool cold = false;       // --cold: evict the caches before every timed run
  bool int8 = false;       // --int8: also the int8 kernels (AVX512-VNNI), uint8 sides too
  bool bandwidth = false;  // --bandwidth: copy-bandwidth columns for every layer, not only dw
  long tile_rows = 0, tile_cvs = 0;  // --tiles R,C: a depthwise candidate with this tile plan
  double clean = 0.95;               // --clean: probe threshold (0: take every sample)
  int tries = 40;                    // attempts per sample before accepting a contended one
  int top = 5;                       // --sweep: rows printed per layer and isa
  // --kchunk A,B,..: also try forced K splits (ic blocks per call; -1: none; 0: conf's).
  std::vector<int> kchunks{0};
  std::vector<Variant> tunes;
  // --l2 KB,..: also the kernels the confs choose for an L2 of that many KiB (the host's
  // cache sizes otherwise), to see what the cache budgets are worth on this machine.
  std::vector<int64_t> l2_kib;
  std::vector<Layer> custom;  // --shape: replaces the sets
  size_t stream_mb = 512;
};

void usage() {
  std::fprintf(stderr,
               "usage: kiln_kernel_bench [--set resnet50|vgg16|mobilenetv2|all]\n"
               "         [--isa avx512|avx2|both] [--family A,B..] [--layout SUBSTR]\n"
               "         [--layer SUBSTR] [--reps N] [--json FILE] [--post relu]\n"
               "         [--all-layouts] [--why] [--sweep] [--top N] [--kchunk A,B..]\n"
               "         [--tune K=V,..]... [--shape IC,IH,OC,K,S[,G]]... [--clean F]\n"
               "         [--stream-mb N] [--cold] [--bandwidth] [--tiles R,C] [--l2 KB,..]\n"
               "         [--int8]\n"
               "  --set takes a shape list of tests/shapes/ (e.g. conv_direct) or a path;\n"
               "  --shape also takes a conv problem string (ic64ih56iw56_oc64oh56ow56...)\n");
}

Options parse(int argc, char** argv) {
  Options o;
  std::string isa = "both";
  for (int i = 1; i < argc; ++i) {
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) fail(Code::invalid_argument, std::string(argv[i]) + " needs a value");
      return argv[++i];
    };
    const std::string a = argv[i];
    if (a == "--isa") {
      isa = next();
    } else if (a == "--set") {
      o.set = next();
      layer_set(o.set);  // validates
    } else if (a == "--reps") {
      o.reps = std::max(1, std::atoi(next().c_str()));
    } else if (a == "--json") {
      o.json = next();
    } else if (a == "--layer") {
      o.layer = next();
    } else if (a == "--family") {
      o.family = next();
    } else if (a == "--layout") {
      o.layout = next();
    } else if (a == "--post") {
      o.post = next();
      if (o.post != "relu") fail(Code::invalid_argument, "--post takes relu");
    } else if (a == "--sweep") {
      o.sweep = true;
    } else if (a == "--all-layouts") {
      o.all_layouts = true;
    } else if (a == "--why") {
      o.why = true;
    } else if (a == "--kchunk") {
      o.kchunks.clear();
      const std::string v = next();
      for (size_t pos = 0; pos <= v.size();) {
        size_t e = v.find(',', pos);
        if (e == std::string::npos) e = v.size();
        o.kchunks.push_back(std::atoi(v.substr(pos, e - pos).c_str()));
        pos = e + 1;
      }
    } else if (a == "--tune") {
      o.tunes.push_back(parse_variant(next()));
    } else if (a == "--l2") {
      const std::string v = next();
      for (size_t pos = 0; pos <= v.size();) {
        size_t e = v.find(',', pos);
        if (e == std::string::npos) e = v.size();
        const long kib = std::atol(v.substr(pos, e - pos).c_str());
        if (kib < 64) fail(Code::invalid_argument, "--l2 takes sizes in KiB (>= 64): " + v);
        o.l2_kib.push_back(kib);
        pos = e + 1;
      }
    } else if (a == "--clean") {
      o.clean = std::atof(next().c_str());
    } else if (a == "--top") {
      o.top = std::max(1, std::atoi(next().c_str()));
    } else if (a == "--stream-mb") {
      o.stream_mb = size_t(std::max(1, std::atoi(next().c_str())));
    } else if (a == "--shape") {
      o.custom.push_back(custom_layer(next()));
    } else if (a == "--int8") {
      o.int8 = true;
    } else if (a == "--cold") {
      o.cold = true;
    } else if (a == "--bandwidth") {
      o.bandwidth = true;
    } else if (a == "--tiles") {
      if (std::sscanf(next().c_str(), "%ld,%ld", &o.tile_rows, &o.tile_cvs) != 2 ||
          o.tile_rows < 1 || o.tile_cvs < 1)
        fail(Code::invalid_argument, "--tiles takes ROWS,VECS (both >= 1)");
    } else if (a == "--help" || a == "-h") {
      usage();
      std::exit(0);
    } else {
      fail(Code::invalid_argument, "unknown option " + a);
    }
  }
  if (isa == "both")
    o.isas = {Isa::avx512, Isa::avx2};
  else
    o.isas = {parse_isa(isa)};
  std::vector<Isa> ok;
  for (Isa i : o.isas) {
    if (i == Isa::scalar) fail(Code::invalid_argument, "--isa scalar has no JIT kernels");
    if (int(i) <= int(detect_isa()))
      ok.push_back(i);
    else
      std::fprintf(stderr, "skipping %s: not supported by this CPU\n", isa_name(i));
  }
  o.isas = ok;
  return o;
}

bool contains(const std::string& s, const std::string& sub) {
  return sub.empty() || s.find(sub) != std::string::npos;
}

// `list` is comma-separated substrings; true when any of them is in `s` (or `list` is empty).
bool matches_any(const std::string& s, const std::string& list) {
  if (list.empty()) return true;
  for (size_t pos = 0; pos <= list.size();) {
    size_t e = list.find(',', pos);
    if (e == std::string::npos) e = list.size();
    if (e > pos && s.find(list.substr(pos, e - pos)) != std::string::npos) return true;
    pos = e + 1;
  }
  return false;
}

std::string pair_name(Layout s, Layout d) {
  return std::string(layout_name(s)) + "->" + layout_name(d);
}

// Every (src, dst) pair of the layouts a kernel of `isa` can take. Direct with an NCHW src
// (meant for first layers) is left out when there are >= a vector of input channels unless
// --all-layouts (it would be applicable, but slow, and long to time on big layers).
std::vector<std::pair<Layout, Layout>> layout_pairs(const Options& o, const ConvProblem& p,
                                                    ConvFamily f, Isa isa) {
  std::vector<std::pair<Layout, Layout>> v;
  for (Layout s : {Layout::nchw, Layout::nhwc, blocked_layout(isa)})
    for (Layout d : {Layout::nchw, Layout::nhwc, blocked_layout(isa)}) {
      if (!contains(pair_name(s, d), o.layout)) continue;
      if (!o.all_layouts && f == ConvFamily::direct && s == Layout::nchw && p.ic >= simd_width(isa))
        continue;
      v.push_back({s, d});
    }
  return v;
}

// A direct / gemm1x1 kernel with forced conf values, or nullptr (reason in *why).
std::unique_ptr<Kernel> make_variant(const ConvProblem& p, ConvImpl impl, Isa isa, const Tensor& w,
                                     const Tensor& b, const Variant& v, std::string* why) {
  impl.ur_w = v.ur;
  impl.oc_blocks = v.ob;
  if (impl.family == ConvFamily::gemm1x1) {
    convjit::Gemm1x1Force f;
    f.bcast_reg = v.bcast;
    f.pack = v.pack;
    f.m_outer = v.mouter;
    f.chunk_blocks = v.chunk;
    f.ic_chunk = v.kc;
    f.pf_src = v.pfs;
    f.pf_dst = v.pfd;
    f.pf_next = v.pfn;
    f.pf_every = v.pfe;
    auto c = convjit::init_gemm1x1_conf(p, impl, isa, f);
    if (!c) {
      *why = c.reason;
      return nullptr;
    }
    return convjit::make_gemm1x1_kernel(*c.conf, w, &b);
  }
  if (impl.family != ConvFamily::direct) {
    *why = "--tune applies to direct and gemm1x1";
    return nullptr;
  }
  auto c = convjit::init_direct_conf(p, impl, isa);
  if (!c) {
    *why = c.reason;
    return nullptr;
  }
  convjit::DirectConf& d = *c.conf;
  if (v.bcast >= 0) {
    d.bcast_reg = isa == Isa::avx512 && v.bcast;
    const int regs = d.ur_h * d.ur_w * d.oc_blocks + d.oc_blocks + (d.bcast_reg ? 1 : 0);
    if (regs > (isa == Isa::avx512 ? 32 : 16)) {
      *why = "register broadcast does not fit this blocking";
      return nullptr;
    }
  }
  if (v.kc > 0) {
    d.ic_chunk = std::min(v.kc, d.icb_total());
    d.rows_outer = false;
  }
  if (v.mouter >= 0) d.rows_outer = v.mouter && d.ur_h == 1;
  if (v.pfn >= 0) d.pf_next = v.pfn != 0;
  if (v.pfe > 0) {
    if (v.pfe > 16 || (v.pfe & (v.pfe - 1))) {
      *why = "pfe must be 1, 2, 4, 8 or 16";
      return nullptr;
    }
    d.pf_every = v.pfe;
  }
  return convjit::make_direct_kernel(d, w, &b);
}

// The K-split candidates of --kchunk (direct / gemm1x1 only).
std::unique_ptr<Kernel> make_with_chunk(const ConvProblem& p, const ConvImpl& impl, Isa isa,
                                        const Tensor& w, const Tensor& b, int chunk) {
  Variant v;
  v.ur = impl.ur_w;
  v.ob = impl.oc_blocks;
  v.kc = chunk < 0 ? int64_t(1) << 30 : chunk;
  if (chunk > 0) v.mouter = 0;
  std::string why;
  return make_variant(p, impl, isa, w, b, v, &why);
}

// Depthwise candidates beyond the factory's choice: --sweep, every (weight mode, block width)
// that fits (what dw_block_cycles ranks); --tiles R,C, the chosen conf with a forced tile plan
// (row chunks, channel-vector chunks), for tuning init_dw_conf's tiling.
template <class Add>
void add_dw_variants(const ConvProblem& p, const ConvImpl& impl, Isa isa, const Tensor& w,
                     const Tensor& b, const Options& o, Add& add) {
  auto c0 = convjit::init_dw_conf(p, impl, isa);
  if (!c0) return;
  if (o.tile_rows) {
    convjit::DwConf c = *c0.conf;
    c.row_chunks = std::min<int64_t>(o.tile_rows, p.oh);
    c.cv_chunks = std::min<int64_t>(o.tile_cvs, c.cv);
    const std::string label =
        c.name() + "/tiles" + std::to_string(c.row_chunks) + "," + std::to_string(c.cv_chunks);
    add(convjit::make_dw_kernel(c, w, &b), impl, label);
  }
  if (!o.sweep) return;
  for (auto wm : {convjit::DwWeights::all, convjit::DwWeights::row, convjit::DwWeights::stream})
    for (int ur = 1; ur <= std::min<int64_t>(p.ow, 28); ++ur) {
      ConvImpl forced = impl;
      forced.ur_w = ur;
      auto c = convjit::init_dw_conf(p, forced, isa, wm);
      if (c) add(convjit::make_dw_kernel(*c.conf, w, &b), forced, c.conf->name());
    }
}

struct Context {
  const Options& o;
  std::map<Isa, double> peak;
  std::map<Isa, std::unique_ptr<FmaProbe>> probes;
  L2Probe l2probe;
  double copy_gbs = 0;       // single-core DRAM copy bandwidth (0: not measured)
  double copy_l3_gbs = 0;    // the same for 2 x 8 MB buffers (L3-resident)
  double copy_l2_gbs = 0;    // the same for 2 x 256 KB buffers (L2-resident)
  std::vector<float> evict;  // --cold: written before every timed run
  std::vector<Row> rows;
  std::vector<Missing> missing;
};

// --int8: the int8 kernels of a QDQ model's conv (the families and layouts
// runtime/labels.cpp offers) on operands on made-up grids (x: scale 0.02, zero point 3; w: a
// scale per oc), the chain ending in a quantize-dequantize (which a uint8 dst stores); the
// f32 src ones quantize their input on the way.
template <class Add>
void add_int8(ConvProblem p, Isa isa, const Tensor& w, const Tensor& b, const Options& o,
              Add& add) {
  if (isa != Isa::avx512 || !host_cpu().avx512_vnni) return;
  p.post.push_back({PostOp::Kind::quant_dequant_u8, 0.05f, 0.f, -1});
  auto q = std::make_shared<ConvInt8>();
  q->x_scale = 0.02f;
  q->x_zero = 3;
  q->w_scale.assign(size_t(p.oc), 0.01f);
  for (ConvFamily f :
       {ConvFamily::gemm1x1, ConvFamily::im2col, ConvFamily::grouped, ConvFamily::depthwise}) {
    if (!matches_any(conv_family_name(f), o.family)) continue;
    std::vector<Layout> srcs{Layout::nChw16c, Layout::nChw16c_u8};
    if (p.ic <= 4) srcs.push_back(Layout::nchw);
    for (Layout src : srcs)
      for (Layout dst : {Layout::nChw16c, Layout::nChw16c_u8}) {
        if (!contains(pair_name(src, dst), o.layout)) continue;
        ConvImpl impl;
        impl.family = f;
        impl.src = src;
        impl.dst = dst;
        impl.int8 = q;
        std::string why;
        if (auto k = create_conv_kernel(p, impl, isa, w, &b, &why)) {
          const std::string name = k->name();
          add(std::move(k), impl, name);
        }
      }
  }
}

// Builds, times and reports every candidate of one layer on one isa.
void bench_layer(Context& ctx, const Layer& l, Isa isa) {
  const Options& o = ctx.o;
  const ConvProblem p = make_problem(l, o.post);
  const Tensor w = [&] {
    Tensor t(DType::f32, {p.oc, p.ic / p.groups, p.kh, p.kw});
    auto v = random_buffer(size_t(t.numel()), 2);
    std::copy(v.begin(), v.end(), t.data<float>());
    return t;
  }();
  Tensor b(DType::f32, {p.oc});
  std::set<std::string> seen;
  std::vector<Candidate> cands;
  std::map<int, std::vector<float>> bufs;  // one src (layout) and one dst (100 + layout) each
  const Shape xs{p.n, p.ic, p.ih, p.iw}, ys{p.n, p.oc, p.oh, p.ow};
  auto add = [&](std::unique_ptr<Kernel> k, const ConvImpl& impl, const std::string& label) {
    if (!k || seen.count(label)) return;  // forced values may clamp to the same kernel
    seen.insert(label);
    const int skey = int(impl.src), dkey = 100 + int(impl.dst);
    if (!bufs.count(skey)) bufs[skey] = random_buffer(size_t(layout_elems(impl.src, xs)), 1);
    if (!bufs.count(dkey)) bufs[dkey].assign(size_t(layout_elems(impl.dst, ys)), 0.f);
    Candidate c;
    c.scratch = std::make_shared<ScratchBuffer>(k->scratch_bytes());
    c.k = std::move(k);
    c.impl = impl;
    c.label = label;
    c.src = bufs[skey].data();
    c.dst = bufs[dkey].data();
    cands.push_back(std::move(c));
  };
  const int max_ob = isa == Isa::avx512 ? 8 : 6, max_ur = isa == Isa::avx512 ? 28 : 14;
  for (int fi = 0; fi < kNumConvFamilies; ++fi) {
    const ConvFamily f = ConvFamily(fi);
    if (!matches_any(conv_family_name(f), o.family)) continue;
    for (auto [src, dst] : layout_pairs(o, p, f, isa)) {
      ConvImpl impl;
      impl.family = f;
      impl.src = src;
      impl.dst = dst;
      std::string why;
      auto k = create_conv_kernel(p, impl, isa, w, &b, &why);
      if (!k) {
        ctx.missing.push_back(
            {l.set, l.name, isa_name(isa), conv_family_name(f), pair_name(src, dst), why});
        continue;
      }
      const std::string name = k->name();
      add(std::move(k), impl, name);
      for (int64_t kib : o.l2_kib) {
        ConvImpl ci = impl;
        ci.cache.l2 = kib << 10;
        if (auto kk = create_conv_kernel(p, ci, isa, w, &b, &why)) {
          const std::string label = kk->name() + "/l2=" + std::to_string(kib) + "K";
          add(std::move(kk), ci, label);
        }
      }
      if (f == ConvFamily::depthwise) add_dw_variants(p, impl, isa, w, b, o, add);
      const bool tunable = f == ConvFamily::direct || f == ConvFamily::gemm1x1;
      if (!tunable) continue;
      std::vector<std::pair<int, int>> blockings{{0, 0}};
      if (o.sweep)
        for (int ob = 1; ob <= max_ob; ++ob)
          for (int ur = 1; ur <= max_ur; ++ur)
            if (ur * ob >= (isa == Isa::avx512 ? 14 : 8) &&
                ur * ob + ob + 1 <= (isa == Isa::avx512 ? 32 : 16))
              blockings.push_back({ur, ob});
      for (auto [ur, ob] : blockings)
        for (int kc : o.kchunks) {
          if (ur == 0 && kc == 0) continue;  // the default kernel, added above
          ConvImpl forced = impl;
          forced.ur_w = ur;
          forced.oc_blocks = ob;
          auto kk = kc ? make_with_chunk(p, forced, isa, w, b, kc)
                       : create_conv_kernel(p, forced, isa, w, &b, &why);
          if (!kk) continue;
          const std::string label = kk->name() + (kc ? "/k" + std::to_string(kc) : "");
          add(std::move(kk), forced, label);
        }
      for (const Variant& v : o.tunes) {
        if (!contains(conv_family_name(f), v.family) || !contains(pair_name(src, dst), v.layout))
          continue;
        std::string vwhy;
        auto kk = make_variant(p, impl, isa, w, b, v, &vwhy);
        if (!kk) {
          std::fprintf(stderr, "%s %s --tune %s: %s\n", l.name.c_str(), isa_name(isa),
                       v.spec.c_str(), vwhy.c_str());
          continue;
        }
        const std::string label = kk->name() + "/" + v.spec;
        ConvImpl vi = impl;
        vi.ur_w = v.ur;
        vi.oc_blocks = v.ob;
        add(std::move(kk), vi, label);
      }
    }
  }
  if (o.int8) add_int8(p, isa, w, b, o, add);
  if (cands.empty()) return;
  time_candidates(cands, o.reps, *ctx.probes.at(isa), ctx.l2probe, ctx.peak[isa], o.clean, o.tries,
                  o.cold ? &ctx.evict : nullptr);
  const size_t first = ctx.rows.size();
  for (Candidate& c : cands) {
    const Stats st = stats(c);
    Row r;
    r.set = l.set;
    r.layer = l.name;
    r.problem = p.str();
    r.kernel = c.label;
    r.family = conv_family_name(c.impl.family);
    r.isa = isa_name(isa);
    r.src = layout_name(c.impl.src);
    r.dst = layout_name(c.impl.dst);
    r.count = l.count;
    r.depthwise = l.depthwise();
    r.macs = p.macs();  // the direct conv's, whatever the family computes
    r.bytes = min_bytes(p);
    r.forced = c.label != c.k->name() || c.impl.ur_w || c.impl.oc_blocks;
    r.us = st.us;
    r.us_min = st.us_min;
    r.us_wall = st.us_wall;
    r.probe_share = st.probe_share;
    r.samples = st.samples;
    r.contended = st.contended;
    r.gflops = 2 * r.macs / r.us / 1e3;
    r.pct = 100 * r.gflops / ctx.peak[isa];
    r.pct_min = 100 * 2 * r.macs / r.us_min / 1e3 / ctx.peak[isa];
    r.gbs = r.bytes / r.us / 1e3;
    r.pct_bw = ctx.copy_gbs > 0 ? 100 * r.gbs / ctx.copy_gbs : 0;
    r.pct_bw_l3 = ctx.copy_l3_gbs > 0 ? 100 * r.gbs / ctx.copy_l3_gbs : 0;
    r.pct_bw_l2 = ctx.copy_l2_gbs > 0 ? 100 * r.gbs / ctx.copy_l2_gbs : 0;
    ctx.rows.push_back(r);
  }
  mark_best(ctx.rows, first);
  for (size_t i = first; i < ctx.rows.size(); ++i)
    if (!o.sweep || !ctx.rows[i].forced || ctx.rows[i].best) print_row(ctx.rows[i], o.bandwidth);
  if (o.sweep) print_top(ctx.rows, first, o.top);
  if (o.why) {
    // Per family: one line per distinct reason, with the layout pairs it was given for.
    std::map<std::string, std::map<std::string, std::string>> by_family;  // family -> why -> pairs
    for (const Missing& m : ctx.missing)
      if (m.layer == l.name && m.isa == isa_name(isa)) {
        std::string& pairs = by_family[m.family][m.reason];
        pairs += (pairs.empty() ? "" : " ") + m.layouts;
      }
    for (auto& [fam, reasons] : by_family)
      for (auto& [why, pairs] : reasons)
        std::printf("  n/a %-10s %s [%s]\n", fam.c_str(), why.c_str(), pairs.c_str());
  }
}

int run(int argc, char** argv) {
  const Options o = parse(argc, argv);
  std::vector<Layer> layers = o.custom.empty() ? layer_set(o.set) : o.custom;
  Context ctx{o};
  std::printf("cpu: %s\n", host_cpu().summary().c_str());
  for (Isa isa : o.isas) {
    ctx.peak[isa] = measure_fma_peak(isa);
    std::printf("measured 1-core FMA peak %-6s: %7.1f GFLOP/s\n", isa_name(isa), ctx.peak[isa]);
    ctx.probes[isa] = std::make_unique<FmaProbe>(isa);
  }
  const bool any_dw = std::any_of(layers.begin(), layers.end(), [&](const Layer& l) {
    return l.depthwise() && contains(l.name, o.layer) && matches_any("depthwise", o.family);
  });
  if ((any_dw || o.bandwidth) && !o.isas.empty()) {
    // Copy bandwidth of one core: buffers far beyond L3, in L3 and in L2.
    double best = 0;
    ctx.copy_gbs = measure_copy_gbs(o.isas.front(), o.stream_mb << 20, 7, &best);
    std::printf("single-core DRAM copy bandwidth (2 x %zu MB): %.1f GB/s (best %.1f)\n",
                o.stream_mb, ctx.copy_gbs, best);
    ctx.copy_l3_gbs = measure_copy_gbs(o.isas.front(), 8 << 20, 51, &best);
    std::printf("single-core L3 copy bandwidth (2 x 8 MB): %.1f GB/s (best %.1f)\n",
                ctx.copy_l3_gbs, best);
    ctx.copy_l2_gbs = measure_copy_gbs(o.isas.front(), 256 << 10, 2001, &best);
    std::printf("single-core L2 copy bandwidth (2 x 256 KB): %.1f GB/s (best %.1f)\n",
                ctx.copy_l2_gbs, best);
  }
  if (o.cold) {
    ctx.evict.assign((o.stream_mb << 20) / sizeof(float), 0.f);
    std::printf("cold: a %zu MB buffer is written before every timed run\n", o.stream_mb);
  }
  print_header(ctx.copy_gbs > 0);
  for (const Layer& l : layers) {
    if (!contains(l.name, o.layer)) continue;
    for (Isa isa : o.isas) bench_layer(ctx, l, isa);
  }
  ReportInput in{o.isas, ctx.peak, ctx.copy_gbs, ctx.copy_l3_gbs, ctx.copy_l2_gbs,
                 o.post, layers,   ctx.rows,     ctx.missing};
  const std::vector<Total> totals = print_summary(in);
  int all = 0, bad = 0;
  for (const Row& r : ctx.rows) {
    all += r.samples;
    bad += r.contended;
  }
  if (bad)
    std::printf(
        "note: %d of %d samples were taken while the probes showed the core shared "
        "(FMA below %.0f%% of peak or slow L2 reads)\n",
        bad, all, 100 * o.clean);
  if (!o.json.empty()) write_json(o.json, in, totals);
  return 0;
}

}  // namespace
}  // namespace kiln::bench

int main(int argc, char** argv) {
  return kiln::bench::bench_main("kiln_kernel_bench", kiln::bench::run, argc, argv);
}
