#include "graph/spectral.h"

#include <cmath>
#include <string>

#include "graph/canonicalize.h"
#include "graph/infer_util.h"

namespace kiln {

using namespace infer_detail;

namespace {

// A DFT's geometry: n-point transforms of `len` samples (zero-padded or truncated to n) along
// `axis`, `c` parts per sample (1 real, 2 complex), `k` bins out.
struct Transform {
  int64_t len = 0, n = 0, k = 0, c = 1;
  bool inverse = false;
};

// Coefficient of the transform matrix: output bin `bin`, part `out_part` (0 real, 1 imaginary)
// from input sample t, part `in_part`. x e^{i phi} with phi = -+2 pi bin t / n (the angle from
// bin * t mod n, exact in integers), scaled by 1 / n when inverse.
double coefficient(const Transform& tr, int64_t t, int64_t in_part, int64_t bin, int64_t out_part) {
  if (t >= tr.n) return 0;  // (truncated)
  const double turn = double((bin * t) % tr.n) / double(tr.n);
  const double phi = (tr.inverse ? 2 : -2) * M_PI * turn;
  const double cs = std::cos(phi), sn = std::sin(phi);
  // (a + ib)(cos + i sin): real a cos - b sin, imaginary a sin + b cos.
  const double v = in_part == 0 ? (out_part == 0 ? cs : sn) : (out_part == 0 ? -sn : cs);
  return tr.inverse ? v / double(tr.n) : v;
}

// An int64 scalar constant input >= 1.
int64_t positive_scalar(const Graph& g, const Node& n, size_t i, const char* what) {
  const auto v = const_ints(g, n, i);
  if (!v || v->size() != 1 || input(g, n, i).shape.size() > 1 || (*v)[0] < 1 || (*v)[0] > kMaxAttr)
    n.fail(Code::invalid_model,
           input_desc(g, n, i) + ": " + what + " must be a scalar in [1, 2^31]");
  return (*v)[0];
}

void check_matrix(const Node& n, const Transform& tr) {
  if (double(tr.len) * double(tr.c) * 2 * double(tr.k) > double(kMaxDftMatrixElements))
    n.fail(Code::unsupported,
           "a " + std::to_string(tr.n) + "-point transform of " + std::to_string(tr.len) +
               " samples needs a " + std::to_string(tr.len * tr.c) + " x " +
               std::to_string(2 * tr.k) +
               " DFT matrix, over Kiln's limit of 2^24 elements (Kiln has no FFT kernel)");
}

// The parts per sample (the last dimension of `what`): 1 real or 2 complex.
int64_t parts(const Node& n, int64_t c, const char* what) {
  if (c != 1 && c != 2)
    n.fail(Code::invalid_model, std::string("the ") + what +
                                    "'s last dimension must be 1 (real) or 2 (complex), not " +
                                    std::to_string(c));
  return c;
}

// The bins out (all n, or n / 2 + 1 when onesided: real `what` only), then the matrix's size.
void set_bins(const Node& n, Transform& tr, bool onesided, const char* what) {
  if (onesided && tr.c == 2)
    n.fail(Code::invalid_model,
           std::string("onesided needs a real ") + what + " (last dimension 1)");
  tr.k = onesided ? tr.n / 2 + 1 : tr.n;
  check_matrix(n, tr);
}

struct DftSpec {
  Shape in;
  int64_t axis = 1;
  Transform tr;
};

DftSpec dft_spec(const Graph& g, const Node& n) {
  expect_dtype(g, n, 0, DType::f32, Code::unsupported);
  expect_min_rank(g, n, 0, 3);
  DftSpec s;
  s.in = input(g, n, 0).shape;
  const int64_t rank = int64_t(s.in.size());
  s.tr.c = parts(n, s.in.back(), "input");
  int64_t a = n.attr_i("axis", 1);
  if (g.opset >= 20) {  // (axis became an input, default -2)
    a = -2;
    if (has_input(n, 2)) {
      const auto v = const_ints(g, n, 2);
      if (!v || v->size() != 1) n.fail(Code::invalid_model, "axis must be a scalar");
      a = (*v)[0];
    }
  }
  s.axis = a < 0 ? a + rank : a;
  if (s.axis < 0 || s.axis > rank - 2)
    n.fail(Code::invalid_model, "axis must be a signal dimension (0 to " +
                                    std::to_string(rank - 2) + " of input shape " +
                                    shape_str(s.in) + ")");
  s.tr.len = s.in[size_t(s.axis)];
  s.tr.n = has_input(n, 1) ? positive_scalar(g, n, 1, "dft_length") : s.tr.len;
  if (s.tr.n < 1) n.fail(Code::invalid_model, "the transform's length is 0");
  s.tr.inverse = attr_flag(n, "inverse", false);
  const bool onesided = attr_flag(n, "onesided", false);
  if (onesided && s.tr.inverse)
    n.fail(Code::unsupported, "an inverse onesided DFT (Kiln computes only full spectra back)");
  set_bins(n, s.tr, onesided, "input");
  return s;
}

struct StftSpec {
  int64_t batch = 0, len = 0, step = 1, frames = 0;
  Transform tr;
  bool window = false;
};

StftSpec stft_spec(const Graph& g, const Node& n) {
  expect_dtype(g, n, 0, DType::f32, Code::unsupported);
  expect_rank(g, n, 0, 3);
  const Shape& x = input(g, n, 0).shape;
  StftSpec s;
  s.batch = x[0];
  s.len = x[1];
  s.tr.c = parts(n, x[2], "signal");
  s.step = positive_scalar(g, n, 1, "frame_step");
  s.window = has_input(n, 2);
  int64_t length = 0;
  if (s.window) {
    expect_dtype(g, n, 2, DType::f32, Code::unsupported);
    expect_rank(g, n, 2, 1);
    length = input(g, n, 2).shape[0];
  }
  if (has_input(n, 3)) {
    const int64_t fl = positive_scalar(g, n, 3, "frame_length");
    if (s.window && fl != length)
      n.fail(Code::invalid_model, "frame_length " + std::to_string(fl) + " differs from the " +
                                      std::to_string(length) + "-point window");
    length = fl;
  }
  if (length < 1) n.fail(Code::invalid_model, "needs a window or a frame_length >= 1");
  if (length > s.len)
    n.fail(Code::invalid_model, "frames of " + std::to_string(length) + " samples do not fit a " +
                                    std::to_string(s.len) + "-sample signal");
  s.tr.len = s.tr.n = length;
  set_bins(n, s.tr, attr_flag(n, "onesided", true), "signal");
  s.frames = (s.len - length) / s.step + 1;
  return s;
}

// DFT: [..., L (axis), ..., C] -> axis next to C -> [M..., L * C] x W [L * C, 2K] -> [M..., K, 2]
// -> the bins back at the axis.
std::vector<Node> expand_dft(Graph& g, const Node& n) {
  const DftSpec s = dft_spec(g, n);
  const Transform& tr = s.tr;
  const int64_t rank = int64_t(s.in.size());
  std::vector<Node> out;
  Emitter op{g, n, out};
  const bool moved = s.axis != rank - 2;
  std::vector<int64_t> perm;  // (the axis next to the last)
  for (int64_t d = 0; d < rank - 1; ++d)
    if (d != s.axis) perm.push_back(d);
  perm.push_back(s.axis);
  perm.push_back(rank - 1);
  ValueId x = n.in(0);
  Shape lead;  // M
  for (size_t d = 0; d + 2 < perm.size(); ++d) lead.push_back(s.in[size_t(perm[d])]);
  if (moved) x = op.transpose(x, perm, "signal_last");
  Shape rows = lead;
  rows.push_back(tr.len * tr.c);
  x = op.reshape(x, rows, "samples");
  Tensor w(DType::f32, {tr.len * tr.c, 2 * tr.k});
  float* pw = w.data<float>();
  for (int64_t t = 0; t < tr.len; ++t)
    for (int64_t ci = 0; ci < tr.c; ++ci)
      for (int64_t b = 0; b < tr.k; ++b)
        for (int64_t part = 0; part < 2; ++part)
          pw[((t * tr.c + ci) * tr.k + b) * 2 + part] = float(coefficient(tr, t, ci, b, part));
  const ValueId y = op("MatMul", {x, const_for(g, n, "dft_matrix", std::move(w))}, "bins");
  Shape spectrum = lead;
  spectrum.push_back(tr.k);
  spectrum.push_back(2);
  if (!moved) {
    op.reshape(y, spectrum, "spectrum", n.outputs[0]);
    return out;
  }
  const ValueId z = op.reshape(y, spectrum, "spectrum");
  std::vector<int64_t> back(static_cast<size_t>(rank));  // inverse of perm
  for (int64_t d = 0; d < rank; ++d) back[size_t(perm[size_t(d)])] = d;
  op.transpose(z, back, "y", n.outputs[0]);
  return out;
}

// STFT: [B, L, C] as an image [B, C, 1, L], a Conv with the windowed DFT matrix as its
// [2K, C, 1, n] weights and stride frame_step -> [B, 2K, 1, F] -> [B, K, 2, F] -> [B, F, K, 2].
std::vector<Node> expand_stft(Graph& g, const Node& n) {
  const StftSpec s = stft_spec(g, n);
  const Transform& tr = s.tr;
  std::vector<Node> out;
  Emitter op{g, n, out};
  ValueId x = n.in(0);
  if (tr.c == 2) x = op.transpose(x, {0, 2, 1}, "channels_first");
  x = op.reshape(x, {s.batch, tr.c, 1, s.len}, "image");
  // The window folds into the weights when it is a constant (at load), else multiplies them.
  const Value* win = s.window ? &g.value(n.in(2)) : nullptr;
  const float* wv = win && win->is_const() ? win->constant->data<float>() : nullptr;
  Tensor w(DType::f32, {2 * tr.k, tr.c, 1, tr.n});
  float* pw = w.data<float>();
  for (int64_t b = 0; b < tr.k; ++b)
    for (int64_t part = 0; part < 2; ++part)
      for (int64_t ci = 0; ci < tr.c; ++ci)
        for (int64_t t = 0; t < tr.n; ++t)
          pw[((b * 2 + part) * tr.c + ci) * tr.n + t] =
              float(coefficient(tr, t, ci, b, part) * (wv ? double(wv[t]) : 1.0));
  ValueId weights = const_for(g, n, "dft_weights", std::move(w));
  if (win && !wv)
    weights = op("Mul", {weights, op.reshape(n.in(2), {1, 1, 1, tr.n}, "window_taps")},
                 "windowed_weights");
  const ValueId y = op("Conv", {x, weights}, "frames_dft");
  Node& conv = out.back();
  conv.attrs["kernel_shape"] = attr_ints({1, tr.n});
  conv.attrs["strides"] = attr_ints({1, s.step});
  conv.attrs["pads"] = attr_ints({0, 0, 0, 0});
  conv.attrs["dilations"] = attr_ints({1, 1});
  conv.attrs["group"] = attr_i(1);
  const ValueId z = op.reshape(y, {s.batch, tr.k, 2, s.frames}, "bins");
  op.transpose(z, {0, 3, 1, 2}, "y", n.outputs[0]);
  return out;
}

}  // namespace

void infer_dft(Graph& g, Node& n) {
  const DftSpec s = dft_spec(g, n);
  Shape y = s.in;
  y[size_t(s.axis)] = s.tr.k;
  y.back() = 2;
  set_output(g, n, 0, DType::f32, y);
}

void infer_stft(Graph& g, Node& n) {
  const StftSpec s = stft_spec(g, n);
  set_output(g, n, 0, DType::f32, {s.batch, s.frames, s.tr.k, 2});
}

std::vector<Node> expand_spectral(Graph& g, const Node& n) {
  if (n.outputs.empty() || n.outputs[0] == kNoValue)
    n.fail(Code::invalid_model, "its output is missing");
  return n.op == "DFT" ? expand_dft(g, n) : expand_stft(g, n);
}

// As ONNX's reference (and its operator test): num_mel_bins + 2 points evenly spaced on the mel
// scale (mel(f) = 2595 log10(1 + f / 700)) from lower_edge_hertz, in steps of the range over
// num_mel_bins + 2, mapped to DFT bins floor((dft_length + 1) f / sample_rate); each mel bin a
// triangle rising from its left point to 1 at its centre and falling to its right point.
void infer_mel_weight_matrix(Graph& g, Node& n) {
  const int64_t mels = scalar_input<int64_t>(g, n, 0, DType::i64, 0);
  const int64_t dft = scalar_input<int64_t>(g, n, 1, DType::i64, 0);
  const int64_t rate = scalar_input<int64_t>(g, n, 2, DType::i64, 0);
  const double lo = scalar_input<float>(g, n, 3, DType::f32, 0.f);
  const double hi = scalar_input<float>(g, n, 4, DType::f32, 0.f);
  if (n.attr_i("output_datatype", 1) != 1)
    n.fail(Code::unsupported, "output_datatype other than float32");
  if (mels < 1 || dft < 1 || rate < 1 || mels > kMaxAttr || dft > kMaxAttr)
    n.fail(Code::invalid_model, "num_mel_bins, dft_length and sample_rate must be >= 1 (and sane)");
  if (!std::isfinite(lo) || !std::isfinite(hi) || lo < 0 || hi < lo)
    n.fail(Code::invalid_model, "needs 0 <= lower_edge_hertz <= upper_edge_hertz");
  const int64_t bins = dft / 2 + 1;
  if (double(bins) * double(mels) > double(kMaxDftMatrixElements))  // (made at load)
    n.fail(Code::unsupported, "a " + std::to_string(bins) + " x " + std::to_string(mels) +
                                  " matrix, over Kiln's limit of 2^24 elements");
  auto mel = [](double f) { return 2595.0 * std::log10(1.0 + f / 700.0); };
  const double lo_mel = mel(lo), step = (mel(hi) - lo_mel) / double(mels + 2);
  std::vector<int64_t> point(size_t(mels + 2));
  for (int64_t i = 0; i < mels + 2; ++i) {
    const double hz = 700.0 * (std::pow(10.0, (double(i) * step + lo_mel) / 2595.0) - 1.0);
    point[size_t(i)] = int64_t(std::floor(double(dft + 1) * hz / double(rate)));
    if (point[size_t(i)] < 0 || point[size_t(i)] >= bins)
      n.fail(Code::invalid_model, "the mel points map past the " + std::to_string(bins) +
                                      " DFT bins (upper_edge_hertz above sample_rate / 2?)");
  }
  Tensor y(DType::f32, {bins, mels});
  float* p = y.data<float>();
  for (int64_t i = 0; i < bins * mels; ++i) p[i] = 0;
  for (int64_t m = 0; m < mels; ++m) {
    const int64_t left = point[size_t(m)], centre = point[size_t(m + 1)],
                  right = point[size_t(m + 2)];
    if (centre == left)
      p[centre * mels + m] = 1;
    else
      for (int64_t j = left; j <= centre; ++j)
        p[j * mels + m] = float(double(j - left) / double(centre - left));
    for (int64_t j = centre; j < right; ++j)
      p[j * mels + m] = float(double(right - j) / double(right - centre));
  }
  set_const_output(g, n, 0, std::move(y));
}

}  // namespace kiln
