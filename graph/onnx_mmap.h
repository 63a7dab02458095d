// Views of whole files, shared by the tensors that alias them (model files and external-data
// files). A large file is mapped: the weights are read where the page cache already holds
// them, with no copy in this process. A small one (up to kReadBelow) is read into a buffer
// that memory freed by an earlier load serves (graph/alloc.h): a first touch of a fresh page
// costs microseconds on a VM, and a fresh mapping's pages are all first touches on every
// load, while a reused buffer's are warm.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace kiln {

struct MappedFile {
  // Unmaps when the last holder (this struct or a Tensor aliasing the bytes) lets go.
  std::shared_ptr<void> keep;
  const uint8_t* data = nullptr;  // nullptr for an empty file
  size_t size = 0;
};

constexpr size_t kReadBelow = size_t(32) << 20;

// Maps or reads `path` privately (a write through an aliasing Tensor would change only this
// process's copy and never the file, and cannot fault). Throws io_error naming the path
// when it cannot open, size or map it, or when it is not a regular file.
// Like any mapping, a mapped file's bytes change (or accesses fault with SIGBUS) if another
// process truncates or rewrites the file in place while it is mapped; replacing it (write + rename,
// what exporters do) is safe.
MappedFile map_file(const std::string& path);

}  // namespace kiln
