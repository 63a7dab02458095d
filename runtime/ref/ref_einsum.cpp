// Einsum (graph/einsum.h): the plain sum over every label's index, in double. The test oracle
// for the rewrite into Transpose / ReduceSum / MatMul, and the path of the forms it leaves
// (diagonals, three or more operands).
#include "graph/einsum.h"
#include "runtime/ref/ref_common.h"

namespace kiln::ref {

void einsum(const Node& node, const Inputs& in, const Outputs& out) {
  std::vector<Shape> shapes;
  for (size_t i = 0; i < in.size(); ++i) {
    const Tensor& x = req_input(node, in, i);
    expect_dtype(node, x, DType::f32, "input");
    shapes.push_back(x.shape());
  }
  Tensor& y = req_output(node, out, 0);
  expect_dtype(node, y, DType::f32, "output");
  const EinsumSpec s = einsum_spec(node, shapes);
  // Every label once, each operand's and the output's stride per label (0 where absent or
  // broadcast: a size-1 ellipsis dim).
  std::string labels;
  std::vector<int64_t> sizes;
  for (const auto& [c, n] : s.size) {
    labels += c;
    sizes.push_back(n);
  }
  const size_t L = labels.size();
  auto strides_for = [&](const std::string& l, const Shape& shape) {
    std::vector<int64_t> st(L, 0);
    const std::vector<int64_t> own = strides_of(shape);
    for (size_t d = 0; d < l.size(); ++d)
      if (shape[d] != 1 || s.size.at(l[d]) == 1) st[labels.find(l[d])] += own[d];
    return st;
  };
  Shape ys;
  for (char c : s.out) ys.push_back(s.size.at(c));
  expect_shape(node, y, ys, "output");
  std::vector<std::vector<int64_t>> st;
  for (size_t i = 0; i < in.size(); ++i) st.push_back(strides_for(s.in[i], shapes[i]));
  const std::vector<int64_t> yst = strides_for(s.out, ys);
  std::vector<double> acc(size_t(y.numel()), 0.0);
  int64_t total = 1;
  for (int64_t n : sizes) total *= n;
  std::vector<int64_t> idx(L, 0);
  for (int64_t it = 0; it < total; ++it) {
    double p = 1.0;
    for (size_t i = 0; i < in.size(); ++i) {
      int64_t off = 0;
      for (size_t l = 0; l < L; ++l) off += idx[l] * st[i][l];
      p *= double(in[i]->data<float>()[off]);
    }
    int64_t yo = 0;
    for (size_t l = 0; l < L; ++l) yo += idx[l] * yst[l];
    acc[size_t(yo)] += p;
    for (size_t l = L; l-- > 0 && ++idx[l] == sizes[l];) idx[l] = 0;
  }
  for (int64_t i = 0; i < y.numel(); ++i) y.data<float>()[i] = float(acc[size_t(i)]);
}

}  // namespace kiln::ref
