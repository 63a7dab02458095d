// The conv family table: one row per family holds everything the runtime, the solver and the
// tools know about it — its name, which problems it offers itself for and in which layouts,
// its conf + kernel factory, its cost-model efficiency and whether the `fixed` baseline may
// use it. runtime/labels.cpp, runtime/selection.cpp, create_conv_kernel and the benches
// iterate over the table; nothing else switches on ConvFamily.
//
// Adding a family: its folder (conf, generator, kernel with a create function of the Create
// signature below), its ConvFamily value (jit/conv/conv_kernel.h) and its row in
// conv_families.cpp.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "graph/ir.h"
#include "jit/conv/conv_direct_conf.h"
#include "jit/conv/conv_gemm1x1_conf.h"
#include "jit/conv/conv_kernel.h"
#include "jit/kernel.h"

namespace kiln {

struct ConvFamilyRow {
  ConvFamily id;
  const char* name;  // label keys, kernel names, `--family` of the CLI and the benches
  // The cheap shape test (groups, kernel size, stride) deciding whether the family is offered
  // for a problem; the family's conf decides the rest when the kernel is made.
  bool (*offered)(const ConvProblem& p);
  // The (src, dst) layouts offered, given the ISA's blocked layout.
  std::vector<std::pair<Layout, Layout>> (*layouts)(const ConvProblem& p, Layout blocked);
  // The conf and the kernel (or nullptr and *why_not). create_conv_kernel has validated the
  // weights ([OC, IC/groups, KH, KW] f32) and the bias ([OC] f32 or none) already; code_key
  // names the conf's inputs, so kernels with the same key share their code (shared_code.h).
  using Create = std::unique_ptr<Kernel> (*)(const ConvProblem& p, const ConvImpl& impl, Isa isa,
                                             const Tensor& weights, const Tensor* bias,
                                             const std::string& code_key, std::string* why_not);
  Create create;
  // The cost model (used where nothing was measured): the fraction of the FMA peak reached on
  // p with these layouts; memory_bound families add their memory time to the arithmetic
  // instead of overlapping the two.
  double (*efficiency)(const ConvProblem& p, Layout src, Layout dst);
  bool memory_bound;
  // The `fixed` strategy (one family, one layout) may choose it on the blocked layout.
  bool fixed_baseline;
  // 0: the family computes the convolution's sums as written (rounding like any f32 dot
  // product). Above 0: its transforms add rounding error (Winograd); `--accuracy strict`
  // never chooses it, and the accuracy guard demotes it first where it saves least time per
  // unit of this weight (the error one layer adds, relative to winograd4's; bench/NOTES.md,
  // "accuracy guard").
  double transform_error = 0;
  // The (src, dst) layouts offered when the session computes in bf16 (layout_bf16) and the
  // CPU has AVX512-BF16; nullptr: the family has no bf16 kernels.
  std::vector<std::pair<Layout, Layout>> (*bf16_layouts)(const ConvProblem& p) = nullptr;
  // False for a family with no measurable error beyond exact rounding (transform_error 0) that
  // does not sum the products as written (the stride-2 Winograd form: halves of weight sums):
  // a conv whose sums of integers must be exact (ConvInteger, graph/integer_ops.h) skips it.
  bool integer_exact = true;
};

// Every family, in the order candidates are offered (the solver breaks ties by it).
const std::vector<ConvFamilyRow>& conv_families();
const ConvFamilyRow& conv_family(ConvFamily f);
std::optional<ConvFamily> parse_conv_family(const std::string& name);

namespace convjit {

// The direct and gemm1x1 families' kernels of a given conf (tests and the benches change a
// conf before building). weights: [OC, IC, KH, KW] f32 (already validated); bias: [OC] or
// nullptr.
// code_key: jit/shared_code.h ("" = code of its own).
std::unique_ptr<Kernel> make_direct_kernel(const DirectConf& c, const Tensor& weights,
                                           const Tensor* bias, const std::string& code_key = "");
// The direct family's kernel for weights and bias computed every run (f32; runtime_packing()).
std::unique_ptr<Kernel> make_direct_kernel_runtime_weights(const DirectConf& c,
                                                           const std::string& code_key = "");
std::unique_ptr<Kernel> make_gemm1x1_kernel(const Gemm1x1Conf& c, const Tensor& weights,
                                            const Tensor* bias, const std::string& code_key = "");

// "conv_<family>_<f32|bf16|int8>_<src>_to_<dst>_<blocking>__<isa>" (bf16: the src layout's;
// int8: the arithmetic's)
std::string conv_kernel_name(const char* family, Layout src, Layout dst,
                             const std::string& blocking, Isa isa, bool int8 = false);

}  // namespace convjit
}  // namespace kiln
