#include "jit/code_pool.h"

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "graph/env.h"
#include "graph/error.h"

namespace kiln {

// One memfd of kChunk bytes (sparse: pages exist once written), mapped read+execute.
struct CodeBlock::Chunk {
  int fd = -1;
  uint8_t* base = nullptr;
  size_t size = 0;
  std::map<size_t, size_t> free;  // offset -> length, coalesced; guarded by the pool's mutex
  bool retired = false;           // a fork happened: never written again (see Pool)
  ~Chunk() {
    if (base) ::munmap(base, size);
    if (fd >= 0) ::close(fd);
  }
};

namespace {

constexpr size_t kChunk = size_t(64) << 20;  // address space only; pages exist once written
constexpr size_t kAlign = 64;

// After fork() parent and child share every chunk's file. Were either to write into a range
// the other still runs (or considers free), it would change the other's code, so at a fork
// both retire all chunks: their code stays, nothing is written to them again.
struct Pool {
  Pool() {
    ::pthread_atfork(prepare, after_fork, after_fork);
    // perf resolves JIT symbols through /tmp/perf-PID.map only in anonymous mappings; the
    // memfd would show as one unnamed file. Profiling sessions use private mappings.
    disabled = env_value(EnvVar::perf_map) == "1";
  }
  static void prepare();
  static void after_fork();
  std::mutex mu;
  std::vector<std::shared_ptr<CodeBlock::Chunk>> chunks;
  bool disabled = false;  // memfd or its RX mapping refused: private mappings instead

  std::shared_ptr<CodeBlock::Chunk> new_chunk(size_t bytes) {
#ifndef MFD_EXEC
#define MFD_EXEC 0x10U  // Linux 6.3: ask for an executable memfd where memfd_noexec is set
#endif
    int fd = ::memfd_create("kiln-jit", MFD_CLOEXEC | MFD_EXEC);
    if (fd < 0 && errno == EINVAL) fd = ::memfd_create("kiln-jit", MFD_CLOEXEC);
    if (fd < 0) return nullptr;
    auto c = std::make_shared<CodeBlock::Chunk>();
    c->fd = fd;
    c->size = std::max(kChunk, (bytes + 4095) / 4096 * 4096);
    if (::ftruncate(fd, off_t(c->size)) != 0) return nullptr;
    void* p = ::mmap(nullptr, c->size, PROT_READ | PROT_EXEC, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return nullptr;
    c->base = static_cast<uint8_t*>(p);
    c->free[0] = c->size;
    return c;
  }

  // First fit over the chunks; a new chunk when none has room. Null: pool unavailable.
  std::shared_ptr<CodeBlock::Chunk> take(size_t bytes, size_t* off) {
    std::lock_guard<std::mutex> lock(mu);
    if (disabled) return nullptr;
    for (auto& c : chunks)
      if (!c->retired)
        for (auto it = c->free.begin(); it != c->free.end(); ++it)
          if (it->second >= bytes) {
            *off = it->first;
            const size_t rest = it->second - bytes;
            c->free.erase(it);
            if (rest) c->free[*off + bytes] = rest;
            return c;
          }
    auto c = new_chunk(bytes);
    if (!c) {
      disabled = true;
      return nullptr;
    }
    chunks.push_back(c);
    *off = 0;
    c->free.clear();
    if (c->size > bytes) c->free[bytes] = c->size - bytes;
    return c;
  }

  void give(CodeBlock::Chunk& c, size_t off, size_t bytes) {
    std::lock_guard<std::mutex> lock(mu);
    if (c.retired) return;
    auto next = c.free.lower_bound(off);
    if (next != c.free.end() && off + bytes == next->first) {
      bytes += next->second;
      next = c.free.erase(next);
    }
    if (next != c.free.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == off) {
        prev->second += bytes;
        return;
      }
    }
    c.free[off] = bytes;
  }
};

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: kernels in static objects may outlive it
  return *p;
}

void Pool::prepare() {
  pool().mu.lock();
}

void Pool::after_fork() {
  Pool& p = pool();
  for (auto& c : p.chunks) {
    c->retired = true;
    c->free.clear();
  }
  p.mu.unlock();
}

}  // namespace

bool code_pool_active() {
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mu);
  return !p.disabled;
}

CodeBlock CodeBlock::reserve(size_t bytes) {
  CodeBlock b;
  b.reserved_ = std::max<size_t>(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
  size_t off = 0;
  if (auto c = pool().take(b.reserved_, &off)) {
    b.chunk_ = std::move(c);
    b.addr_ = b.chunk_->base + off;
    return b;
  }
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  b.reserved_ = (b.reserved_ + page - 1) / page * page;
  void* p =
      ::mmap(nullptr, b.reserved_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    fail(Code::out_of_memory, "cannot map " + std::to_string(bytes) + " bytes for JIT code");
  b.addr_ = static_cast<uint8_t*>(p);
  return b;
}

void CodeBlock::write(const void* code, size_t bytes) {
  if (written_ || bytes > reserved_)
    fail(Code::internal, "JIT code block written twice or past its end");
  if (chunk_) {
    const size_t off = size_t(addr_ - chunk_->base);
    const uint8_t* src = static_cast<const uint8_t*>(code);
    for (size_t done = 0; done < bytes;) {
      const ssize_t n = ::pwrite(chunk_->fd, src + done, bytes - done, off_t(off + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0)
        fail(Code::out_of_memory, std::string("cannot write JIT code: ") + std::strerror(errno));
      done += size_t(n);
    }
  } else {
    std::memcpy(addr_, code, bytes);
    if (::mprotect(addr_, reserved_, PROT_READ | PROT_EXEC) != 0)
      fail(Code::internal, "cannot make JIT code executable: " + std::string(std::strerror(errno)));
  }
  size_ = bytes;
  written_ = true;
}

void CodeBlock::release() {
  if (!addr_) return;
  if (chunk_)
    pool().give(*chunk_, size_t(addr_ - chunk_->base), reserved_);
  else
    ::munmap(addr_, reserved_);
  chunk_.reset();
  addr_ = nullptr;
  size_ = reserved_ = 0;
  written_ = false;
}

CodeBlock& CodeBlock::operator=(CodeBlock&& o) noexcept {
  if (this != &o) {
    release();
    chunk_ = std::move(o.chunk_);
    addr_ = o.addr_;
    size_ = o.size_;
    reserved_ = o.reserved_;
    written_ = o.written_;
    o.addr_ = nullptr;
    o.size_ = o.reserved_ = 0;
    o.written_ = false;
  }
  return *this;
}

CodeBlock::~CodeBlock() {
  release();
}

void announce_code(const std::string& name, const void* code, size_t size) {
  const std::string dir = env_value(EnvVar::jit_dump);
  const bool perf_map = env_value(EnvVar::perf_map) == "1";
  if (dir.empty() && !perf_map) return;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (!dir.empty()) {
    std::ofstream f(dir + "/" + name + ".bin", std::ios::binary);
    f.write(static_cast<const char*>(code), std::streamsize(size));
  }
  if (perf_map) {
    const std::string path = "/tmp/perf-" + std::to_string(getpid()) + ".map";
    if (FILE* f = std::fopen(path.c_str(), "a")) {
      std::fprintf(f, "%lx %zx %s\n", reinterpret_cast<unsigned long>(code), size, name.c_str());
      std::fclose(f);
    }
  }
}

}  // namespace kiln
