// The deterministic driver of the fuzz harnesses, for CI: linked with a harness instead of
// libFuzzer's main, it runs (1) every input given (the committed corpus, past findings, the
// seeds) once, then (2) an exploration of N mutants, each derived from one of those inputs by
// 1-4 mutations with the harness's own mutator (tests/fuzz/onnx_mutator.h) or a byte mutator,
// all drawn from a fixed seed. No coverage feedback: the inputs are a function of the
// committed files, the seed and N alone, so the same commit always runs the same inputs and
// gets the same result. (libFuzzer's guided search adds an input whenever coverage grows,
// and coverage differs between two runs of one input here: label choices follow measured
// times, data alignment follows addresses; its random exploration lives in
// bench/fuzz_long.sh, whose finds are merged into the committed corpus.)
//
//   <harness>_det [--explore N] [--seed S] [--dict FILE] [--timeout SEC] [--max-len BYTES]
//                 [--save DIR] INPUT_FILE_OR_DIR...
//
// Each input is written to DIR/current before it runs (default: the working folder's
// ./current): after a crash, a sanitizer report or a timeout (the process exits with 70) it
// is the reproducer; `<harness>_det FILE` (or libFuzzer's `<harness> FILE`) replays it.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

namespace fs = std::filesystem;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);
extern "C" __attribute__((weak)) size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size,
                                                                size_t max_size, unsigned seed);

namespace {

std::mt19937_64 g_rng;            // the byte mutator's, reseeded before every mutation
std::vector<std::string> g_dict;  // tokens from --dict
std::string g_current;            // where the running input is saved
const char* g_current_name = "";  // what it is (for the timeout message)

uint64_t mix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// libFuzzer's dictionary format: one "token" per line (optionally name="token"), with \xNN,
// \\ and \" escapes; '#' starts a comment.
void load_dict(const std::string& path) {
  std::ifstream f(path);
  if (!f) {
    std::fprintf(stderr, "det_driver: cannot read dictionary %s\n", path.c_str());
    std::exit(2);
  }
  for (std::string line; std::getline(f, line);) {
    const size_t q = line.find('"'), e = line.rfind('"');
    if (line.empty() || line[0] == '#' || q == std::string::npos || e <= q) continue;
    std::string tok;
    for (size_t i = q + 1; i < e; ++i) {
      if (line[i] == '\\' && i + 1 < e) {
        if (line[i + 1] == 'x' && i + 3 < e) {
          tok += char(std::stoi(line.substr(i + 2, 2), nullptr, 16));
          i += 3;
        } else {
          tok += line[++i];
        }
      } else {
        tok += line[i];
      }
    }
    if (!tok.empty()) g_dict.push_back(tok);
  }
}

void on_alarm(int) {
  static const char msg[] = "\n*** det_driver: timeout: input ran longer than the limit: ";
  (void)!write(2, msg, sizeof msg - 1);
  (void)!write(2, g_current_name, std::strlen(g_current_name));
  (void)!write(2, "\n", 1);
  _exit(70);
}

void run_one(const std::string& bytes, const char* name, unsigned timeout) {
  {
    std::ofstream f(g_current, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), std::streamsize(bytes.size()));
  }
  g_current_name = name;
  alarm(timeout);
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  alarm(0);
}

}  // namespace

// libFuzzer's byte mutator, which the harnesses' custom mutators call: one random edit.
extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size) {
  auto pick = [](uint64_t n) { return n ? g_rng() % n : 0; };
  static const uint64_t kInteresting[] = {
      0, 1, 0x7f, 0x80, 0xff, 0x7fff, 0xffff, 0x7fffffff, 0xffffffff, 0x8000000000000000ull, ~0ull};
  switch (pick(size ? 7 : 2)) {
    case 0:  // insert a dictionary token (or a random byte)
    case 1: {
      std::string tok =
          g_dict.empty() ? std::string(1, char(g_rng())) : g_dict[pick(g_dict.size())];
      if (size + tok.size() > max_size) return size;
      const size_t at = pick(size + 1);
      std::memmove(data + at + tok.size(), data + at, size - at);
      std::memcpy(data + at, tok.data(), tok.size());
      return size + tok.size();
    }
    case 2:  // flip a bit
      data[pick(size)] ^= uint8_t(1u << pick(8));
      return size;
    case 3:  // a random byte
      data[pick(size)] = uint8_t(g_rng());
      return size;
    case 4: {  // erase a run of bytes
      const size_t at = pick(size), n = 1 + pick(std::min<size_t>(size - at, 64));
      std::memmove(data + at, data + at + n, size - at - n);
      return size - n;
    }
    case 5: {  // copy a run of bytes over another place
      const size_t from = pick(size), to = pick(size);
      const size_t n = 1 + pick(std::min(size - from, size - to));
      std::memmove(data + to, data + from, n);
      return size;
    }
    default: {  // an interesting value, little-endian, 1 to 8 bytes
      const uint64_t v = kInteresting[pick(std::size(kInteresting))];
      const size_t n = std::min<size_t>(1 + pick(8), size), at = pick(size - n + 1);
      std::memcpy(data + at, &v, n);
      return size;
    }
  }
}

int main(int argc, char** argv) {
  uint64_t explore = 0, seed = 1;
  unsigned timeout = 25;
  size_t max_len = 65536;
  std::string save = ".";
  std::vector<fs::path> roots;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "det_driver: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--explore")
      explore = std::stoull(value());
    else if (a == "--seed")
      seed = std::stoull(value());
    else if (a == "--dict")
      load_dict(value());
    else if (a == "--timeout")
      timeout = unsigned(std::stoul(value()));
    else if (a == "--max-len")
      max_len = std::stoul(value());
    else if (a == "--save")
      save = value();
    else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "det_driver: unknown option %s\n", a.c_str());
      return 2;
    } else {
      roots.push_back(fs::absolute(a));
    }
  }
  // Every input, in an order that depends on names only (never on the file system's).
  std::vector<std::pair<std::string, std::string>> inputs;
  for (const fs::path& r : roots) {
    std::vector<fs::path> files;
    if (fs::is_directory(r)) {
      for (const auto& e : fs::recursive_directory_iterator(r))
        if (e.is_regular_file()) files.push_back(e.path());
      std::sort(files.begin(), files.end());
    } else {
      files.push_back(r);
    }
    for (const fs::path& p : files) {
      std::ifstream f(p, std::ios::binary);
      std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      if (bytes.size() <= max_len) inputs.emplace_back(p.string(), std::move(bytes));
    }
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "det_driver: no inputs\n");
    return 2;
  }
  fs::create_directories(save);
  g_current = fs::absolute(fs::path(save) / "current").string();
  signal(SIGALRM, on_alarm);
  // The harness's setup (it may change the working folder); it sees no arguments of ours.
  int hargc = 1;
  char** hargv = argv;
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&hargc, &hargv);

  const auto t0 = std::chrono::steady_clock::now();
  for (const auto& [name, bytes] : inputs) run_one(bytes, name.c_str(), timeout);
  const double replay_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string buf;
  for (uint64_t i = 0; i < explore; ++i) {
    const uint64_t h = mix(seed * 0x100000001b3ull + i);
    const auto& base = inputs[h % inputs.size()];
    buf.assign(base.second);
    size_t size = buf.size();
    buf.resize(std::max(max_len, size));
    const int edits = 1 + int((h >> 32) % 4);
    for (int j = 0; j < edits; ++j) {
      const uint64_t s = mix(h + uint64_t(j) + 1);
      g_rng.seed(s);
      auto* d = reinterpret_cast<uint8_t*>(buf.data());
      size = LLVMFuzzerCustomMutator ? LLVMFuzzerCustomMutator(d, size, max_len, unsigned(s))
                                     : LLVMFuzzerMutate(d, size, max_len);
      size = std::min(size, max_len);
    }
    buf.resize(size);
    const std::string what = "mutant " + std::to_string(i) + " of " + base.first;
    run_one(buf, what.c_str(), timeout);
  }
  const double total_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("det_driver: %zu inputs replayed in %.1f s; %llu mutants (seed %llu) in %.1f s\n",
              inputs.size(), replay_s, (unsigned long long)explore, (unsigned long long)seed,
              total_s - replay_s);
  std::remove(g_current.c_str());
  return 0;
}
