// The grants table without a server: a grant is found by its kind, name and owner exactly (no
// two of them blur into one key), re-entries join the owner's grant, a grant made afresh for the
// same owner replaces the stale one, and the expiry watch is never armed later than a grant's
// validity, whatever grants come and go while it looks.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "locks/runtime/grant_registry.hpp"

namespace {

using namespace dlock::detail;

acquire_request request(const lock_kind& kind, std::string name, std::string owner) {
  acquire_request r;
  r.kind = &kind;
  r.names = kind.names_of(std::move(name), "");
  r.owner = std::move(owner);
  r.lease_time = std::chrono::milliseconds(30'000);
  return r;
}

const auto later = steady::now() + std::chrono::seconds(30);

TEST(GrantRegistry, FindsAGrantByItsKindNameAndOwnerExactly) {
  grant_registry grants;
  const auto& reentrant = reentrant_kind();
  const auto& simple = simple_kind();
  const auto a = grants.add_hold(request(reentrant, "a", "b:c"), false, 1, later);
  const auto b = grants.add_hold(request(reentrant, "a:b", "c"), false, 2, later);
  const auto c = grants.add_hold(request(simple, "a", "b:c"), false, 3, later);
  EXPECT_NE(a.g, b.g);
  EXPECT_EQ(grants.find_live(reentrant, "a", "b:c"), a.g);
  EXPECT_EQ(grants.find_live(reentrant, "a:b", "c"), b.g);
  EXPECT_EQ(grants.find_live(simple, "a", "b:c"), c.g);
  EXPECT_EQ(grants.find_live(reentrant, "a", "b"), nullptr);
  EXPECT_EQ(grants.find_live(reentrant, std::string("a\0b", 3), "c"), nullptr);
}

TEST(GrantRegistry, AReentryJoinsTheGrantAndTheLastReleaseTakesItOut) {
  grant_registry grants;
  const auto& kind = reentrant_kind();
  const auto first = grants.add_hold(request(kind, "job", "owner:1"), false, 5, later);
  const auto second = grants.add_hold(request(kind, "job", "owner:1"), true, 5, later);
  EXPECT_EQ(first.g, second.g);
  EXPECT_FALSE(grants.remove_hold(*first.g, first.hold_id).last);
  EXPECT_EQ(grants.find_live(kind, "job", "owner:1"), first.g);
  EXPECT_TRUE(grants.remove_hold(*first.g, second.hold_id).last);
  EXPECT_EQ(grants.find_live(kind, "job", "owner:1"), nullptr);

  // The table's node is reused for the next grant, under its own key.
  const auto next = grants.add_hold(request(kind, "other", "owner:2"), false, 6, later);
  EXPECT_EQ(grants.find_live(kind, "other", "owner:2"), next.g);
  EXPECT_EQ(grants.find_live(kind, "job", "owner:1"), nullptr);
}

TEST(GrantRegistry, AFreshGrantForTheSameOwnerReplacesTheStaleOne) {
  grant_registry grants;
  const auto& kind = reentrant_kind();
  const auto old = grants.add_hold(request(kind, "job", "owner:1"), false, 5, later);
  const auto fresh = grants.add_hold(request(kind, "job", "owner:1"), false, 9, later);
  EXPECT_EQ(fresh.stale, old.g);
  EXPECT_NE(fresh.g, old.g);
  EXPECT_EQ(grants.find_live(kind, "job", "owner:1"), fresh.g);
  // Losing the stale grant now must not take the fresh one out of the table.
  EXPECT_TRUE(grants.lose(old.g, dlock::lease_lost_reason::not_held).has_value());
  EXPECT_EQ(grants.find_live(kind, "job", "owner:1"), fresh.g);
  EXPECT_TRUE(grants.lose(fresh.g, dlock::lease_lost_reason::expired).has_value());
  EXPECT_EQ(grants.find_live(kind, "job", "owner:1"), nullptr);
}

TEST(GrantRegistry, TheExpiryWatchIsArmedNoLaterThanAnyGrantsValidity) {
  grant_registry grants;
  const auto& kind = simple_kind();
  const auto t0 = steady::now();
  EXPECT_EQ(grants.next_expiry(), steady::time_point::max()) << "nothing to watch";
  const auto a = grants.add_hold(request(kind, "a", "1"), false, 1, t0 + std::chrono::seconds(9));
  EXPECT_TRUE(a.earlier_expiry);
  EXPECT_EQ(grants.next_expiry(), t0 + std::chrono::seconds(9));
  const auto b = grants.add_hold(request(kind, "b", "1"), false, 2, t0 + std::chrono::seconds(20));
  EXPECT_FALSE(b.earlier_expiry) << "the watch already looks sooner";
  auto c = grants.add_hold(request(kind, "c", "1"), false, 3, t0 + std::chrono::seconds(5));
  EXPECT_TRUE(c.earlier_expiry);
  EXPECT_EQ(grants.next_expiry(), t0 + std::chrono::seconds(5));

  // At t0 + 10 s, a and c have expired; the watch moves to b's end.
  const auto [expired, next] = grants.expired(t0 + std::chrono::seconds(10));
  EXPECT_EQ(expired.size(), 2u);
  EXPECT_EQ(next, t0 + std::chrono::seconds(20));
  EXPECT_EQ(grants.next_expiry(), next);
  // An extension to sooner than the watch looks lowers it; to later does not.
  EXPECT_TRUE(grants.extended(*b.g, t0 + std::chrono::seconds(15), std::chrono::seconds(5)));
  EXPECT_FALSE(grants.extended(*b.g, t0 + std::chrono::seconds(30), std::chrono::seconds(5)));
}

// Grants come and go on other threads while the expiry watch scans (the I/O thread's
// check_expiry). Afterwards the watch must look no later than the earliest validity left: one
// added behind the scan and missed by it must have lowered the watch itself.
TEST(GrantRegistry, GrantsAddedWhileTheWatchScansAreNeverMissed) {
  grant_registry grants;
  const auto& kind = simple_kind();
  const auto t0 = steady::now();
  std::atomic<bool> done{false};
  std::vector<std::thread> adders;
  for (int t = 0; t < 3; ++t) {
    adders.emplace_back([&, t] {
      for (int i = 0; i < 3000; ++i) {
        // Each validity sooner than all before it, so that every grant lowers the watch: the
        // one case where a grant missed by a scan matters. Each name its own grant.
        const auto until = t0 + std::chrono::seconds(100) - std::chrono::milliseconds(10 * i + t);
        grants.add_hold(request(kind, std::to_string(t) + ":" + std::to_string(i), "o"), false, 1,
                        until);
      }
    });
  }
  std::thread watch([&] {
    while (!done.load())
      grants.expired(t0);  // nothing has expired at t0: every scan only rearms
  });
  for (auto& a : adders)
    a.join();
  done.store(true);
  watch.join();
  // The earliest validity among all the grants, found by one more scan at t0.
  const auto armed = grants.next_expiry();
  const auto [expired, earliest] = grants.expired(t0);
  EXPECT_TRUE(expired.empty());
  EXPECT_LE(armed, earliest) << "a grant added during a scan was missed by the watch";
}

}  // namespace
