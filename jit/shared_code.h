// Generated code shared between kernels. A kernel's code is a function of its conf alone, and
// the conf of (problem, implementation, ISA, cache sizes): layers with the same problem and
// label (ResNet-50: 53 convs, 23 distinct problems) need the same code with other weights.
// The first kernel generates it; the others take the same generator. Kernels own it through
// shared_ptr and the index holds weak references, so code lives as long as a kernel uses it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <typeinfo>
#include <utility>

namespace kiln {

namespace detail {
std::shared_ptr<const void> find_code(const std::string& key);
// Publishes `code` under key, or returns the code another thread published meanwhile.
std::shared_ptr<const void> publish_code(const std::string& key, std::shared_ptr<const void> code);
}  // namespace detail

// Lookups of shared_generator with a key, and how many found code to reuse (tests, logs).
struct SharedCodeStats {
  int64_t lookups = 0, reused = 0;
};
SharedCodeStats shared_code_stats();

// A created Gen(args...). With a non-empty key — everything the kernel's code depends on —
// the generator is shared with every caller that passes the same key and role (which of the
// kernel's generators it is, e.g. "_lastoc"); with an empty key (a conf changed by hand, as
// tests and benches do) it is the caller's own.
template <class Gen, class... Args>
std::shared_ptr<const Gen> shared_generator(const std::string& key, const std::string& role,
                                            Args&&... args) {
  auto make = [&] {
    auto g = std::make_shared<Gen>(std::forward<Args>(args)...);
    g->create();
    return std::shared_ptr<const Gen>(std::move(g));
  };
  if (key.empty()) return make();
  const std::string k = key + role + '\n' + typeid(Gen).name();
  if (auto c = detail::find_code(k)) return std::static_pointer_cast<const Gen>(c);
  return std::static_pointer_cast<const Gen>(detail::publish_code(k, make()));
}

}  // namespace kiln
