#include "graph/ir.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <new>
#include <queue>
#include <sstream>

#include "graph/enum_name.h"

namespace kiln {

const char* code_name(Code c) {
  static const char* const kNames[] = {
      "ok",        "invalid argument", "invalid model", "unsupported", "shape mismatch",
      "I/O error", "out of memory",    "internal error"};
  return enum_name(c, kNames);
}

namespace {
struct DTypeInfo {
  DType dtype;
  size_t size;
  const char* name;
};
constexpr DTypeInfo kDTypes[] = {{DType::f32, 4, "float32"}, {DType::u8, 1, "uint8"},
                                 {DType::i8, 1, "int8"},     {DType::i32, 4, "int32"},
                                 {DType::i64, 8, "int64"},   {DType::boolean, 1, "bool"},
                                 {DType::f64, 8, "float64"}};
const DTypeInfo* dtype_info(DType t) {
  for (const DTypeInfo& d : kDTypes)
    if (d.dtype == t) return &d;
  return nullptr;
}
}  // namespace

size_t dtype_size(DType t) {
  if (const DTypeInfo* d = dtype_info(t)) return d->size;
  fail(Code::internal, "dtype " + std::to_string(int(t)) + " has no size");
}
const char* dtype_name(DType t) {
  const DTypeInfo* d = dtype_info(t);
  return d ? d->name : "an unknown dtype";
}
DType held_dtype(DType t) {
  return t == DType::u8 || t == DType::i8 || t == DType::f64 ? DType::f32
         : t == DType::i32                                   ? DType::i64
                                                             : t;
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (d < 0) fail(Code::invalid_model, "negative dimension in shape " + shape_str(s));
    if (d != 0 && n > (int64_t(1) << 62) / d)
      fail(Code::invalid_model, "shape " + shape_str(s) + " has too many elements");
    n *= d;
  }
  return n;
}

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < s.size(); ++i) os << (i ? "," : "") << s[i];
  os << ']';
  return os.str();
}

Tensor::Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  numel_ = shape_numel(shape_);
  owner_ = alloc_zeroed(nbytes());
  data_ = owner_.get();
}

struct Tensor::Unaligned {
  std::shared_ptr<void> owner;  // keeps the bytes alive
  const void* bytes = nullptr;
  size_t n = 0;
  std::once_flag once;
  std::shared_ptr<void> copy;
};

Tensor Tensor::alias_unaligned(DType dtype, Shape shape, std::shared_ptr<void> owner,
                               const void* bytes) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.numel_ = shape_numel(t.shape_);
  t.lazy_ = std::make_shared<Unaligned>();
  t.lazy_->owner = std::move(owner);
  t.lazy_->bytes = bytes;
  t.lazy_->n = t.nbytes();
  return t;
}

// Thread-safe: concurrent kernel builds may read one shared constant.
void* Tensor::aligned_copy() const {
  Unaligned& u = *lazy_;
  std::call_once(u.once, [&] {
    void* p = std::aligned_alloc(64, std::max<size_t>(64, (u.n + 63) / 64 * 64));
    if (!p) fail(Code::out_of_memory, "cannot allocate " + std::to_string(u.n) + " bytes");
    if (u.n) std::memcpy(p, u.bytes, u.n);
    u.copy = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  });
  return u.copy.get();
}

const void* Tensor::stored_bytes() const {
  return lazy_ ? lazy_->bytes : data_;
}

Tensor Tensor::wrap(DType dtype, Shape shape, void* data) {
  return alias(dtype, std::move(shape), nullptr, data);
}

Tensor Tensor::alias(DType dtype, Shape shape, std::shared_ptr<void> owner, void* data) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.numel_ = shape_numel(t.shape_);
  t.owner_ = std::move(owner);
  t.data_ = data;
  return t;
}

template <class T>
static void check_type(DType d) {
  constexpr DType want = std::is_same_v<T, float>     ? DType::f32
                         : std::is_same_v<T, uint8_t> ? DType::boolean
                         : std::is_same_v<T, int8_t>  ? DType::i8
                         : std::is_same_v<T, int32_t> ? DType::i32
                         : std::is_same_v<T, double>  ? DType::f64
                                                      : DType::i64;
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, int64_t> ||
                std::is_same_v<T, uint8_t> || std::is_same_v<T, int8_t> ||
                std::is_same_v<T, int32_t> || std::is_same_v<T, double>);
  if (d == DType::u8 && std::is_same_v<T, uint8_t>) return;  // bool and uint8: one byte each
  if (d != want)
    fail(Code::internal,
         std::string("tensor of ") + dtype_name(d) + " accessed as " + dtype_name(want));
}

// A constant whose data the session released after packing (runtime/plan.h) has elements but
// no buffer: reading it is a bug, reported instead of dereferencing null.
static void check_data(const void* data, int64_t numel) {
  if (!data && numel > 0) fail(Code::internal, "tensor data was released after packing");
}

template <class T>
T* Tensor::data() {
  check_type<T>(dtype_);
  check_data(raw(), numel_);
  return static_cast<T*>(raw());
}
template <class T>
const T* Tensor::data() const {
  check_type<T>(dtype_);
  check_data(raw(), numel_);
  return static_cast<const T*>(raw());
}
template float* Tensor::data<float>();
template int64_t* Tensor::data<int64_t>();
template const float* Tensor::data<float>() const;
template const int64_t* Tensor::data<int64_t>() const;
template uint8_t* Tensor::data<uint8_t>();
template const uint8_t* Tensor::data<uint8_t>() const;
template int8_t* Tensor::data<int8_t>();
template const int8_t* Tensor::data<int8_t>() const;
template int32_t* Tensor::data<int32_t>();
template const int32_t* Tensor::data<int32_t>() const;
template double* Tensor::data<double>();
template const double* Tensor::data<double>() const;

bool Tensor::shares_owner(const std::shared_ptr<void>& owner) const {
  auto same = [&](const std::shared_ptr<void>& a) {
    return a && !a.owner_before(owner) && !owner.owner_before(a);
  };
  return owner && (same(owner_) || (lazy_ && same(lazy_->owner)));
}

Tensor Tensor::clone() const {
  Tensor t(dtype_, shape_);
  if (nbytes()) std::memcpy(t.data_, stored_bytes(), nbytes());
  return t;
}

void own_tensors_of(Graph& g, const std::shared_ptr<void>& owner) {
  if (!owner) return;
  auto own = [&](Tensor& t) {
    if (t.shares_owner(owner)) t = t.clone();
  };
  for (Value& v : g.values)
    if (v.constant) own(*v.constant);
  for (Node& n : g.nodes)
    for (auto& [name, a] : n.attrs)
      if (a.kind == Attribute::Kind::tensor) own(a.t);
}

void own_borrowed(Graph& g) {
  if (!g.borrowed) return;
  own_tensors_of(g, g.borrowed);
  if (g.borrowed.use_count() != 1)
    fail(Code::internal, "something still refers to the caller's model bytes after the load");
  g.borrowed.reset();
}

// ---------------------------------------------------------------------------------- Node

std::vector<std::string> branch_reads(const Node& n) {
  std::vector<std::string> r;
  for (const auto& [name, a] : n.attrs)
    if (a.g) r.insert(r.end(), a.g->outer.begin(), a.g->outer.end());
  std::sort(r.begin(), r.end());
  r.erase(std::unique(r.begin(), r.end()), r.end());
  return r;
}

std::string Node::where() const {
  return "node '" + name + "' (" + op + ")";
}

void Node::fail(Code code, const std::string& msg) const {
  kiln::fail(code, where() + ": " + msg);
}

static const char* kind_name(Attribute::Kind k) {
  static const char* const kNames[] = {"float", "int",     "string", "floats",
                                       "ints",  "strings", "tensor"};
  return enum_name(k, kNames);
}

static const Attribute* get_attr(const Node& n, const std::string& name, Attribute::Kind want) {
  auto it = n.attrs.find(name);
  if (it == n.attrs.end()) return nullptr;
  if (it->second.kind != want)
    n.fail(Code::invalid_model, "attribute '" + name + "' should be " + kind_name(want) +
                                    " but is " + kind_name(it->second.kind));
  return &it->second;
}

int64_t Node::attr_i(const std::string& name, int64_t def) const {
  auto* a = get_attr(*this, name, Attribute::Kind::i);
  return a ? a->i : def;
}
float Node::attr_f(const std::string& name, float def) const {
  auto* a = get_attr(*this, name, Attribute::Kind::f);
  return a ? a->f : def;
}
std::string Node::attr_s(const std::string& name, const std::string& def) const {
  auto* a = get_attr(*this, name, Attribute::Kind::s);
  return a ? a->s : def;
}
std::vector<int64_t> Node::attr_ints(const std::string& name, std::vector<int64_t> def) const {
  auto* a = get_attr(*this, name, Attribute::Kind::ints);
  return a ? a->ints : def;
}
std::vector<float> Node::attr_floats(const std::string& name, std::vector<float> def) const {
  auto* a = get_attr(*this, name, Attribute::Kind::floats);
  return a ? a->floats : def;
}
const Tensor* Node::attr_t(const std::string& name) const {
  auto* a = get_attr(*this, name, Attribute::Kind::tensor);
  return a ? &a->t : nullptr;
}

// --------------------------------------------------------------------------------- Graph

ValueId Graph::add_value(std::string name, DType dtype) {
  if (index_.count(name)) fail(Code::invalid_model, "value '" + name + "' is defined twice");
  ValueId id = ValueId(values.size());
  index_.emplace(name, id);
  values.push_back(Value{std::move(name), dtype, {}, false, std::nullopt});
  return id;
}

ValueId Graph::add_const(std::string name, Tensor t) {
  ValueId id = add_value(std::move(name), t.dtype());
  Value& v = values[size_t(id)];
  v.shape = t.shape();
  v.shape_known = true;
  v.constant = std::move(t);
  return id;
}

ValueId Graph::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? kNoValue : it->second;
}

void Graph::reindex() {
  index_.clear();
  for (size_t i = 0; i < values.size(); ++i) index_.emplace(values[i].name, ValueId(i));
}

std::vector<int> Graph::producers() const {
  std::vector<int> p(values.size(), -1);
  for (size_t i = 0; i < nodes.size(); ++i)
    for (ValueId o : nodes[i].outputs)
      if (o != kNoValue) p[size_t(o)] = int(i);
  return p;
}

std::vector<std::vector<int>> Graph::consumers() const {
  std::vector<std::vector<int>> c(values.size());
  for (size_t i = 0; i < nodes.size(); ++i)
    for (ValueId v : nodes[i].inputs)
      if (v != kNoValue && (c[size_t(v)].empty() || c[size_t(v)].back() != int(i)))
        c[size_t(v)].push_back(int(i));
  return c;
}

bool Graph::is_output(ValueId v) const {
  for (ValueId o : outputs)
    if (o == v) return true;
  return false;
}

void Graph::topo_sort() {
  // Kahn's algorithm, taking ready nodes in their original order (stable).
  std::vector<int> prod(values.size(), -1);
  for (size_t i = 0; i < nodes.size(); ++i)
    for (ValueId o : nodes[i].outputs) {
      if (o == kNoValue) continue;
      if (prod[size_t(o)] != -1)
        nodes[i].fail(Code::invalid_model, "output '" + values[size_t(o)].name +
                                               "' is also produced by " +
                                               nodes[size_t(prod[size_t(o)])].where());
      prod[size_t(o)] = int(i);
    }
  std::vector<char> is_input(values.size(), 0);
  for (ValueId v : inputs) is_input[size_t(v)] = 1;
  std::vector<int> pending(nodes.size(), 0);
  std::vector<std::vector<int>> users(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i)
    for (ValueId v : nodes[i].inputs) {
      if (v == kNoValue) continue;
      int p = prod[size_t(v)];
      if (p < 0) {
        const Value& val = values[size_t(v)];
        if (!val.is_const() && !is_input[size_t(v)])
          nodes[i].fail(Code::invalid_model, "input '" + val.name +
                                                 "' is not a graph input, an initializer or " +
                                                 "the output of any node");
        continue;
      }
      ++pending[i];
      users[size_t(p)].push_back(int(i));
    }
  std::vector<Node> sorted;
  sorted.reserve(nodes.size());
  // Min-heap on the original index: keeps the model's own order when it is already valid.
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (!pending[i]) ready.push(int(i));
  std::vector<int> order;
  while (!ready.empty()) {
    int n = ready.top();
    ready.pop();
    order.push_back(n);
    for (int u : users[size_t(n)])
      if (--pending[size_t(u)] == 0) ready.push(u);
  }
  if (order.size() != nodes.size()) {
    for (size_t i = 0; i < nodes.size(); ++i)
      if (pending[i]) nodes[i].fail(Code::invalid_model, "is part of a cycle");
  }
  for (int i : order) sorted.push_back(std::move(nodes[size_t(i)]));
  nodes = std::move(sorted);
}

std::string unique_value_name(const Graph& g, const std::string& base) {
  if (g.find(base) == kNoValue) return base;
  for (int i = 1;; ++i) {
    std::string s = base + "_" + std::to_string(i);
    if (g.find(s) == kNoValue) return s;
  }
}

const Tensor* const_tensor(const Graph& g, ValueId v) {
  return v != kNoValue && g.value(v).is_const() ? &*g.value(v).constant : nullptr;
}

bool is4d(const Graph& g, ValueId v) {
  return v != kNoValue && g.value(v).shape.size() == 4;
}

const Tensor* const_f32(const Graph& g, ValueId v) {
  const Tensor* t = const_tensor(g, v);
  return t && g.value(v).dtype == DType::f32 ? t : nullptr;
}

Tensor ints_tensor(const std::vector<int64_t>& v) {
  Tensor t(DType::i64, {int64_t(v.size())});
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return t;
}

std::optional<std::vector<int64_t>> ints_of(const Graph& g, const Node& n, size_t i) {
  const ValueId v = n.in(i);
  if (v == kNoValue || !g.value(v).is_const() || g.value(v).dtype != DType::i64)
    return std::nullopt;
  const Tensor& t = *g.value(v).constant;
  return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.numel());
}

}  // namespace kiln
