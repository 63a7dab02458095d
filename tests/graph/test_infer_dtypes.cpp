// Shape inference of the bool-producing ops, Where, Cast and the shape builders (Expand, Tile,
// ConstantOfShape, Range, Size): output dtypes and shapes, and the clear errors.
#include <doctest/doctest.h>

#include "test_infer_util.h"

using namespace kiln;
using namespace kiln::test_infer;

TEST_CASE("infer comparisons and logic: bool outputs, broadcasting") {
  for (const char* op : {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"}) {
    CAPTURE(op);
    Builder b;
    b.node(op, {b.in("a", {2, 1, 4}, DType::i64), b.in("b", {3, 1}, DType::i64)});
    CHECK(b.shape() == Shape{2, 3, 4});
    CHECK(b.out().dtype == DType::boolean);
  }
  Builder b;
  b.node("And", {b.in("a", {4}, DType::boolean), b.in("b", {2, 1}, DType::boolean)});
  CHECK(b.shape() == Shape{2, 4});
  Builder e;
  e.node("Equal", {e.in("a", {4}, DType::boolean), e.in("b", {1}, DType::boolean)});
  CHECK(e.shape() == Shape{4});
  Builder l;
  l.node("Less", {l.in("a", {4}, DType::boolean), l.in("b", {1}, DType::boolean)});
  check_fails(l, Code::invalid_model, "expected float32 or int64");
  Builder o;
  o.node("Or", {o.in("a", {4}, DType::boolean), o.in("b", {4})});
  check_fails(o, Code::invalid_model, "'b' has dtype float32");
}

TEST_CASE("infer Where: three-way broadcast, X's dtype") {
  Builder b;
  b.node("Where", {b.in("c", {1, 4}, DType::boolean), b.in("x", {3, 1}), b.floats("y", {}, -1.f)});
  CHECK(b.shape() == Shape{3, 4});
  CHECK(b.out().dtype == DType::f32);
  Builder m;
  m.node("Where", {m.in("c", {4}, DType::boolean), m.in("x", {4}), m.in("y", {4}, DType::i64)});
  check_fails(m, Code::invalid_model, "'y' has dtype int64");
  Builder c;
  c.node("Where", {c.in("c", {4}), c.in("x", {4}), c.in("y", {4})});
  check_fails(c, Code::invalid_model, "'c' has dtype float32");
}

TEST_CASE("infer Cast: target dtypes and refusals") {
  const std::pair<int64_t, DType> ok[] = {{1, DType::f32}, {10, DType::f32}, {11, DType::f32},
                                          {6, DType::i64}, {7, DType::i64},  {9, DType::boolean}};
  for (const auto& p : ok) {
    CAPTURE(p.first);
    Builder b;
    b.node("Cast", {b.in("x", {2, 3})});
    b.set_i("to", p.first);
    CHECK(b.shape() == Shape{2, 3});
    CHECK(b.out().dtype == p.second);
  }
  Builder d;
  d.node("Cast", {d.in("x", {2})});
  d.set_i("to", 16);  // bfloat16: Kiln computes in float32, but a Cast to it must round
  check_fails(d, Code::unsupported, "data type 16");
  Builder m;
  m.node("Cast", {m.in("x", {2})});
  check_fails(m, Code::invalid_model, "'to' is missing");
  Builder like;
  like.node("CastLike", {like.in("x", {2}), like.in("t", {1}, DType::boolean)});
  CHECK(like.shape() == Shape{2});
  CHECK(like.out().dtype == DType::boolean);
}

TEST_CASE("infer Expand/Tile/ConstantOfShape/Range/Size") {
  Builder ex;
  ex.node("Expand", {ex.in("x", {3, 1}), ex.ints("s", {2, 1, 6})});
  CHECK(ex.shape() == Shape{2, 3, 6});  // bidirectional: the 1 keeps x's 3
  Builder bad;
  bad.node("Expand", {bad.in("x", {3, 2}), bad.ints("s", {4})});
  check_fails(bad, Code::invalid_model, "broadcast");
  Builder rt;
  rt.node("Expand", {rt.in("x", {3}), rt.in("s", {1}, DType::i64)});
  check_fails(rt, Code::unsupported, "constant");
  Builder t;
  t.node("Tile", {t.in("x", {2, 3}, DType::boolean), t.ints("r", {2, 1})});
  CHECK(t.shape() == Shape{4, 3});
  CHECK(t.out().dtype == DType::boolean);
  Builder tr;
  tr.node("Tile", {tr.in("x", {2, 3}), tr.ints("r", {2})});
  check_fails(tr, Code::invalid_model, "rank");
  Builder cs;
  cs.node("ConstantOfShape", {cs.ints("s", {2, 0, 3})});
  Tensor v(DType::i64, {1});
  cs.last().attrs["value"] = attr_t(v);
  CHECK(cs.shape() == Shape{2, 0, 3});  // empty int64: allowed
  CHECK(cs.out().dtype == DType::i64);
  Builder r;
  Tensor s(DType::f32, {}), l(DType::f32, {}), d(DType::f32, {});
  s.data<float>()[0] = 1.f, l.data<float>()[0] = 2.f, d.data<float>()[0] = 0.3f;
  r.node("Range", {r.g.add_const("s", s), r.g.add_const("l", l), r.g.add_const("d", d)});
  CHECK(r.shape() == Shape{4});  // ceil(1 / 0.3)
  Builder rz;
  d.data<float>()[0] = 0.f;
  rz.node("Range", {rz.g.add_const("s", s), rz.g.add_const("l", l), rz.g.add_const("d", d)});
  check_fails(rz, Code::invalid_model, "delta");
  Builder rr;
  rr.node("Range", {rr.in("s", {}), rr.g.add_const("l", l), rr.g.add_const("d", d)});
  check_fails(rr, Code::unsupported, "computed at run time");
  Builder sz;
  sz.node("Size", {sz.in("x", {2, 5})});
  CHECK(sz.shape() == Shape{});
  CHECK(sz.out().dtype == DType::i64);
}
