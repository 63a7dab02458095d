#include "jit/shared_code.h"

#include <mutex>
#include <unordered_map>

namespace kiln {
namespace {

struct Index {
  std::mutex mu;
  std::unordered_map<std::string, std::weak_ptr<const void>> code;
  SharedCodeStats stats;
  size_t sweep_at = 64;  // drop dead entries when the map reaches this size
};

Index& index() {
  static Index* i = new Index;  // never destroyed: kernels may die during static destruction
  return *i;
}

}  // namespace

namespace detail {

std::shared_ptr<const void> find_code(const std::string& key) {
  Index& ix = index();
  std::lock_guard<std::mutex> lock(ix.mu);
  ++ix.stats.lookups;
  auto it = ix.code.find(key);
  if (it == ix.code.end()) return nullptr;
  auto c = it->second.lock();
  if (c) ++ix.stats.reused;
  return c;
}

std::shared_ptr<const void> publish_code(const std::string& key, std::shared_ptr<const void> code) {
  Index& ix = index();
  std::lock_guard<std::mutex> lock(ix.mu);
  auto& slot = ix.code[key];
  if (auto other = slot.lock()) return other;  // generated twice at once: keep the first
  slot = code;
  if (ix.code.size() >= ix.sweep_at) {
    for (auto it = ix.code.begin(); it != ix.code.end();)
      it = it->second.expired() ? ix.code.erase(it) : std::next(it);
    ix.sweep_at = std::max<size_t>(64, 2 * ix.code.size());
  }
  return code;
}

}  // namespace detail

SharedCodeStats shared_code_stats() {
  Index& ix = index();
  std::lock_guard<std::mutex> lock(ix.mu);
  return ix.stats;
}

}  // namespace kiln
