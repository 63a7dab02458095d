#include "report.h"

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "graph/error.h"
#include "jit/conv/conv_kernel.h"

namespace kiln::bench {
namespace {

// "conv_gemm1x1_f32_nChw16c_to_nChw16c_m28oc1__avx512/variant" -> without "conv_" and isa.
std::string short_kernel(const std::string& k) {
  std::string s = k.rfind("conv_", 0) == 0 ? k.substr(5) : k;
  const size_t isa = s.find("__");
  if (isa == std::string::npos) return s;
  const size_t slash = s.find('/', isa);
  return s.substr(0, isa) + (slash == std::string::npos ? "" : s.substr(slash));
}

std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o + "\"";
}

}  // namespace

void print_header(bool bw) {
  std::printf("\n%-20s %-6s %-56s %9s %9s %8s %6s %6s %5s %7s %9s%s\n", "layer", "isa", "kernel",
              "us", "us(min)", "effGF/s", "%peak", "%min", "share", "GB/s", "contended",
              bw ? "   %DRAM    %L3    %L2" : "");
}

void print_row(const Row& r, bool all_bw) {
  std::printf("%-20s %-6s %-56s %9.1f %9.1f %8.1f %5.1f%% %5.1f%% %5.2f %7.1f %5d/%-3d",
              r.layer.c_str(), r.isa.c_str(), r.kernel.c_str(), r.us, r.us_min, r.gflops, r.pct,
              r.pct_min, r.probe_share, r.gbs, r.contended, r.samples);
  if ((r.depthwise || all_bw) && r.pct_bw > 0)
    std::printf(" %6.0f%% %5.0f%% %5.0f%%", r.pct_bw, r.pct_bw_l3, r.pct_bw_l2);
  std::printf("%s\n", r.best ? " *" : "");
}

void mark_best(std::vector<Row>& rows, size_t first) {
  size_t best = rows.size();
  for (int pass = 0; pass < 2 && best == rows.size(); ++pass)
    for (size_t i = first; i < rows.size(); ++i)
      if ((pass == 1 || !rows[i].forced) && (best == rows.size() || rows[i].us < rows[best].us))
        best = i;
  if (best < rows.size()) rows[best].best = true;
}

void print_top(const std::vector<Row>& rows, size_t first, int top) {
  std::vector<const Row*> mine;
  for (size_t i = first; i < rows.size(); ++i) mine.push_back(&rows[i]);
  std::sort(mine.begin(), mine.end(),
            [](const Row* a, const Row* b) { return a->us_min < b->us_min; });
  for (size_t i = 0; i < mine.size() && i < size_t(top); ++i)
    std::printf("%-20s %-6s top%zu %-51s %9.1f %9.1f %8.1f %5.1f%% %5.1f%%\n",
                mine[i]->layer.c_str(), mine[i]->isa.c_str(), i + 1, mine[i]->kernel.c_str(),
                mine[i]->us, mine[i]->us_min, mine[i]->gflops, mine[i]->pct, mine[i]->pct_min);
}

std::vector<Total> print_summary(const ReportInput& in) {
  std::vector<Total> totals;
  std::vector<std::string> sets;
  for (const Layer& l : in.layers)
    if (std::find(sets.begin(), sets.end(), l.set) == sets.end()) sets.push_back(l.set);
  for (Isa isa : in.isas) {
    const std::string isa_s = isa_name(isa);
    const double peak = in.peak.at(isa);
    std::printf(
        "\n== %s: effective GFLOP/s of each family's fastest layouts (median; '-' = not "
        "applicable) and the best kernel; %%peak of %.1f GFLOP/s from the median and the fastest "
        "sample; 'xdir' = best direct time / best time ==\n",
        isa_s.c_str(), peak);
    std::printf("%-20s %5s", "layer", "count");
    for (int f = 0; f < kNumConvFamilies; ++f) std::printf(" %9s", conv_family_name(ConvFamily(f)));
    std::printf("  %-44s %9s %6s %6s %5s %7s\n", "best kernel", "ms", "%peak", "%min", "xdir",
                "GB/s");
    for (const std::string& set : sets) {
      Total t;
      t.set = set;
      t.isa = isa_s;
      for (const Layer& l : in.layers) {
        if (l.set != set) continue;
        const Row* best = nullptr;
        double fam[kNumConvFamilies] = {};
        for (const Row& r : in.rows) {
          if (r.layer != l.name || r.isa != isa_s || r.set != set) continue;
          if (r.best) best = &r;
          if (r.forced) continue;
          for (int f = 0; f < kNumConvFamilies; ++f)
            if (r.family == conv_family_name(ConvFamily(f))) fam[f] = std::max(fam[f], r.gflops);
        }
        if (!best) continue;
        std::printf("%-20s %5d", l.name.c_str(), l.count);
        for (double g : fam) {
          if (g > 0)
            std::printf(" %9.1f", g);
          else
            std::printf(" %9s", "-");
        }
        const double dir = fam[int(ConvFamily::direct)];
        std::printf("  %-44s %9.3f %5.1f%% %5.1f%%", short_kernel(best->kernel).c_str(),
                    best->us / 1e3, best->pct, best->pct_min);
        if (dir > 0)
          std::printf(" %5.2f", best->gflops / dir);
        else
          std::printf(" %5s", "-");
        if (best->depthwise) std::printf(" %7.1f", best->gbs);
        std::printf("\n");
        t.us += best->us * l.count;
        t.us_min += best->us_min * l.count;
        t.flops += 2 * best->macs * l.count;
        t.bytes += best->bytes * l.count;
        ++t.layers;
      }
      if (t.layers == 0) continue;
      t.pct = 100 * t.flops / (t.us * 1e3) / peak;
      t.pct_min = 100 * t.flops / (t.us_min * 1e3) / peak;
      t.gbs = t.bytes / (t.us * 1e3);
      std::printf(
          "%s convs (count-weighted, best kernel) %-6s: %.2f ms, %.1f GFLOP/s, %.1f%% of peak "
          "(min: %.2f ms, %.1f%%)",
          set.c_str(), isa_s.c_str(), t.us / 1e3, t.flops / (t.us * 1e3), t.pct, t.us_min / 1e3,
          t.pct_min);
      if (set == "mobilenetv2" && in.copy_gbs > 0)
        std::printf(", %.1f GB/s = %.0f%% of the DRAM / %.0f%% of the L3 copy bandwidth", t.gbs,
                    100 * t.gbs / in.copy_gbs, 100 * t.gbs / in.copy_l3_gbs);
      std::printf("\n");
      totals.push_back(t);
    }
  }
  return totals;
}

void write_json(const std::string& path, const ReportInput& in, const std::vector<Total>& totals) {
  std::ofstream f(path);
  if (!f) fail(Code::io_error, "cannot write " + path);
  f << "{\n  \"cpu\": " << json_str(host_cpu().summary())
    << ",\n  \"threads\": 1,\n  \"batch\": 1,\n";
  f << "  \"post\": \"" << (in.post == "relu" ? "bias_relu" : "bias") << "\",\n";
  f << "  \"peak_gflops\": {";
  bool first = true;
  for (auto& [isa, g] : in.peak) {
    f << (first ? "" : ", ") << "\"" << isa_name(isa) << "\": " << g;
    first = false;
  }
  f << "},\n  \"copy_gbs\": " << in.copy_gbs << ",\n  \"copy_l3_gbs\": " << in.copy_l3_gbs
    << ",\n  \"copy_l2_gbs\": " << in.copy_l2_gbs << ",\n";
  // Kept from the first version of this file: the ResNet-50 totals per isa.
  for (const char* key : {"network_best_pct_of_peak", "network_best_pct_of_peak_min"}) {
    f << "  \"" << key << "\": {";
    first = true;
    for (const Total& t : totals)
      if (t.set == "resnet50") {
        f << (first ? "" : ", ") << "\"" << t.isa
          << "\": " << (std::string(key).find("min") != std::string::npos ? t.pct_min : t.pct);
        first = false;
      }
    f << "},\n";
  }
  f << "  \"totals\": [\n";
  for (size_t i = 0; i < totals.size(); ++i) {
    const Total& t = totals[i];
    f << "    {\"set\": " << json_str(t.set) << ", \"isa\": " << json_str(t.isa)
      << ", \"layers\": " << t.layers << ", \"us\": " << t.us << ", \"us_min\": " << t.us_min
      << ", \"pct_of_peak\": " << t.pct << ", \"pct_of_peak_min\": " << t.pct_min
      << ", \"gbs\": " << t.gbs << "}" << (i + 1 < totals.size() ? "," : "") << "\n";
  }
  f << "  ],\n  \"rows\": [\n";
  for (size_t i = 0; i < in.rows.size(); ++i) {
    const Row& r = in.rows[i];
    f << "    {\"set\": " << json_str(r.set) << ", \"layer\": " << json_str(r.layer)
      << ", \"problem\": " << json_str(r.problem) << ", \"kernel\": " << json_str(r.kernel)
      << ", \"family\": " << json_str(r.family) << ", \"isa\": " << json_str(r.isa)
      << ", \"src\": " << json_str(r.src) << ", \"dst\": " << json_str(r.dst)
      << ", \"count\": " << r.count << ", \"macs\": " << r.macs << ", \"bytes\": " << r.bytes
      << ", \"us\": " << r.us << ", \"us_min\": " << r.us_min << ", \"us_wall\": " << r.us_wall
      << ", \"samples\": " << r.samples << ", \"contended_samples\": " << r.contended
      << ", \"probe_share\": " << r.probe_share << ", \"gflops\": " << r.gflops
      << ", \"pct_of_peak\": " << r.pct << ", \"pct_of_peak_min\": " << r.pct_min
      << ", \"gbs\": " << r.gbs << ", \"pct_of_copy_bw\": " << r.pct_bw
      << ", \"pct_of_l3_copy_bw\": " << r.pct_bw_l3 << ", \"pct_of_l2_copy_bw\": " << r.pct_bw_l2
      << ", \"forced\": " << (r.forced ? "true" : "false")
      << ", \"best\": " << (r.best ? "true" : "false") << "}" << (i + 1 < in.rows.size() ? "," : "")
      << "\n";
  }
  f << "  ],\n  \"unavailable\": [\n";
  for (size_t i = 0; i < in.missing.size(); ++i) {
    const Missing& m = in.missing[i];
    f << "    {\"set\": " << json_str(m.set) << ", \"layer\": " << json_str(m.layer)
      << ", \"isa\": " << json_str(m.isa) << ", \"family\": " << json_str(m.family)
      << ", \"layouts\": " << json_str(m.layouts) << ", \"reason\": " << json_str(m.reason) << "}"
      << (i + 1 < in.missing.size() ? "," : "") << "\n";
  }
  f << "  ]\n}\n";
}

}  // namespace kiln::bench
