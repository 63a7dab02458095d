// Shared plumbing of the asmjit-generated glue kernels: one AsmBuilder per kernel wraps an
// x86::Compiler (virtual registers) for one ISA and hides what differs between AVX-512 and
// AVX2 (zmm vs ymm, k-mask vs vmaskmovps tails, constant tables), plus a few emitters the
// kernels share (in-register transposes, copies). The code ends up in the code pool, never
// writable and executable at once (asmjit's JitRuntime on this Debian version maps its blocks
// RWX, so it is not used).
#pragma once

#include <asmjit/x86.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jit/code_pool.h"
#include "jit/cpu.h"
#include "jit/kernel.h"

namespace kiln::glue {

namespace aj = asmjit;
namespace x86 = asmjit::x86;

// Finished code, in the process's code pool (jit/code_pool.h), and where each of its
// functions starts. Kernels built from the same instructions share one (jit/shared_code.h).
class ExecCode {
 public:
  const uint8_t* base() const { return c_->block.addr(); }
  size_t size() const { return c_->block.size(); }

 private:
  friend class AsmBuilder;
  struct Compiled {
    CodeBlock block;
    std::vector<size_t> entries;  // function i starts at base() + entries[i]
  };
  std::shared_ptr<const Compiled> c_;
};

// A tail mask: `valid` leading lanes of a `lanes`-wide vector. A k register on AVX-512, a
// vector of all-ones/zero lanes on AVX2 (for vmaskmovps). `full` masks are no-ops.
struct Mask {
  int valid = 0, lanes = 0;
  x86::KReg k;
  x86::Vec v;
  bool full() const { return valid >= lanes; }
};

class AsmBuilder {
 public:
  // Throws internal for an ISA without vectors. `name` names the kernel in errors.
  AsmBuilder(std::string name, Isa isa);
  ~AsmBuilder();
  AsmBuilder(const AsmBuilder&) = delete;
  AsmBuilder& operator=(const AsmBuilder&) = delete;

  x86::Compiler& cc() { return *cc_; }
  Isa isa() const { return isa_; }
  bool avx512() const { return isa_ == Isa::avx512; }
  int width() const { return simd_width(isa_); }  // floats in a full vector
  const std::string& name() const { return name_; }

  // Starts a function (several may be built into one kernel); returns its index for entry().
  // The caller binds the arguments with func()->setArg(i, reg).
  int begin_function(const aj::FuncSignature& sig);
  aj::FuncNode* func() { return func_; }
  void end_function();
  int function_count() const { return int(funcs_.size()); }

  // A new virtual vector of `lanes` floats (16: zmm, AVX-512 only; 8: ymm; 0: width()).
  x86::Vec vec(int lanes = 0);
  x86::Gp gp() { return cc_->newGpq(); }

  // Full-vector constants (rip-relative; `lanes` as in vec()). Identical entries are shared.
  x86::Mem cf32(float v, int lanes = 0);
  x86::Mem cu32(uint32_t bits, int lanes = 0);
  x86::Mem clanes(const std::vector<uint32_t>& bits, int lanes = 0);  // missing lanes = 0
  // A register holding v in every lane.
  x86::Vec bcast(float v, int lanes = 0);

  // Static tail mask of `valid` lanes out of `lanes` (0: width()).
  Mask mask(int valid, int lanes = 0);
  // Dynamic tail mask: `count` (a register, 0..lanes) leading lanes, from a table.
  Mask mask_dyn(const x86::Gp& count, int lanes = 0);

  // dst = [src] (lanes past the mask read as 0 and are never touched); [dst] = src (only
  // the masked lanes are written). `m` may be null (full vector).
  void load(const x86::Vec& dst, const x86::Mem& src, const Mask* m = nullptr);
  void store(const x86::Mem& dst, const x86::Vec& src, const Mask* m = nullptr);
  // dst = [src] in the mask's lanes and `fill` past them (a reduction's identity: -inf for a
  // max), never touching memory past the mask.
  void load_fill(const x86::Vec& dst, const x86::Mem& src, const Mask& m, float fill);
  // v's lanes past the mask become 0 (blocked layouts' pad lanes); nothing for a full mask.
  void zero_past(const x86::Vec& v, const Mask& m);
  // v's lanes past the mask become `fill` (a reduction's identity after arithmetic on a masked
  // load); nothing for a full mask.
  void fill_past(const x86::Vec& v, const Mask& m, float fill);

  // Transposes rows.size() x rows.size() floats in place: 8 ymm or (AVX-512) 16 zmm.
  void transpose(std::vector<x86::Vec>& rows);
  // Lane 0 of v = op folded over v's lanes (halving: zmm -> ymm -> xmm -> 2 -> 1); v is
  // clobbered. op(d, a) computes d = d op a on ymm / xmm registers.
  void fold_lanes(const x86::Vec& v,
                  const std::function<void(const x86::Vec& d, const x86::Vec& a)>& op);

  // A compile-time loop of `count` (>= 1) iterations over two pointers: fresh copies of src
  // and dst, advanced by src_step / dst_step bytes after each body(s, d). Returns the copies
  // (pointing past the last iteration).
  std::pair<x86::Gp, x86::Gp> loop_ptrs(
      const x86::Gp& src, const x86::Gp& dst, int64_t count, int64_t src_step, int64_t dst_step,
      const std::function<void(const x86::Gp& s, const x86::Gp& d)>& body);

  // Copies `count` floats (compile-time) from [src] to [dst]; src/dst are not modified.
  void copy_static(const x86::Gp& dst, const x86::Gp& src, int64_t count);
  // Copies `count` (register, consumed) floats from src to dst (both advanced).
  void copy_dynamic(const x86::Gp& dst, const x86::Gp& src, const x86::Gp& count);

  // Assembles everything into read+execute memory. Throws internal naming the kernel on any
  // asmjit error recorded so far or raised now. A kernel of the same name whose builder
  // emitted the same instructions and data (another layer, another session) already did:
  // its code is shared instead (register allocation is most of a glue kernel's build).
  ExecCode finish();
  // Address of function `index` inside `code` (after finish()).
  template <class F>
  F entry(const ExecCode& code, int index) const {
    return reinterpret_cast<F>(const_cast<uint8_t*>(code.base()) +
                               code.c_->entries.at(size_t(index)));
  }

 private:
  struct Impl;
  // What finish() shares code by ("" when the code must not be shared).
  std::string code_key() const;
  size_t add_data(const void* data, size_t bytes, size_t align);
  // Copies `n` full vectors from [src + off] to [dst + off] (one fresh register each).
  void copy_vectors(const x86::Gp& dst, const x86::Gp& src, int64_t n, int32_t off = 0);
  x86::Mem data_mem(size_t offset) const;

  std::string name_;
  Isa isa_;
  std::chrono::steady_clock::time_point born_ = std::chrono::steady_clock::now();  // codegen time
  std::unique_ptr<Impl> impl_;
  x86::Compiler* cc_ = nullptr;
  aj::FuncNode* func_ = nullptr;
  std::vector<aj::FuncNode*> funcs_;
  std::vector<uint8_t> data_;
  aj::Label data_label_;
};

// The glue kernels' common function shape: fn(src, dst, n).
using CopyFn = void (*)(const float* src, float* dst, int64_t n);
struct CopyArgs {
  x86::Gp src, dst, n;
};
// Starts a function of CopyFn's signature on `b` with its arguments bound.
CopyArgs begin_copy_function(AsmBuilder& b);
// Whole CopyFn functions; each returns its index for AsmBuilder::entry.
// fn(src, dst, n): n contiguous floats.
int build_flat_copy(AsmBuilder& b);
// fn(src, dst, n): n rows (n >= 0) of `row` floats (unrolled); rows `sstride` floats apart in
// src and `dstride` apart in dst.
int build_strided_copy(AsmBuilder& b, int64_t row, int64_t sstride, int64_t dstride);

// Base of the glue kernels: a name, a tile count and the code they run.
class GlueKernel : public Kernel {
 public:
  const std::string& name() const override { return name_; }
  int64_t tiles() const override { return tiles_; }

 protected:
  std::string name_;
  int64_t tiles_ = 1;
  ExecCode code_;
};

// Splits `total` items into chunks of a multiple of `quantum` so that there are about
// `want` chunks but none smaller than `min_chunk` items (the last may be shorter).
int64_t chunk_size(int64_t total, int64_t quantum, int64_t want, int64_t min_chunk);

}  // namespace kiln::glue
