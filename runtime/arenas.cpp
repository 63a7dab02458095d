#include "runtime/arenas.h"

#include <map>
#include <memory>
#include <mutex>

namespace kiln {

tbb::task_arena& shared_arena(int threads) {
  struct Registry {
    std::mutex mu;
    std::map<int, std::unique_ptr<tbb::task_arena>> arenas;
  };
  // Never destroyed: sessions released by other static destructors at exit may still use one.
  static Registry* r = new Registry;
  std::lock_guard<std::mutex> lock(r->mu);
  std::unique_ptr<tbb::task_arena>& a = r->arenas[threads];
  if (!a) {
    a = std::make_unique<tbb::task_arena>(threads);
    a->initialize();
  }
  return *a;
}

}  // namespace kiln
