// The time loop of an LSTM / GRU / RNN (the internal Recurrence op, graph/recurrent.h) as ONNX
// defines the ops: per direction and batch row, steps in order (backwards for the reverse
// direction) over the row's sequence length; outputs past a row's length are zeros. The
// recurrent products are summed in double.
#include <vector>

#include "graph/recurrent.h"
#include "runtime/ref/ref_common.h"

namespace kiln::ref {
namespace {

float activate(const std::vector<PostOp>& chain, float x) {
  for (const PostOp& op : chain) x = apply_post_op(op, x, 0.f, 1.f, 0.f);
  return x;
}

}  // namespace

void recurrence(const Node& node, const Inputs& in, const Outputs& out) {
  const RecurrenceSpec s = recurrence_spec(node);
  const Tensor& xw = req_input(node, in, 0);
  const Tensor& rt = req_input(node, in, 1);
  const Tensor *rb = opt_input(in, 2), *lens = opt_input(in, 3), *h0 = opt_input(in, 4),
               *c0 = opt_input(in, 5), *p = opt_input(in, 6);
  expect_rank(node, xw, 3, "XW");
  const int64_t T = xw.shape()[0], N = xw.shape()[1], D = s.directions, H = s.hidden,
                GH = s.gates * H;
  expect_shape(node, xw, {T, N, D * GH}, "XW");
  expect_shape(node, rt, {D, H, GH}, "R^T");
  if (rb) expect_shape(node, *rb, {D, GH}, "Rb");
  if (lens) expect_shape(node, *lens, {N}, "sequence_lens");
  for (const Tensor* t : {h0, c0})
    if (t) expect_shape(node, *t, {D, N, H}, "initial state");
  if (p) expect_shape(node, *p, {D, 3 * H}, "P");
  Tensor* y = out.size() > 0 ? out[0] : nullptr;
  Tensor* y_h = out.size() > 1 ? out[1] : nullptr;
  Tensor* y_c = out.size() > 2 ? out[2] : nullptr;
  if (y) std::fill(y->data<float>(), y->data<float>() + y->numel(), 0.f);

  const size_t hs = static_cast<size_t>(H), gs = static_cast<size_t>(GH);
  std::vector<float> h(hs), c(hs), rec(gs), gate(gs);
  for (int64_t d = 0; d < D; ++d) {
    const float* r = rt.data<float>() + d * H * GH;
    const std::vector<std::vector<PostOp>>& act = s.acts[size_t(d)];
    const bool back = s.reverse || d == 1;
    for (int64_t n = 0; n < N; ++n) {
      const int64_t len = lens ? lens->data<int64_t>()[n] : T;
      if (len < 0 || len > T)
        node.fail(Code::invalid_argument, "sequence_lens[" + std::to_string(n) +
                                              "] = " + std::to_string(len) + " is outside [0, " +
                                              std::to_string(T) + "]");
      for (int64_t j = 0; j < H; ++j) {
        h[size_t(j)] = h0 ? h0->data<float>()[(d * N + n) * H + j] : 0.f;
        c[size_t(j)] = c0 ? c0->data<float>()[(d * N + n) * H + j] : 0.f;
      }
      // rec[j] = Rb[j] + sum_k v[k] R^T[k][j] for j in [from, to)
      auto recurrent = [&](const float* v, int64_t from, int64_t to) {
        for (int64_t j = from; j < to; ++j) {
          double acc = rb ? rb->data<float>()[d * GH + j] : 0.0;
          for (int64_t k = 0; k < H; ++k) acc += double(v[k]) * double(r[k * GH + j]);
          rec[size_t(j)] = float(acc);
        }
      };
      for (int64_t step = 0; step < len; ++step) {
        const int64_t t = back ? len - 1 - step : step;
        const float* x = xw.data<float>() + (t * N + n) * D * GH + d * GH;
        if (s.lstm) {  // gates i, o, f, c; peepholes P i, o, f
          recurrent(h.data(), 0, GH);
          const float* pp = p ? p->data<float>() + d * 3 * H : nullptr;
          for (int64_t j = 0; j < H; ++j) {
            const size_t u = size_t(j);
            const float pi = pp ? pp[j] : 0.f, po = pp ? pp[H + j] : 0.f,
                        pf = pp ? pp[2 * H + j] : 0.f;
            const float i = activate(act[0], x[j] + rec[u] + pi * c[u]);
            const float f = activate(act[0], x[2 * H + j] + rec[size_t(2 * H + j)] + pf * c[u]);
            const float g = activate(act[1], x[3 * H + j] + rec[size_t(3 * H + j)]);
            c[u] = f * c[u] + i * g;
            const float o = activate(act[0], x[H + j] + rec[size_t(H + j)] + po * c[u]);
            h[u] = o * activate(act[2], c[u]);
          }
        } else if (s.gru) {  // gates z, r, h
          recurrent(h.data(), 0, s.linear_before_reset ? GH : 2 * H);
          for (int64_t j = 0; j < 2 * H; ++j)
            gate[size_t(j)] = activate(act[0], x[j] + rec[size_t(j)]);
          if (!s.linear_before_reset) {  // (r . h) R_h^T + Rb_h
            std::vector<float> rh(hs);
            for (int64_t k = 0; k < H; ++k) rh[size_t(k)] = gate[size_t(H + k)] * h[size_t(k)];
            recurrent(rh.data(), 2 * H, GH);
          }
          for (int64_t j = 0; j < H; ++j) {
            const float r_j = gate[size_t(H + j)], z = gate[size_t(j)];
            const float in = s.linear_before_reset ? x[2 * H + j] + r_j * rec[size_t(2 * H + j)]
                                                   : x[2 * H + j] + rec[size_t(2 * H + j)];
            const float hh = activate(act[1], in);
            gate[size_t(2 * H + j)] = (1.f - z) * hh + z * h[size_t(j)];
          }
          for (int64_t j = 0; j < H; ++j) h[size_t(j)] = gate[size_t(2 * H + j)];
        } else {
          recurrent(h.data(), 0, H);
          for (int64_t j = 0; j < H; ++j) h[size_t(j)] = activate(act[0], x[j] + rec[size_t(j)]);
        }
        if (y) std::copy(h.begin(), h.end(), y->data<float>() + ((t * D + d) * N + n) * H);
      }
      if (y_h) std::copy(h.begin(), h.end(), y_h->data<float>() + (d * N + n) * H);
      if (y_c) std::copy(c.begin(), c.end(), y_c->data<float>() + (d * N + n) * H);
    }
  }
}

}  // namespace kiln::ref
