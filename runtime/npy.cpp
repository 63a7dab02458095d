// .npy reader/writer. Format: "\x93NUMPY", major, minor, header length (u16 for 1.0, u32 for
// 2.0/3.0), then an ASCII (UTF-8 in 3.0) Python dict literal
//   {'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, 224, 224), }
// padded with spaces and a final '\n', then the raw C-ordered data.
#include "runtime/npy.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace kiln {
namespace {

// .npy descr of each dtype (little endian).
struct Descr {
  const char* descr;
  DType dtype;
};
constexpr Descr kDescrs[] = {{"<f4", DType::f32}, {"<i8", DType::i64}, {"<i4", DType::i32},
                             {"|u1", DType::u8},  {"|i1", DType::i8},  {"|b1", DType::boolean},
                             {"<f8", DType::f64}};

const char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
// Anything beyond this is not a real tensor (keeps a corrupt header from allocating terabytes).
constexpr int64_t kMaxBytes = int64_t(1) << 40;

[[noreturn]] void bad(const std::string& path, const std::string& why) {
  fail(Code::invalid_argument, "'" + path + "' is not a supported .npy file: " + why);
}

// A tiny parser for the header dict: string keys; values are strings, True/False or tuples of
// non-negative integers — all .npy headers contain.
class HeaderParser {
 public:
  HeaderParser(const std::string& path, const std::string& text) : path_(path), s_(text) {}

  std::string descr;
  std::optional<bool> fortran;
  std::optional<Shape> shape;

  void parse() {
    skip_ws();
    expect('{');
    parse_items('}', "header", [&] {
      std::string key = parse_string();
      skip_ws();
      expect(':');
      skip_ws();
      if (key == "descr") {
        descr = parse_string();
      } else if (key == "fortran_order") {
        fortran = parse_bool();
      } else if (key == "shape") {
        shape = parse_tuple();
      } else {
        bad(path_, "unexpected header key '" + key + "'");
      }
    });
    skip_ws();
    if (i_ != s_.size()) bad(path_, "malformed header (text after '}')");
    if (descr.empty()) bad(path_, "header has no 'descr'");
    if (!fortran) bad(path_, "header has no 'fortran_order'");
    if (!shape) bad(path_, "header has no 'shape'");
  }

 private:
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r'))
      ++i_;
  }
  void expect(char c) {
    if (peek() != c) bad(path_, std::string("malformed header (expected '") + c + "')");
    ++i_;
  }
  std::string parse_string() {
    char q = peek();
    if (q != '\'' && q != '"') bad(path_, "malformed header (expected a quoted string)");
    size_t end = s_.find(q, i_ + 1);
    if (end == std::string::npos) bad(path_, "malformed header (unterminated string)");
    std::string out = s_.substr(i_ + 1, end - i_ - 1);
    i_ = end + 1;
    return out;
  }
  bool parse_bool() {
    if (s_.compare(i_, 4, "True") == 0) {
      i_ += 4;
      return true;
    }
    if (s_.compare(i_, 5, "False") == 0) {
      i_ += 5;
      return false;
    }
    bad(path_, "malformed header (fortran_order is not True/False)");
  }
  Shape parse_tuple() {
    expect('(');
    Shape dims;
    parse_items(')', "shape", [&] {
      if (peek() < '0' || peek() > '9')
        bad(path_, "malformed shape (expected a non-negative integer)");
      int64_t v = 0;
      while (peek() >= '0' && peek() <= '9') {
        if (v > (std::numeric_limits<int64_t>::max() - 9) / 10)
          bad(path_, "shape dimension too large");
        v = v * 10 + (s_[i_++] - '0');
      }
      if (peek() == 'L') ++i_;  // Python 2 long suffix
      dims.push_back(v);
    });
    return dims;
  }
  // Comma-separated items (a trailing comma allowed) up to and past `close`; `item` parses
  // one. `what` names the list in errors.
  template <class F>
  void parse_items(char close, const char* what, F&& item) {
    while (true) {
      skip_ws();
      if (peek() == close) break;
      item();
      skip_ws();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      if (peek() != close)
        bad(path_, std::string("malformed ") + what + " (expected ',' or '" + close + "')");
    }
    ++i_;
  }

  const std::string& path_;
  const std::string& s_;
  size_t i_ = 0;
};

uint32_t read_le(const unsigned char* p, int n) {
  uint32_t v = 0;
  for (int k = n - 1; k >= 0; --k) v = (v << 8) | p[k];
  return v;
}

}  // namespace

Tensor read_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(Code::io_error, "cannot open '" + path + "': " + std::strerror(errno));
  f.seekg(0, std::ios::end);
  const std::streamoff file_size = f.tellg();
  f.seekg(0, std::ios::beg);
  if (file_size < 0) fail(Code::io_error, "cannot read '" + path + "'");

  unsigned char pre[12] = {};
  if (file_size < 10) bad(path, "file is too short (" + std::to_string(file_size) + " bytes)");
  f.read(reinterpret_cast<char*>(pre), 10);
  if (!f) fail(Code::io_error, "cannot read '" + path + "'");
  if (std::memcmp(pre, kMagic, kMagicLen) != 0) bad(path, "bad magic (not a .npy file)");
  const int major = pre[6], minor = pre[7];
  size_t prefix = 10;
  uint32_t header_len = 0;
  if (major == 1) {
    header_len = read_le(pre + 8, 2);
  } else if (major == 2 || major == 3) {
    if (file_size < 12) bad(path, "file is too short for a version 2/3 header");
    f.read(reinterpret_cast<char*>(pre + 10), 2);
    if (!f) fail(Code::io_error, "cannot read '" + path + "'");
    header_len = read_le(pre + 8, 4);
    prefix = 12;
  } else {
    bad(path, "unsupported format version " + std::to_string(major) + "." + std::to_string(minor));
  }
  if (std::streamoff(prefix) + std::streamoff(header_len) > file_size)
    bad(path, "truncated header (header length " + std::to_string(header_len) + ", file size " +
                  std::to_string(file_size) + ")");
  std::string header(header_len, '\0');
  f.read(header.data(), std::streamsize(header_len));
  if (!f) fail(Code::io_error, "cannot read '" + path + "'");

  HeaderParser hp(path, header);
  hp.parse();
  if (*hp.fortran) bad(path, "fortran_order is True (only C order is supported)");

  // dtype: float32, int64, int32, uint8, int8 and bool, as stored.
  // ('=' is native order: little endian on x86.)
  const std::string& d = hp.descr;
  const std::string little = d.size() == 3 && d[0] == '=' ? "<" + d.substr(1) : d;
  const auto it = std::find_if(std::begin(kDescrs), std::end(kDescrs),
                               [&](const Descr& e) { return little == e.descr; });
  if (it == std::end(kDescrs))
    bad(path, "unsupported dtype '" + d +
                  "' (expected '<f4', '<i8', '<i4', '|u1', '|i1' or '|b1', little endian)");
  const DType dtype = it->dtype;
  const size_t file_elem = dtype_size(dtype);

  Shape shape = *hp.shape;
  int64_t numel = 1;
  for (int64_t dim : shape) {
    if (dim != 0 && numel > kMaxBytes / int64_t(file_elem) / dim)
      bad(path, "shape " + shape_str(shape) + " is absurdly large");
    numel *= dim;
  }
  const int64_t data_bytes = numel * int64_t(file_elem);
  const int64_t avail = int64_t(file_size) - int64_t(prefix) - int64_t(header_len);
  if (avail < data_bytes)
    bad(path, "truncated data (shape " + shape_str(shape) + " needs " + std::to_string(data_bytes) +
                  " bytes, file has " + std::to_string(avail) + ")");
  if (avail > data_bytes)
    bad(path, std::to_string(avail - data_bytes) + " unexpected trailing bytes after the data");

  Tensor t(dtype, shape);
  if (data_bytes == 0) return t;
  f.read(static_cast<char*>(t.raw()), std::streamsize(data_bytes));
  if (!f) fail(Code::io_error, "cannot read the data of '" + path + "'");
  return t;
}

void write_npy(const std::string& path, const Tensor& t) {
  std::string header = "{'descr': '";
  const auto it = std::find_if(std::begin(kDescrs), std::end(kDescrs),
                               [&](const Descr& e) { return e.dtype == t.dtype(); });
  if (it == std::end(kDescrs)) fail(Code::internal, "write_npy: no .npy dtype for this tensor");
  header += it->descr;
  header += "', 'fortran_order': False, 'shape': (";
  for (size_t k = 0; k < t.shape().size(); ++k) {
    if (k) header += ", ";
    header += std::to_string(t.shape()[k]);
  }
  if (t.shape().size() == 1) header += ",";
  header += "), }";
  // Pad with spaces so that the data starts on a 64-byte boundary (what NumPy does); v2.0 only
  // when the header does not fit a u16.
  size_t prefix = 10;
  size_t total = prefix + header.size() + 1;
  size_t padded = (total + 63) / 64 * 64;
  int major = 1;
  if (padded - prefix > 0xffff) {
    major = 2;
    prefix = 12;
    total = prefix + header.size() + 1;
    padded = (total + 63) / 64 * 64;
  }
  header.append(padded - total, ' ');
  header += '\n';
  const size_t hlen = header.size();

  std::string pre(kMagic, kMagicLen);
  pre += char(major);
  pre += char(0);
  for (size_t k = 0; k < prefix - 8; ++k) pre += char((hlen >> (8 * k)) & 0xff);

  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) fail(Code::io_error, "cannot create '" + path + "': " + std::strerror(errno));
  f.write(pre.data(), std::streamsize(pre.size()));
  f.write(header.data(), std::streamsize(header.size()));
  if (t.nbytes()) f.write(static_cast<const char*>(t.raw()), std::streamsize(t.nbytes()));
  f.close();
  if (!f) fail(Code::io_error, "cannot write '" + path + "': " + std::strerror(errno));
}

}  // namespace kiln
