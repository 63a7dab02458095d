// kiln_kernel_bench's results: per-candidate rows, the families a layer does not suit, the
// per-layer summary (best family, effective GFLOP/s of each family), the count-weighted
// network totals, and the JSON file.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "jit/cpu.h"
#include "layers.h"

namespace kiln::bench {

struct Row {
  std::string set, layer, problem, kernel, family, isa, src, dst;
  double us = 0, us_min = 0, us_wall = 0;  // median, fastest sample, median wall time
  double gflops = 0;                       // effective: 2 x direct-conv MACs / median time
  double pct = 0, pct_min = 0;             // % of the isa's FMA peak (median, fastest)
  double probe_share = 0;  // median share of the core the FMA probe saw around the samples
  double gbs = 0;          // min_bytes / median time
  double pct_bw = 0;       // % of the single-core DRAM copy bandwidth
  double pct_bw_l3 = 0;    // % of the L3-sized copy bandwidth
  double pct_bw_l2 = 0;    // % of the L2-sized copy bandwidth
  double macs = 0, bytes = 0;
  int samples = 0, contended = 0, count = 1;
  bool depthwise = false;
  bool forced = false;  // a tuning candidate (forced blocking / split / variant)
  bool best = false;    // the fastest (median) non-forced candidate of its layer and isa
};

struct Missing {  // a family / layout pair create_conv_kernel declined, and why
  std::string set, layer, isa, family, layouts, reason;
};

struct Total {  // count-weighted sum of the best kernels of one set and isa
  std::string set, isa;
  double us = 0, us_min = 0, flops = 0, bytes = 0, pct = 0, pct_min = 0, gbs = 0;
  int layers = 0;
};

struct ReportInput {
  const std::vector<Isa>& isas;
  const std::map<Isa, double>& peak;
  double copy_gbs, copy_l3_gbs, copy_l2_gbs;
  const std::string& post;
  const std::vector<Layer>& layers;
  const std::vector<Row>& rows;
  const std::vector<Missing>& missing;
};

// `bw`: the copy bandwidths were measured, rows may show % of them (DRAM, L3, L2).
void print_header(bool bw);
// With the % of the copy bandwidths when they were measured and the row is depthwise (a
// bandwidth-bound family) or `all_bw` (--bandwidth).
void print_row(const Row& r, bool all_bw);
// Marks the best non-forced row among rows[first..] (all of one layer and isa); when only
// forced rows exist, the fastest of them.
void mark_best(std::vector<Row>& rows, size_t first);
// --sweep: the `top` fastest (by min time) rows among rows[first..].
void print_top(const std::vector<Row>& rows, size_t first, int top);
// Per isa: each layer's best effective GFLOP/s per family and its best kernel; then the
// count-weighted totals per set. Returns the totals.
std::vector<Total> print_summary(const ReportInput& in);
void write_json(const std::string& path, const ReportInput& in, const std::vector<Total>& totals);

}  // namespace kiln::bench
