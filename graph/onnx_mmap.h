// Read-only views of whole files, shared by the tensors that alias them (model files and
// external-data files): loading a model reads its weights where the page cache already holds
// them instead of copying them into fresh memory (a first touch of a fresh page costs
// microseconds on a VM).
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

// Maps `path` privately (copy-on-write: a write through an aliasing Tensor would change only
// this process's copy and never the file, and cannot fault). Throws io_error naming the path
// when it cannot open, size or map it, or when it is not a regular file.
// Like any mapping, the bytes change (or accesses fault with SIGBUS) if another process
// truncates or rewrites the file in place while it is mapped; replacing it (write + rename,
// what exporters do) is safe.
MappedFile map_file(const std::string& path);

}  // namespace kiln
