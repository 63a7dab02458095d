// ConvProblem's string form: parse() is the inverse of str(), and malformed strings fail with
// a message naming what is wrong; the shape lists of tests/shapes/ built on it.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "graph/error.h"
#include "shapes/shape_list.h"
#include "test_conv_util.h"

using namespace kiln;
using namespace kiln::convtest;
using K = PostOp::Kind;

namespace {

// Every combination of the fields str() writes conditionally (batch, groups incl. depthwise,
// dilation, symmetric / asymmetric pads, bias) and the ones it always writes (strides, kernel
// sizes), with post-op chains of every kind.
std::vector<ConvProblem> many_problems() {
  const std::vector<std::vector<PostOp>> chains = {
      {},
      chain({op(K::relu)}),
      chain({op(K::clip, 0.f, 6.f)}),
      chain({op(K::clip, -0.25f, 1.5f), op(K::sigmoid)}),
      chain({op(K::add), op(K::relu)}),
      chain({op(K::scale_shift), op(K::swish), op(K::add), op(K::hardswish)}),
      chain({op(K::leaky_relu, 0.01f), op(K::hardsigmoid, 0.2f, 0.5f), op(K::add)}),
      chain({op(K::gelu), op(K::tanh)}),  // not gelu_tanh
      chain({op(K::gelu_tanh), op(K::add), op(K::mish)}),
      chain({op(K::elu, 0.7f), op(K::selu, 1.67f, 1.05f), op(K::tanh)}),
      chain({op(K::selu, 0.5f, 2.f), op(K::elu, 1.f)}),
  };
  std::vector<ConvProblem> v;
  size_t i = 0;
  for (int64_t n : {1, 3})
    for (int64_t g : {1, 2, 24})  // 24 = ic = oc: depthwise
      for (int64_t k : {1, 3, 5})
        for (int64_t st : {1, 2})
          for (int64_t d : {1, 2})
            for (int pads = 0; pads < 3; ++pads)
              for (bool bias : {true, false}) {
                Shp s{.n = n, .ic = 24, .ih = 13, .iw = 17, .oc = 24, .kh = k, .kw = k + 2};
                s.sh = st;
                s.sw = 3 - st;
                s.dh = d;
                s.dw = 3 - d;
                if (pads == 1) s.pt = s.pl = s.pb = s.pr = k / 2;
                if (pads == 2) s.pt = 0, s.pl = 1, s.pb = 2, s.pr = 3;
                s.bias = bias;
                ConvProblem p = problem(s, chains[i++ % chains.size()]);
                p.groups = g;
                v.push_back(p);
              }
  return v;
}

std::string parse_error(const std::string& s) {
  try {
    ConvProblem::parse(s);
  } catch (const Error& e) {
    CHECK(e.code() == Code::invalid_argument);
    return e.what();
  }
  FAIL("parsed without an error: " << s);
  return "";
}

}  // namespace

TEST_CASE("ConvProblem::parse is the inverse of str()") {
  const std::vector<ConvProblem> ps = many_problems();
  REQUIRE(ps.size() == 432);  // (the chains cycle through them)
  for (const ConvProblem& p : ps) {
    const std::string s = p.str();
    CAPTURE(s);
    const ConvProblem q = ConvProblem::parse(s);
    CHECK(q == p);
    CHECK(q.str() == s);
  }
}

TEST_CASE("ConvProblem::parse reads the documented fields") {
  // Every integer field, in declaration order (bias as 0 / 1).
  auto fields = [](const ConvProblem& p) {
    return std::vector<int64_t>{p.n,  p.ic, p.ih, p.iw, p.oc, p.oh, p.ow, p.kh,     p.kw,  p.sh,
                                p.sw, p.dh, p.dw, p.pt, p.pl, p.pb, p.pr, p.groups, p.bias};
  };
  const ConvProblem p = ConvProblem::parse("ic64ih56iw56_oc64oh56ow56kh3kw3sh1sw1ph1pw1_relu");
  CHECK(fields(p) ==
        std::vector<int64_t>{1, 64, 56, 56, 64, 56, 56, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1});
  REQUIRE(p.post.size() == 1);
  CHECK(p.post[0].kind == K::relu);

  const ConvProblem q = ConvProblem::parse(
      "mb2g32ic32ih112iw112_oc32oh56ow56kh3kw3sh2sw2dh2dw2pt2pl2pb1pr1_nobias_clip0_6_add");
  CHECK(fields(q) ==
        std::vector<int64_t>{2, 32, 112, 112, 32, 56, 56, 3, 3, 2, 2, 2, 2, 2, 2, 1, 1, 32, 0});
  REQUIRE(q.post.size() == 2);
  CHECK(q.post[0].kind == K::clip);
  CHECK(q.post[0].alpha == 0.f);
  CHECK(q.post[0].beta == 6.f);
  CHECK(q.post[1].kind == K::add);
  CHECK(q.post[1].input == 3);
}

TEST_CASE("ConvProblem::parse names what is wrong") {
  const std::string ok = "ic64ih56iw56_oc64oh56ow56kh3kw3sh1sw1ph1pw1";
  REQUIRE(ConvProblem::parse(ok).str() == ok);
  struct Bad {
    std::string s, says;
  };
  const Bad bad[] = {
      {"", "expected 'ic<number>'"},
      {"ic64ih56_oc64oh56ow56kh3kw3sh1sw1ph1pw1", "expected 'iw<number>'"},
      {"ic64ih56iw56oc64oh56ow56kh3kw3sh1sw1ph1pw1", "expected '_' after the input sizes"},
      {"ic64ih56iw56_oc64oh56ow56kh3kw3sh1sw1", "expected 'pt<number>'"},
      {"icxih56iw56_oc64oh56ow56kh3kw3sh1sw1ph1pw1", "expected 'ic<number>'"},
      {"ic64ih56iw56_oc64oh55ow56kh3kw3sh1sw1ph1pw1",
       "oh55 but the input, window and pads give 56"},
      {"ic64ih56iw56_oc64oh56ow57kh3kw3sh1sw1ph1pw1", "ow57"},
      {"ic64ih56iw56_oc64oh56ow56kh3kw3sh0sw1ph1pw1", "sh must be >= 1"},
      {"g3ic64ih56iw56_oc64oh56ow56kh3kw3sh1sw1ph1pw1", "g3 does not divide ic64 and oc64"},
      {ok + "_relu6", "unknown post-op at offset 44: 'relu6'"},
      {ok + "_clip0", "clip needs two parameters"},
      {ok + "_relu_", "unknown post-op"},
      {ok + "x", "expected '_' at offset 43"},
      {"mb1ic64ih56iw56_oc64oh56ow56kh3kw3sh1sw1ph1pw1",
       "not in canonical form: write it as \"" + ok + "\""},
      {"ic64ih56iw56_oc64oh56ow56kh3kw3sh1sw1pt1pl1pb1pr1", "not in canonical form"},
      {"ic64ih56iw56_oc64oh56ow56kh3kw3sh1sw1dh1dw1ph1pw1", "not in canonical form"},
      {ok + "_clip0_6.0", "not in canonical form"},
      {"ic99999999999999ih56iw56_oc64oh56ow56kh3kw3sh1sw1ph1pw1", "'ic' is too large"},
  };
  for (const Bad& b : bad) {
    CAPTURE(b.s);
    const std::string msg = parse_error(b.s);
    CHECK_MESSAGE(msg.find(b.says) != std::string::npos, msg);
    CHECK_MESSAGE(msg.find(b.s) != std::string::npos, msg);  // names the string
  }
}

TEST_CASE("shape lists: every list parses, with names and counts") {
  // The lists of tests/shapes/ (README.md, "Shape lists"), with their number of problems.
  const std::pair<const char*, size_t> lists[] = {
      {"conv_direct", 12}, {"conv_gemm1x1", 10}, {"winograd", 15},   {"im2col", 18},
      {"resnet50", 23},    {"vgg16", 9},         {"mobilenetv2", 10}};
  for (const auto& list : lists) {
    const char* name = list.first;  // not a structured binding: CAPTURE's lambda captures it
    const size_t n = list.second;
    CAPTURE(name);
    const std::vector<shapes::ShapeLine> v = shapes::read_shape_list(name);
    CHECK(v.size() == n);
  }
  int resnet_convs = 0;
  for (const shapes::ShapeLine& s : shapes::read_shape_list("resnet50")) resnet_convs += s.count;
  CHECK(resnet_convs == 53);  // the stem, 3 per bottleneck x 16, 4 downsample 1x1s
  for (const shapes::ShapeLine& s : shapes::read_shape_list("mobilenetv2")) {
    CAPTURE(s.name);
    CHECK(s.p.groups == s.p.ic);
    CHECK(s.p.groups == s.p.oc);
    CHECK(s.name.rfind("dw_", 0) == 0);
  }
}

TEST_CASE("shape lists: malformed lines name the file and line") {
  const std::string dir = KILN_TEST_TMP;
  auto write = [&](const std::string& file, const std::string& text) {
    std::system(("mkdir -p '" + dir + "'").c_str());
    std::ofstream(dir + "/" + file) << text;
    return dir + "/" + file;
  };
  auto error = [](const std::string& path) -> std::string {
    try {
      shapes::read_shape_list(path);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  const std::string ok = "ic64ih56iw56_oc64oh56ow56kh3kw3sh1sw1ph1pw1";
  const std::string good = write("good.txt", "# c\n\n" + ok + " name=a count=2 # x\n" + ok + "\n");
  const auto v = shapes::read_shape_list(good);
  REQUIRE(v.size() == 2);
  CHECK(v[0].name == "a");
  CHECK(v[0].count == 2);
  CHECK(v[1].name == ok);
  CHECK(v[1].count == 1);
  CHECK(error(write("bad1.txt", "# c\n" + ok + "\nic64\n")).find("bad1.txt:3: conv problem") !=
        std::string::npos);
  CHECK(error(write("bad2.txt", ok + " count=0\n")).find("bad2.txt:1: count= takes") !=
        std::string::npos);
  CHECK(error(write("bad3.txt", ok + " size=3\n")).find("expected name=<label> or count=<n>") !=
        std::string::npos);
  CHECK(error(write("empty.txt", "# nothing\n")).find("has no problem") != std::string::npos);
  CHECK(error(dir + "/missing.txt").find("cannot read shape list") != std::string::npos);
}
