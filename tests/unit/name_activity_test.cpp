// The per-name activity table: a direct first attempt is claimed only while nothing else goes on
// for that name here, a yield holds claims off until it ends, and names never affect each other,
// including names that share a shard and threads working on them at once.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "locks/runtime/name_activity.hpp"

namespace {

using dlock::detail::name_activity;
using namespace std::chrono_literals;

TEST(NameActivity, AClaimCountsAsLocalActivityUntilItEnds) {
  name_activity a;
  const auto now = name_activity::clock::now();
  EXPECT_FALSE(a.has_local("n"));
  ASSERT_TRUE(a.claim_direct("n", now));
  EXPECT_TRUE(a.has_local("n"));
  EXPECT_FALSE(a.claim_direct("n", now));  // the first one is still going on

  auto attempt = std::make_shared<int>(1);
  a.publish_direct("n", attempt);
  EXPECT_EQ(a.direct("n"), attempt);
  a.add_local("n", +1);  // another acquisition queues behind it
  a.add_local("n", -1, /*end_direct=*/true);
  EXPECT_TRUE(a.has_local("n"));
  EXPECT_EQ(a.direct("n"), nullptr);
  EXPECT_FALSE(a.claim_direct("n", now));
  a.add_local("n", -1);
  EXPECT_FALSE(a.has_local("n"));
  EXPECT_TRUE(a.claim_direct("n", now));
}

TEST(NameActivity, AYieldHoldsClaimsOffUntilItPassesOrEnds) {
  name_activity a;
  const auto now = name_activity::clock::now();
  a.set_yield("n", now + 1h);
  EXPECT_EQ(a.yielding("n", now), now + 1h);
  EXPECT_FALSE(a.claim_direct("n", now));
  EXPECT_TRUE(a.claim_direct("other", now));
  EXPECT_TRUE(a.claim_direct("n", now + 2h));  // past it: the claim clears it
  EXPECT_FALSE(a.yielding("n", now));
  a.add_local("n", -1, true);

  a.set_yield("n", now + 1h);
  a.end_yield("n");
  EXPECT_FALSE(a.yielding("n", now));
  EXPECT_TRUE(a.claim_direct("n", now));
}

// Far more names than shards: many share one, and each keeps its own state.
TEST(NameActivity, NamesThatShareAShardKeepTheirOwnState) {
  name_activity a;
  const auto now = name_activity::clock::now();
  constexpr int names = 300;
  for (int i = 0; i < names; i += 2)
    ASSERT_TRUE(a.claim_direct("name:" + std::to_string(i), now)) << i;
  for (int i = 1; i < names; i += 2)
    a.set_yield("name:" + std::to_string(i), now + 1h);
  for (int i = 0; i < names; ++i) {
    const auto name = "name:" + std::to_string(i);
    EXPECT_EQ(a.has_local(name), i % 2 == 0) << name;
    EXPECT_EQ(a.yielding(name, now).has_value(), i % 2 == 1) << name;
    EXPECT_FALSE(a.claim_direct(name, now)) << name;
  }
  for (int i = 0; i < names; i += 2)
    a.add_local("name:" + std::to_string(i), -1, true);
  for (int i = 1; i < names; i += 2)
    a.end_yield("name:" + std::to_string(i));
  for (int i = 0; i < names; ++i)
    EXPECT_TRUE(a.claim_direct("name:" + std::to_string(i), now)) << i;
}

// Two threads contend on one name while four others each cycle through names of their own (more
// names than shards, so they share shards with each other and with the contended name): the
// contended claims exclude each other, and the others' claims always succeed. Run under TSan too.
TEST(NameActivity, ConcurrentClaimsExcludeOnlyTheirOwnName) {
  name_activity a;
  constexpr int rounds = 20'000;
  constexpr int solo_threads = 4;
  constexpr int names_each = 50;
  std::atomic<int> holders{0};
  std::atomic<int> overlaps{0};
  std::atomic<int> solo_refusals{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&] {
      for (int r = 0; r < rounds; ++r) {
        if (!a.claim_direct("contended", name_activity::clock::now())) continue;
        if (holders.fetch_add(1) != 0) overlaps.fetch_add(1);
        holders.fetch_sub(1);
        a.add_local("contended", -1, true);
      }
    });
  }
  for (int t = 0; t < solo_threads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < rounds; ++r) {
        const auto name = "solo:" + std::to_string(t) + ":" + std::to_string(r % names_each);
        if (!a.claim_direct(name, name_activity::clock::now())) {
          solo_refusals.fetch_add(1);
          continue;
        }
        a.add_local(name, -1, true);
      }
    });
  }
  for (auto& th : threads)
    th.join();
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(solo_refusals.load(), 0);
  EXPECT_FALSE(a.has_local("contended"));
  EXPECT_TRUE(a.claim_direct("contended", name_activity::clock::now()));
}

}  // namespace
