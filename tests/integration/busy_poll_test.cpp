// client_options::busy_poll: the I/O thread may poll before it sleeps (net/busy_poll.hpp decides
// when). Whatever the setting, waiting, hand-offs and replies work the same; out-of-range values
// are refused.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "dlock/dlock.hpp"
#include "redis_fixture.hpp"
#include "sanitizers.hpp"

namespace dlock::testing {
namespace {

using namespace std::chrono_literals;

class BusyPoll : public redis_test {
 protected:
  client_options options(std::chrono::microseconds busy_poll,
                         load_polling under_load = load_polling::when_it_pays) {
    auto o = client_options::from_url(url());
    o.busy_poll = busy_poll;
    o.busy_poll_under_load = under_load;
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

TEST_F(BusyPoll, AnUnknownUnderLoadModeIsRefused) {
  try {
    client c(options(50us, static_cast<load_polling>(7)));
    FAIL() << "an unknown load_polling value was accepted";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("busy_poll_under_load"), std::string::npos) << e.what();
  }
}

// Threads of one client and a second client take turns on one lock; every critical section is
// alone (the counter is read and written back under the lock, never lost), with the I/O thread
// never polling, polling 50 us (the default) under each rule for load, and polling as long as
// allowed.
TEST_F(BusyPoll, HandOffsAndMutualExclusionHoldWithAnySetting) {
  const std::pair<std::chrono::microseconds, load_polling> settings[] = {
      {0us, load_polling::when_it_pays},
      {50us, load_polling::never},
      {50us, load_polling::when_it_pays},
      {50us, load_polling::always},
      {10'000us, load_polling::always}};
  for (const auto& [us, under_load] : settings) {
    const std::string setting =
        std::to_string(us.count()) + "us-" + std::to_string(static_cast<int>(under_load));
    SCOPED_TRACE(setting);
    client a(options(us, under_load));
    client b(options(us, under_load));
    const std::string name = key("busy-poll:" + setting);
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

// 16 threads of one client, each on a name of its own: the client is loaded (many commands in
// flight on each connection), so the rule for load runs (under when_it_pays, a trial switching
// polling on and off while replies arrive). Every acquisition and release completes, under
// each rule.
TEST_F(BusyPoll, ALoadedClientCompletesEveryCallUnderEachRule) {
  for (const auto under_load :
       {load_polling::never, load_polling::when_it_pays, load_polling::always}) {
    SCOPED_TRACE(static_cast<int>(under_load));
    client c(options(50us, under_load));
    constexpr int threads_n = 16;
    constexpr int per_thread = fewer_under_sanitizers(1'000, 4);
    std::atomic<int> granted{0}, released{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < threads_n; ++t) {
      threads.emplace_back([&, t] {
        auto lock = c.simple(key("loaded:" + std::to_string(t)));
        for (int i = 0; i < per_thread; ++i) {
          auto held = lock.acquire();
          if (!held) continue;
          ++granted;
          if (held.release()) ++released;
        }
      });
    }
    for (auto& t : threads)
      t.join();
    EXPECT_EQ(granted.load(), threads_n * per_thread);
    EXPECT_EQ(released.load(), threads_n * per_thread);
  }
}

}  // namespace
}  // namespace dlock::testing
