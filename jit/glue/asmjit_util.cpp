#include "jit/glue/asmjit_util.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <tuple>

#include "graph/env.h"
#include "graph/error.h"
#include "jit/code_pool.h"
#include "jit/jit_generator.h"
#include "jit/shared_code.h"

namespace kiln::glue {

// Keeps the first asmjit error: emitters keep going after an error (their calls return the
// code, which we do not check one by one), finish() turns it into a kiln::Error. (Not in an
// anonymous namespace: AsmBuilder::Impl, a member of a header's class, holds one.)
class ErrorRecorder : public aj::ErrorHandler {
 public:
  void handleError(aj::Error err, const char* message, aj::BaseEmitter*) override {
    if (err_ == aj::kErrorOk) {
      err_ = err;
      msg_ = message ? message : aj::DebugUtils::errorAsString(err);
    }
  }
  aj::Error err_ = aj::kErrorOk;
  std::string msg_;
};

struct AsmBuilder::Impl {
  aj::CodeHolder code;
  ErrorRecorder errors;
  aj::StringLogger logger;  // attached only when KILN_JIT_LOG=1 (assembly in error messages)
  std::unique_ptr<x86::Compiler> cc;
  struct Entry {
    size_t offset, bytes;
  };
  std::vector<Entry> entries;
};

AsmBuilder::AsmBuilder(std::string name, Isa isa)
    : name_(std::move(name)), isa_(isa), impl_(std::make_unique<Impl>()) {
  if (isa != Isa::avx2 && isa != Isa::avx512)
    fail(Code::internal, "kernel " + name_ + ": asmjit glue needs avx2 or avx512, not " +
                             std::string(isa_name(isa)));
  impl_->code.init(aj::Environment::host());
  impl_->code.setErrorHandler(&impl_->errors);
  if (env_value(EnvVar::jit_log) == "1") impl_->code.setLogger(&impl_->logger);
  impl_->cc = std::make_unique<x86::Compiler>(&impl_->code);
  cc_ = impl_->cc.get();
  data_label_ = cc_->newLabel();
}

AsmBuilder::~AsmBuilder() {
  impl_->cc.reset();  // detach from the CodeHolder before it goes
}

int AsmBuilder::begin_function(const aj::FuncSignature& sig) {
  if (func_) fail(Code::internal, "kernel " + name_ + ": nested function");
  func_ = cc_->addFunc(sig);
  if (!func_) fail(Code::internal, "kernel " + name_ + ": addFunc failed");
  func_->frame().setAvxEnabled();
  func_->frame().setAvxCleanup();  // vzeroupper on return
  if (avx512()) func_->frame().setAvx512Enabled();
  funcs_.push_back(func_);
  return int(funcs_.size() - 1);
}

void AsmBuilder::end_function() {
  if (!func_) fail(Code::internal, "kernel " + name_ + ": end_function without a function");
  cc_->endFunc();
  func_ = nullptr;
}

x86::Vec AsmBuilder::vec(int lanes) {
  if (lanes == 0) lanes = width();
  if (lanes == 16 && avx512()) return cc_->newZmm();
  if (lanes == 8) return cc_->newYmm();
  fail(Code::internal,
       "kernel " + name_ + ": no " + std::to_string(lanes) + "-lane vector on " + isa_name(isa_));
}

size_t AsmBuilder::add_data(const void* data, size_t bytes, size_t align) {
  auto& entries = impl_->entries;
  for (const auto& e : entries)
    if (e.bytes == bytes && e.offset % align == 0 &&
        std::memcmp(data_.data() + e.offset, data, bytes) == 0)
      return e.offset;
  const size_t off = (data_.size() + align - 1) / align * align;
  data_.resize(off + bytes);
  std::memcpy(data_.data() + off, data, bytes);
  entries.push_back({off, bytes});
  return off;
}

x86::Mem AsmBuilder::data_mem(size_t offset) const {
  return x86::ptr(data_label_, int32_t(offset));
}

x86::Mem AsmBuilder::clanes(const std::vector<uint32_t>& bits, int lanes) {
  if (lanes == 0) lanes = width();
  if (int(bits.size()) > lanes) fail(Code::internal, "kernel " + name_ + ": constant too wide");
  std::vector<uint32_t> v(bits);
  v.resize(size_t(lanes), 0u);
  return data_mem(add_data(v.data(), v.size() * 4, 64));
}

x86::Mem AsmBuilder::cu32(uint32_t bits, int lanes) {
  if (lanes == 0) lanes = width();
  return clanes(std::vector<uint32_t>(size_t(lanes), bits), lanes);
}

x86::Mem AsmBuilder::cf32(float v, int lanes) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return cu32(b, lanes);
}

x86::Vec AsmBuilder::bcast(float v, int lanes) {
  x86::Vec r = vec(lanes);
  cc_->vmovups(r, cf32(v, lanes));
  return r;
}

Mask AsmBuilder::mask(int valid, int lanes) {
  if (lanes == 0) lanes = width();
  Mask m;
  m.valid = valid;
  m.lanes = lanes;
  if (valid >= lanes) return m;
  if (avx512()) {
    m.k = cc_->newKw();
    x86::Gp g = cc_->newGpd();
    cc_->mov(g, (1u << valid) - 1u);
    cc_->kmovw(m.k, g);
  } else {
    m.v = vec(lanes);
    cc_->vmovups(m.v, clanes(std::vector<uint32_t>(size_t(valid), 0xffffffffu), lanes));
  }
  return m;
}

Mask AsmBuilder::mask_dyn(const x86::Gp& count, int lanes) {
  if (lanes == 0) lanes = width();
  Mask m;
  m.valid = 0;  // unknown: never treated as full
  m.lanes = lanes;
  x86::Gp base = cc_->newGpq();
  if (avx512()) {
    std::vector<uint16_t> t(17);
    for (int i = 0; i <= 16; ++i) t[size_t(i)] = uint16_t((1u << i) - 1u);
    cc_->lea(base, data_mem(add_data(t.data(), t.size() * 2, 64)));
    m.k = cc_->newKw();
    cc_->kmovw(m.k, x86::word_ptr(base, count, 1));
  } else {
    // 8 all-ones lanes then 8 zero lanes: 8 lanes read at index 8 - count start with count
    // ones.
    std::vector<uint32_t> t(16, 0u);
    for (int i = 0; i < 8; ++i) t[size_t(i)] = 0xffffffffu;
    cc_->lea(base, data_mem(add_data(t.data(), t.size() * 4, 64) + 32));
    x86::Gp neg = cc_->newGpq();
    cc_->mov(neg, count);
    cc_->neg(neg);
    m.v = vec(lanes);
    cc_->vmovups(m.v, x86::ptr(base, neg, 2));
  }
  return m;
}

void AsmBuilder::load(const x86::Vec& dst, const x86::Mem& src, const Mask* m) {
  if (!m || m->full()) {
    cc_->vmovups(dst, src);
  } else if (avx512()) {
    cc_->k(m->k).z().vmovups(dst, src);
  } else {
    cc_->vmaskmovps(dst, m->v, src);
  }
}

void AsmBuilder::load_fill(const x86::Vec& dst, const x86::Mem& src, const Mask& m, float fill) {
  if (m.full()) {
    cc_->vmovups(dst, src);
    return;
  }
  cc_->vmovups(dst, cf32(fill));
  if (avx512()) {
    cc_->k(m.k).vmovups(dst, src);
  } else {
    x86::Vec v = vec();
    load(v, src, &m);
    cc_->vblendvps(dst, dst, v, m.v);
  }
}

void AsmBuilder::store(const x86::Mem& dst, const x86::Vec& src, const Mask* m) {
  if (!m || m->full()) {
    cc_->vmovups(dst, src);
  } else if (avx512()) {
    cc_->k(m->k).vmovups(dst, src);
  } else {
    cc_->vmaskmovps(dst, m->v, src);
  }
}

void AsmBuilder::fill_past(const x86::Vec& v, const Mask& m, float fill) {
  if (m.full()) return;
  x86::Vec f = vec();
  cc_->vmovups(f, cf32(fill));
  if (avx512())
    cc_->k(m.k).vmovaps(f, v);
  else
    cc_->vblendvps(f, f, v, m.v);
  cc_->vmovaps(v, f);
}

void AsmBuilder::zero_past(const x86::Vec& v, const Mask& m) {
  if (m.full()) return;
  if (avx512())
    cc_->k(m.k).z().vmovaps(v, v);
  else
    cc_->vandps(v, v, m.v);
}

// Two in-lane stages (unpck ps, then unpck pd) build, in each 128-bit lane L of u[4g + k],
// column 4L + k of rows 4g..4g+3; the cross-lane stages then gather lane L of the group
// vectors into output 4L + k.
void AsmBuilder::fold_lanes(const x86::Vec& v,
                            const std::function<void(const x86::Vec& d, const x86::Vec& a)>& op) {
  x86::Vec t = vec(8);
  x86::Vec y = v.ymm();
  if (avx512()) {
    cc_->vextractf64x4(t, v, 1);
    op(y, t);
  }
  x86::Xmm tx = t.xmm(), x = v.xmm();
  cc_->vextractf128(tx, y, 1);
  op(x, tx);
  cc_->vmovhlps(tx, tx, x);
  op(x, tx);
  cc_->vmovshdup(tx, x);
  op(x, tx);
}

void AsmBuilder::transpose(std::vector<x86::Vec>& r) {
  const size_t n = r.size();
  if (n != 8 && !(n == 16 && avx512()))
    fail(Code::internal, "kernel " + name_ + ": bad transpose size");
  const int lanes = int(n);
  std::vector<x86::Vec> t(n), u(n);
  for (size_t i = 0; i < n; i += 2) {
    t[i] = vec(lanes);
    t[i + 1] = vec(lanes);
    cc_->vunpcklps(t[i], r[i], r[i + 1]);
    cc_->vunpckhps(t[i + 1], r[i], r[i + 1]);
  }
  for (size_t g = 0; g < n; g += 4) {
    for (size_t k = 0; k < 4; ++k) u[g + k] = vec(lanes);
    cc_->vunpcklpd(u[g + 0], t[g], t[g + 2]);
    cc_->vunpckhpd(u[g + 1], t[g], t[g + 2]);
    cc_->vunpcklpd(u[g + 2], t[g + 1], t[g + 3]);
    cc_->vunpckhpd(u[g + 3], t[g + 1], t[g + 3]);
  }
  if (n == 8) {
    for (size_t k = 0; k < 4; ++k) {
      r[k] = vec(8);
      r[4 + k] = vec(8);
      if (avx512()) {  // EVEX form: the register allocator may hand out ymm16..31
        cc_->vshuff32x4(r[k], u[k], u[4 + k], 0);
        cc_->vshuff32x4(r[4 + k], u[k], u[4 + k], 3);
      } else {
        cc_->vperm2f128(r[k], u[k], u[4 + k], 0x20);
        cc_->vperm2f128(r[4 + k], u[k], u[4 + k], 0x31);
      }
    }
    return;
  }
  for (size_t k = 0; k < 4; ++k) {
    x86::Vec v0 = vec(16), v1 = vec(16), v2 = vec(16), v3 = vec(16);
    cc_->vshuff32x4(v0, u[k], u[4 + k], 0x88);
    cc_->vshuff32x4(v1, u[k], u[4 + k], 0xdd);
    cc_->vshuff32x4(v2, u[8 + k], u[12 + k], 0x88);
    cc_->vshuff32x4(v3, u[8 + k], u[12 + k], 0xdd);
    r[k] = vec(16);
    r[8 + k] = vec(16);
    r[4 + k] = vec(16);
    r[12 + k] = vec(16);
    cc_->vshuff32x4(r[k], v0, v2, 0x88);
    cc_->vshuff32x4(r[8 + k], v0, v2, 0xdd);
    cc_->vshuff32x4(r[4 + k], v1, v3, 0x88);
    cc_->vshuff32x4(r[12 + k], v1, v3, 0xdd);
  }
}

std::pair<x86::Gp, x86::Gp> AsmBuilder::loop_ptrs(
    const x86::Gp& src, const x86::Gp& dst, int64_t count, int64_t src_step, int64_t dst_step,
    const std::function<void(const x86::Gp& s, const x86::Gp& d)>& body) {
  x86::Gp s = gp(), d = gp(), n = gp();
  cc_->mov(s, src);
  cc_->mov(d, dst);
  cc_->mov(n, count);
  aj::Label top = cc_->newLabel();
  cc_->bind(top);
  body(s, d);
  cc_->add(s, src_step);
  cc_->add(d, dst_step);
  cc_->dec(n);
  cc_->jnz(top);
  return {s, d};
}

void AsmBuilder::copy_vectors(const x86::Gp& dst, const x86::Gp& src, int64_t n, int32_t off) {
  const int32_t vb = int32_t(width()) * 4;
  for (int64_t u = 0; u < n; ++u) {
    x86::Vec v = vec();
    cc_->vmovups(v, x86::ptr(src, off + int32_t(u) * vb));
    cc_->vmovups(x86::ptr(dst, off + int32_t(u) * vb), v);
  }
}

void AsmBuilder::copy_static(const x86::Gp& dst, const x86::Gp& src, int64_t count) {
  const int V = width();
  const int64_t nvec = count / V;
  const int tail = int(count % V);
  x86::Gp s = src, d = dst;
  int64_t done = 0;  // vectors copied by the loop
  if (nvec > 16) {   // a loop of 4 vectors, then the rest unrolled
    std::tie(s, d) =
        loop_ptrs(src, dst, nvec / 4, 4 * V * 4, 4 * V * 4,
                  [&](const x86::Gp& ls, const x86::Gp& ld) { copy_vectors(ld, ls, 4); });
    done = nvec / 4 * 4;
  }
  copy_vectors(d, s, nvec - done);
  if (tail) {
    Mask m = mask(tail);
    x86::Vec v = vec();
    const int32_t off = int32_t((nvec - done) * V * 4);
    load(v, x86::ptr(s, off), &m);
    store(x86::ptr(d, off), v, &m);
  }
}

void AsmBuilder::copy_dynamic(const x86::Gp& dst, const x86::Gp& src, const x86::Gp& count) {
  const int V = width();
  aj::Label l4 = cc_->newLabel(), l1 = cc_->newLabel(), lt = cc_->newLabel(),
            done = cc_->newLabel();
  cc_->bind(l4);
  cc_->cmp(count, 4 * V);
  cc_->jb(l1);
  copy_vectors(dst, src, 4);
  cc_->add(src, 4 * V * 4);
  cc_->add(dst, 4 * V * 4);
  cc_->sub(count, 4 * V);
  cc_->jmp(l4);
  cc_->bind(l1);
  cc_->cmp(count, V);
  cc_->jb(lt);
  copy_vectors(dst, src, 1);
  cc_->add(src, V * 4);
  cc_->add(dst, V * 4);
  cc_->sub(count, V);
  cc_->jmp(l1);
  cc_->bind(lt);
  cc_->test(count, count);
  cc_->jz(done);
  {
    Mask m = mask_dyn(count);
    x86::Vec v = vec();
    load(v, x86::ptr(src), &m);
    store(x86::ptr(dst), v, &m);
  }
  cc_->bind(done);
}

// Everything the code is made of, as bytes: the kernel's name (which fixes the function
// signatures), each node of the builder's list with the fields that reach the code
// (instruction ids, options and operands on virtual registers, labels, alignment, embedded
// data: the constants), and the functions' argument bindings. Binary, not asmjit's text
// formatter: formatting cost as much as a small kernel's register allocation.
std::string AsmBuilder::code_key() const {
  std::string key = name_ + '\n' + isa_name(isa_) + '\n';
  auto put = [&](const void* p, size_t n) { key.append(static_cast<const char*>(p), n); };
  auto put32 = [&](uint32_t v) { put(&v, 4); };
  for (const aj::BaseNode* n = cc_->firstNode(); n; n = n->next()) {
    put32(uint32_t(n->type()));
    if (n->isInst()) {
      const auto* in = n->as<aj::InstNode>();
      put32(uint32_t(in->id()));
      put32(uint32_t(in->options()));
      put(&in->extraReg(), sizeof(aj::RegOnly));
      put32(in->opCount());
      for (uint32_t i = 0; i < in->opCount(); ++i) put(&in->op(i), sizeof(aj::Operand_));
    } else if (n->isFunc()) {
      const auto* f = n->as<aj::FuncNode>();
      put32(f->labelId());
      put32(f->argCount());
      for (uint32_t i = 0; i < f->argCount(); ++i)
        put(&f->argPack(i), sizeof(aj::FuncNode::ArgPack));
    } else if (n->isLabel()) {
      put32(n->as<aj::LabelNode>()->labelId());
    } else if (n->isSection()) {
      put32(n->as<aj::SectionNode>()->id());
    } else if (n->isAlign()) {
      put32(uint32_t(n->as<aj::AlignNode>()->alignMode()));
      put32(n->as<aj::AlignNode>()->alignment());
    } else if (n->isEmbedData()) {
      const auto* e = n->as<aj::EmbedDataNode>();
      put32(uint32_t(e->typeId()));
      put32(uint32_t(e->repeatCount()));
      put32(uint32_t(e->dataSize()));
      put(e->data(), e->dataSize());
    } else if (n->isEmbedLabel()) {
      put32(n->as<aj::EmbedLabelNode>()->labelId());
    } else if (n->isEmbedLabelDelta()) {
      put32(n->as<aj::EmbedLabelDeltaNode>()->labelId());
      put32(n->as<aj::EmbedLabelDeltaNode>()->baseLabelId());
    } else if (!n->isSentinel() && n->type() != aj::NodeType::kComment) {
      // A node kind this key does not know (a const pool, say): no sharing rather than a key
      // that might miss what tells two kernels apart.
      return std::string();
    }
  }
  return key;
}

ExecCode AsmBuilder::finish() {
  // Emission (since construction) and assembly count as code generation (jit_generator.h).
  CodegenTimer timer(born_);
  auto& code = impl_->code;
  auto& errs = impl_->errors;
  auto check = [&](aj::Error e, const char* step) {
    if (e == aj::kErrorOk && errs.err_ == aj::kErrorOk) return;
    std::string msg = errs.err_ != aj::kErrorOk ? errs.msg_ : aj::DebugUtils::errorAsString(e);
    std::string log = impl_->logger.data() ? std::string(impl_->logger.data()) : "";
    fail(Code::internal, "generating kernel " + name_ + " failed (" + step + "): " + msg +
                             (log.empty() ? "" : "\n" + log));
  };
  if (func_) fail(Code::internal, "kernel " + name_ + ": function not ended");
  cc_->align(aj::AlignMode::kData, 64);
  cc_->bind(data_label_);
  if (!data_.empty()) cc_->embed(data_.data(), data_.size());

  const std::string key = code_key();
  if (auto c = key.empty() ? nullptr : kiln::detail::find_code(key)) {
    ExecCode out;
    out.c_ = std::static_pointer_cast<const ExecCode::Compiled>(c);
    return out;
  }

  check(cc_->finalize(), "finalize");
  check(code.flatten(), "flatten");
  check(code.resolveUnresolvedLinks(), "links");

  // Relocated to its final address in the pool, flattened here, then written there.
  auto compiled = std::make_shared<ExecCode::Compiled>();
  compiled->block = CodeBlock::reserve(code.codeSize());
  check(code.relocateToBase(uint64_t(uintptr_t(compiled->block.addr()))), "relocate");
  const size_t size = code.codeSize();
  std::vector<uint8_t> bytes(size);
  check(code.copyFlattenedData(
            bytes.data(), size,
            aj::CopySectionFlags::kPadSectionBuffer | aj::CopySectionFlags::kPadTargetBuffer),
        "copy");
  for (auto* f : funcs_) compiled->entries.push_back(size_t(code.labelOffsetFromBase(f->label())));
  compiled->block.write(bytes.data(), size);
  announce_code(name_, compiled->block.addr(), compiled->block.size());
  ExecCode out;
  out.c_ = key.empty() ? std::move(compiled)
                       : std::static_pointer_cast<const ExecCode::Compiled>(
                             kiln::detail::publish_code(key, std::move(compiled)));
  return out;
}

CopyArgs begin_copy_function(AsmBuilder& b) {
  b.begin_function(aj::FuncSignatureT<void, const float*, float*, int64_t>());
  CopyArgs a{b.gp(), b.gp(), b.gp()};
  b.func()->setArg(0, a.src);
  b.func()->setArg(1, a.dst);
  b.func()->setArg(2, a.n);
  return a;
}

int build_flat_copy(AsmBuilder& b) {
  const int idx = b.function_count();
  const CopyArgs a = begin_copy_function(b);
  b.copy_dynamic(a.dst, a.src, a.n);
  b.end_function();
  return idx;
}

int build_strided_copy(AsmBuilder& b, int64_t row, int64_t sstride, int64_t dstride) {
  auto& cc = b.cc();
  const int idx = b.function_count();
  const CopyArgs a = begin_copy_function(b);
  aj::Label top = cc.newLabel(), done = cc.newLabel();
  cc.test(a.n, a.n);
  cc.jz(done);
  cc.bind(top);
  b.copy_static(a.dst, a.src, row);
  cc.add(a.src, sstride * 4);
  cc.add(a.dst, dstride * 4);
  cc.dec(a.n);
  cc.jnz(top);
  cc.bind(done);
  b.end_function();
  return idx;
}

int64_t chunk_size(int64_t total, int64_t quantum, int64_t want, int64_t min_chunk) {
  total = std::max<int64_t>(total, 1);
  int64_t c = (total + want - 1) / std::max<int64_t>(want, 1);
  c = std::max(c, min_chunk);
  c = (c + quantum - 1) / quantum * quantum;
  c = std::min(c, (total + quantum - 1) / quantum * quantum);
  return std::max(c, quantum);
}

}  // namespace kiln::glue
