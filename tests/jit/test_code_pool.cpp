// The JIT code pool: blocks run what was written, freed ranges are reused, threads can publish
// at once, and no mapping is ever writable and executable.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "jit/code_pool.h"

namespace {

// mov eax, imm32; ret
kiln::CodeBlock returns(int v) {
  uint8_t code[6] = {0xB8, 0, 0, 0, 0, 0xC3};
  std::memcpy(code + 1, &v, 4);
  kiln::CodeBlock b = kiln::CodeBlock::reserve(sizeof code);
  b.write(code, sizeof code);
  return b;
}

int call(const kiln::CodeBlock& b) {
  return reinterpret_cast<int (*)()>(const_cast<uint8_t*>(b.addr()))();
}

bool any_writable_executable_mapping() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const auto sp = line.find(' ');
    if (sp != std::string::npos && line.size() > sp + 3 && line[sp + 2] == 'w' &&
        line[sp + 3] == 'x')
      return true;
  }
  return false;
}

}  // namespace

TEST_CASE("code pool blocks run the code written to them") {
  std::vector<kiln::CodeBlock> blocks;
  for (int i = 0; i < 100; ++i) blocks.push_back(returns(i * 7 - 3));
  for (int i = 0; i < 100; ++i) CHECK(call(blocks[size_t(i)]) == i * 7 - 3);
  CHECK(blocks[0].size() == 6);
  CHECK_FALSE(any_writable_executable_mapping());
}

TEST_CASE("code pool reuses the range of a dead block") {
  if (!kiln::code_pool_active()) return;  // private mappings: nothing to reuse
  kiln::CodeBlock a = returns(1);
  const uint8_t* at = a.addr();
  a = kiln::CodeBlock();  // released
  kiln::CodeBlock b = returns(2);
  CHECK(b.addr() == at);  // first fit: the freed range comes back
  CHECK(call(b) == 2);
}

TEST_CASE("code pool: threads publish at once") {
  std::vector<std::thread> ts;
  std::vector<int> bad(4, 0);
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([t, &bad] {
      for (int i = 0; i < 200; ++i) {
        kiln::CodeBlock b = returns(t * 1000 + i);
        bad[size_t(t)] += call(b) != t * 1000 + i;
      }
    });
  for (auto& t : ts) t.join();
  for (int b : bad) CHECK(b == 0);
}

TEST_CASE("code pool refuses writes past the reservation or twice") {
  kiln::CodeBlock b = kiln::CodeBlock::reserve(8);
  std::vector<uint8_t> big(1024, 0xC3);
  CHECK_THROWS(b.write(big.data(), big.size()));
  b.write(big.data(), 8);
  CHECK_THROWS(b.write(big.data(), 8));
}

TEST_CASE("code pool: after fork neither process writes where the other may run") {
  if (!kiln::code_pool_active()) return;
  kiln::CodeBlock a = returns(1);
  const uint8_t* freed = a.addr();
  a = kiln::CodeBlock();  // its range is free in both processes after the fork
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  kiln::CodeBlock b = returns(pid == 0 ? 2 : 3);
  const bool ok = b.addr() != freed && call(b) == (pid == 0 ? 2 : 3);
  if (pid == 0) _exit(ok ? 0 : 1);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);  // the child published into a chunk of its own
  CHECK(ok);
}
