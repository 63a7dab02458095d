// .npy reader/writer. Expected bytes come from NumPy 1.24 (np.save output pasted below) and
// from hand-written headers, never from write_npy itself.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "runtime/npy.h"

using namespace kiln;

namespace {

std::string tmp_path(const std::string& name) {
  std::filesystem::create_directories(KILN_TEST_TMP);
  return std::string(KILN_TEST_TMP) + "/" + name;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Builds a .npy: magic, version, little-endian header length, header padded to 64 bytes.
std::string npy_bytes(const std::string& dict, const std::string& data, int major = 1,
                      bool pad = true) {
  size_t prefix = major == 1 ? 10 : 12;
  std::string h = dict;
  if (pad)
    while ((prefix + h.size() + 1) % 64) h += ' ';
  h += '\n';
  std::string out("\x93NUMPY", 6);
  out += char(major);
  out += char(0);
  for (size_t k = 0; k < prefix - 8; ++k) out += char((h.size() >> (8 * k)) & 0xff);
  return out + h + data;
}

template <class T>
std::string raw(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// np.save(np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5 - 1)
const std::string kNumpyF32 =
    std::string("\x93NUMPY\x01\x00v\x00", 10) +
    "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" + std::string(58, ' ') + "\n" +
    std::string(
        "\x00\x00\x80\xbf\x00\x00\x00\xbf\x00\x00\x00\x00\x00\x00\x00?\x00\x00\x80?"
        "\x00\x00\xc0?",
        24);
// np.save(np.array([1, -2, 3], dtype=np.int64))
const std::string kNumpyI64 = std::string("\x93NUMPY\x01\x00v\x00", 10) +
                              "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }" +
                              std::string(60, ' ') + "\n" +
                              std::string(
                                  "\x01\x00\x00\x00\x00\x00\x00\x00\xfe\xff\xff\xff\xff\xff\xff\xff"
                                  "\x03\x00\x00\x00\x00\x00\x00\x00",
                                  24);

// Runs read_npy on `bytes` and returns the error (code, message); fails the test if it loads.
std::pair<Code, std::string> read_error(const std::string& name, const std::string& bytes) {
  std::string p = tmp_path(name);
  write_bytes(p, bytes);
  try {
    read_npy(p);
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find(name) != std::string::npos);  // names the file
    return {e.code(), e.what()};
  }
  FAIL("read_npy accepted " << name);
  return {Code::ok, ""};
}

}  // namespace

TEST_CASE("npy: reads files written by NumPy") {
  SUBCASE("float32 2x3") {
    std::string p = tmp_path("numpy_f32.npy");
    write_bytes(p, kNumpyF32);
    Tensor t = read_npy(p);
    CHECK(t.dtype() == DType::f32);
    CHECK(t.shape() == Shape{2, 3});
    const float want[] = {-1.f, -0.5f, 0.f, 0.5f, 1.f, 1.5f};
    for (int i = 0; i < 6; ++i) CHECK(t.data<float>()[i] == want[i]);
  }
  SUBCASE("int64 1-D") {
    std::string p = tmp_path("numpy_i64.npy");
    write_bytes(p, kNumpyI64);
    Tensor t = read_npy(p);
    CHECK(t.dtype() == DType::i64);
    CHECK(t.shape() == Shape{3});
    CHECK(t.data<int64_t>()[0] == 1);
    CHECK(t.data<int64_t>()[1] == -2);
    CHECK(t.data<int64_t>()[2] == 3);
  }
}

TEST_CASE("npy: writes the same bytes as NumPy") {
  Tensor f(DType::f32, {2, 3});
  for (int i = 0; i < 6; ++i) f.data<float>()[i] = float(i) * 0.5f - 1.f;
  std::string p = tmp_path("written_f32.npy");
  write_npy(p, f);
  CHECK(read_bytes(p) == kNumpyF32);

  Tensor n(DType::i64, {3});
  n.data<int64_t>()[0] = 1;
  n.data<int64_t>()[1] = -2;
  n.data<int64_t>()[2] = 3;
  p = tmp_path("written_i64.npy");
  write_npy(p, n);
  CHECK(read_bytes(p) == kNumpyI64);
}

TEST_CASE("npy: round trips") {
  SUBCASE("float32 4-D") {
    Tensor t(DType::f32, {2, 3, 4, 5});
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = float(i) * 0.25f - 7.f;
    std::string p = tmp_path("rt_f32.npy");
    write_npy(p, t);
    std::string bytes = read_bytes(p);
    // Data starts on a 64-byte boundary, right after a '\n'.
    size_t hlen = size_t(uint8_t(bytes[8])) | size_t(uint8_t(bytes[9])) << 8;
    CHECK((10 + hlen) % 64 == 0);
    CHECK(bytes[10 + hlen - 1] == '\n');
    CHECK(bytes.size() == 10 + hlen + 120 * 4);
    Tensor r = read_npy(p);
    CHECK(r.shape() == t.shape());
    CHECK(std::memcmp(r.raw(), t.raw(), t.nbytes()) == 0);
  }
  SUBCASE("scalar and empty") {
    Tensor s(DType::f32, {});
    s.data<float>()[0] = 3.25f;
    write_npy(tmp_path("rt_scalar.npy"), s);
    CHECK(read_bytes(tmp_path("rt_scalar.npy")).find("'shape': ()") != std::string::npos);
    Tensor r = read_npy(tmp_path("rt_scalar.npy"));
    CHECK(r.shape().empty());
    CHECK(r.data<float>()[0] == 3.25f);

    Tensor e(DType::i64, {0, 3});
    write_npy(tmp_path("rt_empty.npy"), e);
    Tensor re = read_npy(tmp_path("rt_empty.npy"));
    CHECK(re.dtype() == DType::i64);
    CHECK(re.shape() == Shape{0, 3});
  }
  SUBCASE("every dtype keeps its bytes and descr") {
    for (auto [d, descr] : {std::pair{DType::u8, "'|u1'"},
                            {DType::i8, "'|i1'"},
                            {DType::i32, "'<i4'"},
                            {DType::f64, "'<f8'"},
                            {DType::boolean, "'|b1'"}}) {
      Tensor t(d, {7});
      for (int64_t i = 0; i < int64_t(t.nbytes()); ++i)
        static_cast<uint8_t*>(t.raw())[i] = uint8_t(d == DType::boolean ? i & 1 : 37 * i + 5);
      const std::string p = tmp_path("rt_dtype.npy");
      write_npy(p, t);
      CHECK(read_bytes(p).find(descr) != std::string::npos);
      const Tensor r = read_npy(p);
      CHECK(r.dtype() == d);
      CHECK(std::memcmp(r.raw(), t.raw(), t.nbytes()) == 0);
    }
  }
}

TEST_CASE("npy: hand-written headers") {
  const std::vector<float> f6 = {1, 2, 3, 4, 5, 6};
  SUBCASE("keys in another order, double quotes, no trailing comma or padding") {
    std::string p = tmp_path("hand1.npy");
    write_bytes(p, npy_bytes("{\"shape\": (3,2), \"fortran_order\": False, \"descr\": \"<f4\"}",
                             raw(f6), 1, false));
    Tensor t = read_npy(p);
    CHECK(t.shape() == Shape{3, 2});
    CHECK(t.data<float>()[5] == 6.f);
  }
  SUBCASE("version 2.0 and 3.0 headers") {
    for (int major : {2, 3}) {
      std::string p = tmp_path("hand_v" + std::to_string(major) + ".npy");
      write_bytes(p, npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", raw(f6),
                               major));
      Tensor t = read_npy(p);
      CHECK(t.shape() == Shape{6});
      CHECK(t.data<float>()[0] == 1.f);
      CHECK(t.data<float>()[5] == 6.f);
    }
  }
  SUBCASE("int32, uint8 and int8 as stored") {
    std::vector<int32_t> v = {7, -8, 2147483647};
    std::string p = tmp_path("hand_i4.npy");
    write_bytes(p, npy_bytes("{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", raw(v)));
    Tensor t = read_npy(p);
    CHECK(t.dtype() == DType::i32);
    CHECK(t.data<int32_t>()[1] == -8);
    CHECK(t.data<int32_t>()[2] == 2147483647);
    const std::string bytes = {char(0), char(200), char(255)};
    write_bytes(p, npy_bytes("{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }", bytes));
    t = read_npy(p);
    CHECK(t.dtype() == DType::u8);
    CHECK(t.data<uint8_t>()[1] == 200);
    write_bytes(p, npy_bytes("{'descr': '|i1', 'fortran_order': False, 'shape': (3,), }", bytes));
    t = read_npy(p);
    CHECK(t.dtype() == DType::i8);
    CHECK(t.data<int8_t>()[1] == -56);
    CHECK(t.data<int8_t>()[2] == -1);
  }
}

TEST_CASE("npy: errors name the file") {
  const std::string f6 = raw(std::vector<float>{1, 2, 3, 4, 5, 6});
  const std::string ok_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";

  SUBCASE("missing file") {
    try {
      read_npy(tmp_path("does_not_exist.npy"));
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.code() == Code::io_error);
      CHECK(std::string(e.what()).find("does_not_exist.npy") != std::string::npos);
    }
  }
  SUBCASE("bad magic") {
    std::string b = npy_bytes(ok_dict, f6);
    b[1] = 'X';
    auto [code, msg] = read_error("bad_magic.npy", b);
    CHECK(code == Code::invalid_argument);
    CHECK(msg.find("magic") != std::string::npos);
  }
  SUBCASE("too short") {
    auto [code, msg] = read_error("short.npy", "\x93NUM");
    CHECK(code == Code::invalid_argument);
  }
  SUBCASE("unsupported version") {
    std::string b = npy_bytes(ok_dict, f6);
    b[6] = 9;
    auto [code, msg] = read_error("version.npy", b);
    CHECK(msg.find("version") != std::string::npos);
  }
  SUBCASE("unsupported dtype") {
    for (const char* d : {">f8", ">f4", "<u2", "<c8", "<f2"}) {
      std::string dict =
          std::string("{'descr': '") + d + "', 'fortran_order': False, 'shape': (6,), }";
      auto [code, msg] = read_error("dtype.npy", npy_bytes(dict, f6));
      CHECK(code == Code::invalid_argument);
      CHECK(msg.find(d) != std::string::npos);
    }
  }
  SUBCASE("fortran order") {
    auto [code, msg] = read_error(
        "fortran.npy", npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", f6));
    CHECK(msg.find("fortran_order") != std::string::npos);
  }
  SUBCASE("truncated data") {
    auto [code, msg] = read_error("truncated.npy", npy_bytes(ok_dict, f6.substr(0, 20)));
    CHECK(code == Code::invalid_argument);
    CHECK(msg.find("truncated") != std::string::npos);
  }
  SUBCASE("trailing bytes") {
    auto [code, msg] = read_error("trailing.npy", npy_bytes(ok_dict, f6 + "xx"));
    CHECK(msg.find("trailing") != std::string::npos);
  }
  SUBCASE("header longer than the file") {
    std::string b = npy_bytes(ok_dict, f6);
    b[8] = char(0xff);
    b[9] = char(0xff);
    auto [code, msg] = read_error("long_header.npy", b);
    CHECK(msg.find("truncated header") != std::string::npos);
  }
  SUBCASE("absurd shape") {
    auto [code, msg] = read_error(
        "absurd.npy",
        npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (100000000, 100000000), }",
                  f6));
    CHECK(msg.find("large") != std::string::npos);
    auto [code2, msg2] = read_error(
        "huge_dim.npy",
        npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }",
                  f6));
    CHECK(code2 == Code::invalid_argument);
  }
  SUBCASE("malformed headers") {
    for (const char* dict : {"{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 3), }",
                             "{'descr': '<f4', 'fortran_order': False}",
                             "{'descr': '<f4', 'fortran_order': Nope, 'shape': (6,), }",
                             "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'x': 1}",
                             "['descr']", "{'descr': '<f4'"}) {
      auto [code, msg] = read_error("malformed.npy", npy_bytes(dict, f6));
      CHECK(code == Code::invalid_argument);
    }
  }
  SUBCASE("writing into a missing directory") {
    Tensor t(DType::f32, {2});
    try {
      write_npy(tmp_path("no_such_dir/out.npy"), t);
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.code() == Code::io_error);
      CHECK(std::string(e.what()).find("no_such_dir/out.npy") != std::string::npos);
    }
  }
}
