// Timing of kernel candidates on a shared, noisy machine: interleaved rounds, thread CPU time,
// and probes that tell whether a sample ran while the core was shared.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fma_peak.h"
#include "jit/conv/conv_kernel.h"

namespace kiln::bench {

std::vector<float> random_buffer(size_t n, uint32_t seed);

// One kernel under test with its (cache-resident) buffers.
struct Candidate {
  std::unique_ptr<Kernel> k;
  ConvImpl impl;
  std::string label;  // kernel name (+ "/<variant>" for forced tuning variants)
  const float* src = nullptr;
  float* dst = nullptr;
  std::shared_ptr<ScratchBuffer> scratch;  // k->scratch_bytes(), allocated once
  int inner = 1;                           // runs per sample (a sample lasts >= 2 ms)
  std::vector<double> samples;             // seconds per run (thread CPU time), core not shared
  std::vector<double> shared;              // samples taken while the core was shared
  std::vector<double> wall;                // all samples in wall time
  int contended = 0;                       // samples taken while the core was shared
  // Per sample: the FMA probe's GFLOP/s around it / the peak (the share of the FMA units this
  // thread had).
  std::vector<double> probe_share;
  void once() const;
};

// Samples the candidates in `reps` interleaved rounds (one warm-up run before each sample),
// so that a burst of other load hits every candidate alike. Samples are thread CPU time (time
// slices lost to other processes do not count; wall time is kept too). When `clean` > 0, a
// sample is clean if the probes right before and after it show the core unshared; a sample is
// retried up to `tries` times before a shared one is kept (and counted as contended). The FMA
// probe runs around every sample either way (its result is kept per sample).
// `evict` (--cold; nullptr: warm): a buffer written before every timed run, which is then a
// single run without a warm-up, its operands evicted from the caches.
void time_candidates(std::vector<Candidate>& cs, int reps, const FmaProbe& probe, const L2Probe& l2,
                     double peak, double clean, int tries, std::vector<float>* evict = nullptr);

// Median of a candidate's samples (of the clean ones when there are at least 3) and the
// fastest of all.
struct Stats {
  double us = 0, us_min = 0, us_wall = 0;
  double probe_share = 0;  // median of Candidate::probe_share
  int samples = 0, contended = 0;
};
Stats stats(Candidate& c);

}  // namespace kiln::bench
