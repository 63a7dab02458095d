// Writes the seed corpus for fuzz_cache: a few valid tuning cache files for the fuzz context,
// written by kiln::TuningCache itself, each prefixed with the harness's mode byte (0: load as
// is; 1: the harness recomputes the line checksums). Run by make_corpus.sh.
//   usage: make_cache_seeds OUT_DIR
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>

#include "runtime/tuning_cache.h"
#include "tests/fuzz/fuzz_cache_util.h"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_cache_seeds OUT_DIR\n");
    return 2;
  }
  const fs::path out = argv[1];
  const fs::path work = out / ".work";
  fs::create_directories(out);
  std::string all_bytes;
  for (int b = 0; b < 256; ++b) all_bytes += char(b);
  const std::pair<const char*, std::function<void(kiln::TuningCache&)>> seeds[] = {
      {"tiny", [](kiln::TuningCache& c) { c.put_plan("", ""); }},
      {"times",
       [](kiln::TuningCache& c) {
         c.put_time("conv n1 c64 h56 w56 k3 s1 p1", "conv_direct_f32_nChw16c_ow14oc2__avx512",
                    0.0421875);
         c.put_time("conv n1 c64 h56 w56 k3 s1 p1", "conv_gemm1x1_f32__avx512", 0.1);
         c.put_time("fc n1 k512 m1000", "fc_f32__avx512", 1e-300);
         c.put_time("reorder nchw->nChw16c 64x56x56", "glue", 0);
         c.put_time("pool max k3 s2", "glue", 12345.678901234567);
       }},
      {"plans",
       [&](kiln::TuningCache& c) {
         c.put_plan("resnet18.onnx#sha=01ab", "node conv1: direct nChw16c\nnode fc: fc\n");
         c.put_plan("tabs\tand\\slashes\r\n", "\x01\x7f escaped");
         c.put_plan("binary", all_bytes);
       }},
      {"mixed",
       [&](kiln::TuningCache& c) {
         for (int i = 0; i < 12; ++i)
           c.put_time("problem " + std::to_string(i % 4), "label\t" + std::to_string(i),
                      0.5 + i * 0.25);
         c.put_plan("model", "plan with a \\ and a \n newline");
       }},
  };
  int n = 0;
  for (const auto& [name, fill] : seeds) {
    fs::remove_all(work);
    kiln::TuningCache c(work.string(), kiln::fuzz::cache_fuzz_context());
    fill(c);
    if (!c.flush()) return 1;
    std::ifstream in(c.path(), std::ios::binary);
    const std::string file((std::istreambuf_iterator<char>(in)), {});
    for (char mode : {'\0', '\1'}) {
      std::ofstream o(out / (std::string("cache_") + name + (mode ? "_fix" : "") + ".seed"),
                      std::ios::binary);
      o << mode << file;
      ++n;
    }
  }
  fs::remove_all(work);
  std::printf("cache seeds: %d files in %s\n", n, out.c_str());
  return 0;
}
