// The deployment soak (bench/soak/soak.h) at a size CI can afford, also under TSan: threads
// running two sessions at once while another thread loads and releases sessions; outputs must
// be bitwise identical, and open file descriptors (and, outside the sanitizers, resident
// memory) must not grow from round to round.
#include <doctest/doctest.h>

#include "bench/soak/soak.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define KILN_SOAK_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define KILN_SOAK_SANITIZED 1
#endif
#endif

TEST_CASE("soak: concurrent runs on several sessions, mixed with loads and releases") {
  kiln_soak::Config c;
  c.model = std::string(KILN_FIXTURE_DIR) + "/models/tiny_resnet_op13/model.onnx";
  c.run_threads = 3;
  c.runs = 12;
  c.sessions = 2;
  c.load_threads = 1;
  c.loads = 12;
  c.rounds = 8;
  c.rss_slack_kb = 2048;  // a session leaked per load: ~230 KiB each, 11 MiB in 4 rounds
  for (int intra : {1, 2}) {
    CAPTURE(intra);
    c.intra_threads = intra;
    const kiln_soak::Report r = c.rounds > 0 ? kiln_soak::soak(c) : kiln_soak::Report();
    MESSAGE(r.summary());
    CHECK(r.failures == 0);
    CHECK(r.mismatches == 0);
    CHECK(r.runs == long(c.run_threads) * (c.runs / 4 + c.runs * c.rounds) +
                        long(c.load_threads) * (c.loads / 2 + c.loads * c.rounds));
    CHECK(r.loads == long(c.load_threads) * (c.loads / 2 + c.loads * c.rounds));
    CHECK_FALSE(r.fds_grew());
#ifdef KILN_SOAK_SANITIZED
    MESSAGE("resident memory not judged under a sanitizer: its allocator keeps freed memory");
#else
    CHECK_FALSE(r.rss_grew(c.rss_slack_kb));
#endif
  }
}
