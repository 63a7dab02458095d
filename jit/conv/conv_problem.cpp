#include "jit/conv/conv_problem.h"

#include <cctype>
#include <cstdlib>

#include "graph/error.h"

namespace kiln {
namespace {

// Every size field with its key in the problem string, in str()'s order.
struct Dim {
  const char* key;
  int64_t ConvProblem::*field;
};
constexpr Dim kDims[] = {
    {"mb", &ConvProblem::n},  {"g", &ConvProblem::groups}, {"ic", &ConvProblem::ic},
    {"ih", &ConvProblem::ih}, {"iw", &ConvProblem::iw},    {"oc", &ConvProblem::oc},
    {"oh", &ConvProblem::oh}, {"ow", &ConvProblem::ow},    {"kh", &ConvProblem::kh},
    {"kw", &ConvProblem::kw}, {"sh", &ConvProblem::sh},    {"sw", &ConvProblem::sw},
    {"dh", &ConvProblem::dh}, {"dw", &ConvProblem::dw},    {"pt", &ConvProblem::pt},
    {"pl", &ConvProblem::pl}, {"pb", &ConvProblem::pb},    {"pr", &ConvProblem::pr}};
// Index ranges of kDims: [first, last).
enum : size_t { kInput = 2, kOutput = 5, kWindowEnd = 12, kPositiveEnd = 14 };

// Sets the fields to consecutive values of `v`, from v[first].
void assign(ConvProblem& p, std::initializer_list<int64_t ConvProblem::*> fields,
            const std::vector<int64_t>& v, size_t first = 0) {
  for (int64_t ConvProblem::*f : fields) p.*f = v[first++];
}

}  // namespace

std::string ConvProblem::str() const {
  std::string r;
  auto s = [](const char* k, int64_t v) {
    std::string t(k);
    t += std::to_string(v);
    return t;
  };
  if (n != 1) r += s("mb", n);
  if (groups != 1) r += s("g", groups);
  for (size_t i = kInput; i < kWindowEnd; ++i)
    r += (i == kOutput ? "_" : "") + s(kDims[i].key, this->*kDims[i].field);
  if (dh != 1 || dw != 1) r += s("dh", dh) + s("dw", dw);
  if (pt == pb && pl == pr)
    r += s("ph", pt) + s("pw", pl);
  else
    r += s("pt", pt) + s("pl", pl) + s("pb", pb) + s("pr", pr);
  if (!bias) r += "_nobias";
  if (!post.empty()) r += "_" + post_ops_str(post);
  return r;
}

namespace {

// A cursor over a problem string; every failure names the string and what was expected.
class ProblemReader {
 public:
  explicit ProblemReader(const std::string& s) : s_(s) {}
  [[noreturn]] void error(const std::string& what) const {
    fail(Code::invalid_argument, "conv problem \"" + s_ + "\": " + what);
  }
  bool done() const { return pos_ == s_.size(); }
  bool at(const std::string& t) const { return s_.compare(pos_, t.size(), t) == 0; }
  // `key` followed by a decimal number, when the string continues with it (key and digit).
  bool next_is(const char* key) const {
    const std::string k(key);
    return at(k) && pos_ + k.size() < s_.size() && std::isdigit((unsigned char)s_[pos_ + k.size()]);
  }
  int64_t field(const char* key) {
    if (!next_is(key))
      error(std::string("expected '") + key + "<number>' at offset " + std::to_string(pos_) +
            (done() ? " (end of string)" : ", found '" + s_.substr(pos_) + "'"));
    pos_ += std::string(key).size();
    size_t end = pos_;
    while (end < s_.size() && std::isdigit((unsigned char)s_[end])) ++end;
    if (end - pos_ > 12) error(std::string("'") + key + "' is too large");
    const int64_t v = std::stoll(s_.substr(pos_, end - pos_));
    pos_ = end;
    return v;
  }
  bool eat(const std::string& t) {
    if (!at(t)) return false;
    pos_ += t.size();
    return true;
  }
  float number() {
    const char* b = s_.c_str() + pos_;
    char* e = nullptr;
    const float v = std::strtof(b, &e);
    if (e == b) error("expected a number at offset " + std::to_string(pos_));
    pos_ += size_t(e - b);
    return v;
  }
  size_t pos() const { return pos_; }
  const std::string& str() const { return s_; }

 private:
  const std::string& s_;
  size_t pos_ = 0;
};

PostOp parse_post_op(ProblemReader& r) {
  // Longest name first: "relu" must not take the start of a longer name.
  constexpr PostOp::Kind kinds[] = {PostOp::Kind::gelu_tanh,
                                    PostOp::Kind::scale_shift,
                                    PostOp::Kind::hardsigmoid,
                                    PostOp::Kind::leaky_relu,
                                    PostOp::Kind::hardswish,
                                    PostOp::Kind::sigmoid,
                                    PostOp::Kind::swish,
                                    PostOp::Kind::relu,
                                    PostOp::Kind::clip,
                                    PostOp::Kind::add,
                                    PostOp::Kind::gelu,
                                    PostOp::Kind::quant_dequant_u8,
                                    PostOp::Kind::quant_dequant_s8,
                                    PostOp::Kind::tanh,
                                    PostOp::Kind::selu,
                                    PostOp::Kind::elu,
                                    PostOp::Kind::mish,
                                    PostOp::Kind::prelu};
  for (PostOp::Kind k : kinds) {
    const std::string name = post_op_name(k);
    if (!r.at(name)) continue;
    const size_t after = r.pos() + name.size();
    // clip<min>_<max>, selu<alpha>_<gamma>, leaky_relu<alpha>, ... as post_ops_str writes them
    const int params = post_op_params(k);
    const bool param = params > 0;
    if (!param && after < r.str().size() && r.str()[after] != '_') continue;
    r.eat(name);
    PostOp op;
    op.kind = k;
    if (params >= 1) op.alpha = r.number();
    if (params == 2) {
      if (!r.eat("_")) r.error(name + " needs two parameters, <a>_<b>");
      op.beta = r.number();
    }
    return op;
  }
  r.error("unknown post-op at offset " + std::to_string(r.pos()) + ": '" + r.str().substr(r.pos()) +
          "'");
}

}  // namespace

ConvProblem ConvProblem::parse(const std::string& s) {
  ProblemReader r(s);
  ConvProblem p;
  if (r.next_is("mb")) p.n = r.field("mb");
  if (r.next_is("g")) p.groups = r.field("g");
  for (size_t i = kInput; i < kWindowEnd; ++i) {
    if (i == kOutput && !r.eat("_")) r.error("expected '_' after the input sizes");
    p.*kDims[i].field = r.field(kDims[i].key);
  }
  if (r.next_is("dh")) {
    p.dh = r.field("dh");
    p.dw = r.field("dw");
  }
  if (r.next_is("ph")) {
    p.pt = p.pb = r.field("ph");
    p.pl = p.pr = r.field("pw");
  } else {
    p.pt = r.field("pt");
    p.pl = r.field("pl");
    p.pb = r.field("pb");
    p.pr = r.field("pr");
  }
  p.bias = true;
  if (r.at("_nobias") && (r.pos() + 7 == s.size() || s[r.pos() + 7] == '_')) {
    r.eat("_nobias");
    p.bias = false;
  }
  int next_input = 3;  // as from_node: the extra inputs follow X, W, B
  while (!r.done()) {
    if (!r.eat("_")) r.error("expected '_' at offset " + std::to_string(r.pos()));
    PostOp op = parse_post_op(r);
    if (extra_inputs(op.kind) > 0) {
      op.input = next_input;
      next_input += extra_inputs(op.kind);
    }
    p.post.push_back(op);
  }

  for (size_t i = 0; i < kPositiveEnd; ++i)
    if (p.*kDims[i].field < 1) r.error(std::string(kDims[i].key) + " must be >= 1");
  if (p.ic % p.groups || p.oc % p.groups)
    r.error("g" + std::to_string(p.groups) + " does not divide ic" + std::to_string(p.ic) +
            " and oc" + std::to_string(p.oc));
  auto out = [](int64_t in, int64_t pad, int64_t k, int64_t d, int64_t st) {
    return (in + pad - (d * (k - 1) + 1)) / st + 1;
  };
  const int64_t oh = out(p.ih, p.pt + p.pb, p.kh, p.dh, p.sh);
  const int64_t ow = out(p.iw, p.pl + p.pr, p.kw, p.dw, p.sw);
  if (p.oh != oh)
    r.error("oh" + std::to_string(p.oh) + " but the input, window and pads give " +
            std::to_string(oh));
  if (p.ow != ow)
    r.error("ow" + std::to_string(p.ow) + " but the input, window and pads give " +
            std::to_string(ow));
  const std::string canonical = p.str();
  if (canonical != s) r.error("not in canonical form: write it as \"" + canonical + "\"");
  return p;
}

bool operator==(const ConvProblem& a, const ConvProblem& b) {
  for (const Dim& d : kDims)
    if (a.*d.field != b.*d.field) return false;
  if (a.bias != b.bias || a.post.size() != b.post.size()) return false;
  for (size_t i = 0; i < a.post.size(); ++i) {
    const PostOp &x = a.post[i], &y = b.post[i];
    if (x.kind != y.kind || x.alpha != y.alpha || x.beta != y.beta || x.input != y.input)
      return false;
  }
  return true;
}

ConvProblem ConvProblem::from_node(const Graph& g, const Node& node) {
  if (node.op != "Conv") node.fail(Code::internal, "is not a Conv");
  const Shape& x = g.value(node.inputs[0]).shape;
  const Shape& y = g.value(node.outputs[0]).shape;
  using P = ConvProblem;
  ConvProblem p;
  assign(p, {&P::n, &P::ic, &P::ih, &P::iw}, x);
  assign(p, {&P::oc, &P::oh, &P::ow}, y, 1);
  auto k = node.attr_ints("kernel_shape"), st = node.attr_ints("strides"),
       d = node.attr_ints("dilations"), pads = node.attr_ints("pads");
  if (k.size() != 2 || st.size() != 2 || d.size() != 2 || pads.size() != 4)
    node.fail(Code::internal, "conv attributes are not explicit (shape inference not run?)");
  assign(p, {&P::kh, &P::kw}, k);
  assign(p, {&P::sh, &P::sw}, st);
  assign(p, {&P::dh, &P::dw}, d);
  assign(p, {&P::pt, &P::pl, &P::pb, &P::pr}, pads);
  p.groups = node.attr_i("group", 1);
  p.bias = node.in(2) != kNoValue;
  p.post = parse_post_ops(node, 3);
  return p;
}

}  // namespace kiln
