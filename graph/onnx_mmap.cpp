#include "graph/onnx_mmap.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "graph/alloc.h"
#include "graph/error.h"

namespace kiln {

MappedFile map_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(Code::io_error, "cannot open '" + path + "': " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }  // the mapping stays valid after close
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    fail(Code::io_error, "cannot size '" + path + "': " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail(Code::io_error, "'" + path + "' is not a regular file");
  MappedFile m;
  m.size = size_t(st.st_size);
  if (m.size == 0) return m;
  if (m.size <= kReadBelow) {
    // Read into a buffer that a previous load's freed one serves (graph/alloc.h): a fresh
    // mapping's pages are each faulted in again on every load.
    std::shared_ptr<void> buf = alloc_zeroed(m.size);
    auto* p = static_cast<uint8_t*>(buf.get());
    for (size_t done = 0; done < m.size;) {
      const ssize_t n = ::pread(fd, p + done, m.size - done, off_t(done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail(Code::io_error, "cannot read '" + path + "': " + std::strerror(errno));
      if (n == 0) fail(Code::io_error, "'" + path + "' became shorter while it was read");
      done += size_t(n);
    }
    m.keep = std::move(buf);
    m.data = p;
    return m;
  }
  // PROT_WRITE on a private mapping costs nothing until a page is written; it turns a stray
  // write to a constant into a private copy instead of a crash.
  void* p = ::mmap(nullptr, m.size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED) fail(Code::io_error, "cannot map '" + path + "': " + std::strerror(errno));
  const size_t size = m.size;
  m.keep = std::shared_ptr<void>(p, [size](void* q) { ::munmap(q, size); });
  m.data = static_cast<const uint8_t*>(p);
  return m;
}

}  // namespace kiln
