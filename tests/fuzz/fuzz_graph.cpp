// libFuzzer harness: ONNX bytes -> import -> shape inference/validation with constant folding
// -> the load-time passes (identities, BatchNorm folding, dead code, epilogue fusion). No code
// generation, so it runs many more inputs per second than fuzz_session.
#include <cstddef>
#include <cstdint>

#include "graph/onnx_import.h"
#include "graph/passes.h"
#include "runtime/ref/ref_kernels.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/onnx_mutator.h"

namespace {

// Constant folding evaluates nodes with the reference kernels, as kiln::Session does.
void run_ref(const kiln::Node& n, const std::vector<const kiln::Tensor*>& in,
             const std::vector<kiln::Tensor*>& out) {
  kiln::RefKernel k = kiln::find_ref_kernel(n.op);
  if (!k) n.fail(kiln::Code::unsupported, "no kernel implements operator " + n.op);
  k(n, in, out);
}

}  // namespace

KILN_FUZZ_MODEL_HOOKS()

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > kiln::fuzz::kMaxModelBytes) return -1;  // not added to the corpus
  kiln::fuzz::expect_clean([&] {
    kiln::ImportOptions io;  // no model_dir: external data is refused, nothing is read
    kiln::Graph g = kiln::import_onnx(data, size, io);
    kiln::optimize(g, kiln::Evaluator(run_ref));
    kiln::fuse_epilogues(g);
  });
  return 0;
}
