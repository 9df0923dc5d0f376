// client_options::busy_poll: the I/O thread may poll before it sleeps (net/busy_poll.hpp decides
// when). Whatever the setting, waiting, hand-offs and replies work the same; out-of-range values
// are refused.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "redis_fixture.hpp"

namespace dlock::testing {
namespace {

using namespace std::chrono_literals;

class BusyPoll : public redis_test {
 protected:
  client_options options(std::chrono::microseconds busy_poll) {
    auto o = client_options::from_url(url());
    o.busy_poll = busy_poll;
    return o;
  }
};

TEST_F(BusyPoll, OutOfRangeValuesAreRefused) {
  for (const auto us : {std::chrono::microseconds(-1), std::chrono::microseconds(10'001)}) {
    try {
      client c(options(us));
      FAIL() << us.count() << " us of busy polling was accepted";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("busy_poll"), std::string::npos) << e.what();
    }
  }
}

// Threads of one client and a second client take turns on one lock; every critical section is
// alone (the counter is read and written back under the lock, never lost), with the I/O thread
// never polling (the default), polling 50 us, and polling as long as allowed.
TEST_F(BusyPoll, HandOffsAndMutualExclusionHoldWithAnySetting) {
  for (const auto us : {0us, 50us, 10'000us}) {
    SCOPED_TRACE(std::to_string(us.count()) + " us");
    client a(options(us));
    client b(options(us));
    const std::string name = key("busy-poll:" + std::to_string(us.count()));
    const std::string counter = name + ":count";
    constexpr int per_thread = 100;
    std::vector<std::thread> threads;
    std::atomic<int> failures{0};
    for (client* c : {&a, &a, &b, &b}) {
      threads.emplace_back([&, c] {
        auto lock = c->reentrant(name);
        for (int i = 0; i < per_thread; ++i) {
          auto held = lock.acquire();
          if (!held) {
            ++failures;
            continue;
          }
          const auto now = c->redis().command({"GET", counter});
          const long value = now.is_nil() ? 0 : std::stol(now.str());
          c->redis().command({"SET", counter, std::to_string(value + 1)});
          if (!held.release()) ++failures;
        }
      });
    }
    for (auto& t : threads)
      t.join();
    EXPECT_EQ(failures.load(), 0);
    EXPECT_EQ(a.redis().command({"GET", counter}).str(), std::to_string(4 * per_thread));
  }
}

}  // namespace
}  // namespace dlock::testing
