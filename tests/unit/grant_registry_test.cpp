// The grants table without a server: a grant is found by its kind, name and owner exactly (no
// two of them blur into one key), re-entries join the owner's grant, and a grant made afresh
// for the same owner replaces the stale one.
#include <gtest/gtest.h>

#include "locks/grant_registry.hpp"

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

}  // namespace
