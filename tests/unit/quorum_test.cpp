// Unit tests for RedLock's quorum round (sans-io): outcomes and times are made up, so every path
// is deterministic: exactly a majority, all masters timing out, late replies after the
// decision, validity running out while answers trickle in, and when a majority may be free.
#include "locks/sansio/quorum.hpp"

#include <gtest/gtest.h>

#include <chrono>

#include "locks/sansio/attempt_timing.hpp"

namespace {

using dlock::detail::acquire_limits;
using dlock::detail::attempt_timing;
using dlock::detail::majority_of;
using dlock::detail::quorum_round;
using dlock::detail::quorum_timing;
using std::chrono::hours;
using std::chrono::milliseconds;
using vote = quorum_round::vote;
using verdict = quorum_round::verdict;
using step_kind = attempt_timing::step_kind;

const quorum_round::clock::time_point t0 = quorum_round::clock::time_point{} + hours(1);
constexpr milliseconds lease{10'000};

TEST(Quorum, MajorityIsFloorHalfPlusOne) {
  EXPECT_EQ(majority_of(1), 1u);
  EXPECT_EQ(majority_of(3), 2u);
  EXPECT_EQ(majority_of(4), 3u);
  EXPECT_EQ(majority_of(5), 3u);
  EXPECT_EQ(majority_of(7), 4u);
}

TEST(Quorum, TimingDefaultsAreFivePercentAndOnePercentPlusTwoMilliseconds) {
  const quorum_timing t;
  EXPECT_EQ(t.node_timeout(lease), milliseconds(500));
  EXPECT_EQ(t.drift(lease), milliseconds(102));
  EXPECT_EQ(t.node_timeout(milliseconds(10)), milliseconds(1));  // never zero
  const quorum_timing custom{0.1, 0.02, milliseconds(5)};
  EXPECT_EQ(custom.node_timeout(lease), milliseconds(1000));
  EXPECT_EQ(custom.drift(lease), milliseconds(205));
}

TEST(Quorum, ExactlyAMajorityWinsAndTheRestArrivesLate) {
  quorum_round r(5, t0, lease, {});
  EXPECT_EQ(r.needed(), 3u);
  EXPECT_EQ(r.record(0, vote::yes, 11, t0 + milliseconds(1)), verdict::pending);
  EXPECT_EQ(r.record(3, vote::no, 900, t0 + milliseconds(2)), verdict::pending);
  EXPECT_EQ(r.record(1, vote::yes, 17, t0 + milliseconds(2)), verdict::pending);
  EXPECT_EQ(r.record(4, vote::yes, 13, t0 + milliseconds(3)), verdict::won);
  // A late grant with a larger fence does not change the decision or the quorum's fence.
  EXPECT_EQ(r.record(2, vote::yes, 99, t0 + milliseconds(4)), verdict::won);
  EXPECT_EQ(r.late(), 1u);
  EXPECT_EQ(r.max_yes_value(), 17);
  EXPECT_EQ(r.count(vote::yes), 4u);
}

TEST(Quorum, AMissIsDecidedAsSoonAsAMajorityIsOutOfReach) {
  quorum_round r(5, t0, lease, {});
  EXPECT_EQ(r.record(0, vote::no, 500, t0), verdict::pending);
  EXPECT_EQ(r.record(1, vote::unknown, 0, t0), verdict::pending);
  EXPECT_EQ(r.record(2, vote::no, 800, t0), verdict::lost);  // 3 against: 2 cannot make 3
  EXPECT_EQ(r.record(3, vote::yes, 5, t0), verdict::lost);
  EXPECT_EQ(r.late(), 1u);
}

TEST(Quorum, EveryMasterTimingOutIsAMiss) {
  quorum_round r(3, t0, lease, {});
  const auto due = t0 + quorum_timing{}.node_timeout(lease);  // when the caller gives up
  EXPECT_EQ(r.record(0, vote::unknown, 0, due), verdict::pending);
  EXPECT_EQ(r.record(1, vote::unknown, 0, due), verdict::lost);
  EXPECT_EQ(r.record(2, vote::unknown, 0, due), verdict::lost);
  EXPECT_EQ(r.count(vote::unknown), 3u);
}

TEST(Quorum, ValidityRunningOutDuringTheRoundLosesIt) {
  quorum_round r(3, t0, lease, {});
  // validity = 10000 - elapsed - 102
  EXPECT_EQ(r.validity(t0 + milliseconds(9'000)), milliseconds(898));
  EXPECT_EQ(r.record(0, vote::yes, 1, t0 + milliseconds(100)), verdict::pending);
  // The second grant arrives after lease - drift: a majority, but nothing left to hand out.
  EXPECT_EQ(r.record(1, vote::yes, 2, t0 + milliseconds(9'898)), verdict::lost);
}

TEST(Quorum, APendingRoundIsLostOnceItsValidityHasPassed) {
  quorum_round r(5, t0, lease, {});
  r.record(0, vote::yes, 1, t0);
  EXPECT_EQ(r.check(t0 + milliseconds(9'897)), verdict::pending);
  EXPECT_EQ(r.check(t0 + milliseconds(9'898)), verdict::lost);
}

TEST(Quorum, ASecondAnswerFromOneMasterIsIgnored) {
  quorum_round r(3, t0, lease, {});
  r.record(0, vote::yes, 1, t0);
  EXPECT_EQ(r.record(0, vote::yes, 1, t0), verdict::pending);
  EXPECT_EQ(r.count(vote::yes), 1u);
}

TEST(Quorum, AnUntimedRoundOnlyCounts) {
  quorum_round r(3);
  EXPECT_EQ(r.record(0, vote::no, 0, t0 + hours(1000)), verdict::pending);
  EXPECT_EQ(r.record(1, vote::no, 0, t0 + hours(1000)), verdict::lost);
  quorum_round w(3);
  w.record(2, vote::yes, 1, t0 + hours(1000));
  EXPECT_EQ(w.record(0, vote::yes, 3, t0 + hours(2000)), verdict::won);
  EXPECT_EQ(w.max_yes_value(), 3);
}

TEST(Quorum, WaitForAMajorityCountsTheHoldersThatMustExpire) {
  {
    // Held on three masters (300, 100, 200 ms left), two free: one more must expire.
    quorum_round r(5, t0, lease, {});
    r.record(0, vote::no, 300, t0);
    r.record(1, vote::no, 100, t0);
    r.record(2, vote::no, 200, t0);
    r.record(3, vote::yes, 1, t0);
    r.record(4, vote::yes, 1, t0);
    EXPECT_EQ(r.wait_for_majority_ms(), 100);
  }
  {
    // Held on four, ours on one: two must expire, the second soonest decides.
    quorum_round r(5, t0, lease, {});
    for (std::size_t i = 0; i < 4; ++i)
      r.record(i, vote::no, 100 * static_cast<std::int64_t>(i + 1), t0);
    r.record(4, vote::yes, 1, t0);
    EXPECT_EQ(r.wait_for_majority_ms(), 200);
  }
  {
    // A split vote on five live masters: two of ours, two of theirs, one gone meanwhile: a
    // majority may be free at once.
    quorum_round r(5, t0, lease, {});
    r.record(0, vote::yes, 1, t0);
    r.record(1, vote::yes, 1, t0);
    r.record(2, vote::no, 5000, t0);
    r.record(3, vote::no, 5000, t0);
    r.record(4, vote::no, -2, t0);
    EXPECT_EQ(r.wait_for_majority_ms(), 0);
  }
  {
    // The same split with the fifth master down: one of theirs must go first.
    quorum_round r(5, t0, lease, {});
    r.record(0, vote::yes, 1, t0);
    r.record(1, vote::yes, 1, t0);
    r.record(2, vote::no, 5000, t0);
    r.record(3, vote::no, 4000, t0);
    r.record(4, vote::unknown, 0, t0);
    EXPECT_EQ(r.wait_for_majority_ms(), 4000);
  }
  {
    // A majority down: no wait frees enough.
    quorum_round r(5, t0, lease, {});
    r.record(0, vote::yes, 1, t0);
    r.record(1, vote::yes, 1, t0);
    for (std::size_t i = 2; i < 5; ++i)
      r.record(i, vote::unknown, 0, t0);
    EXPECT_EQ(r.wait_for_majority_ms(), -1);
  }
  {
    // Keys with no expiry never free themselves; a key gone meanwhile (-2) is free.
    quorum_round r(3, t0, lease, {});
    r.record(0, vote::no, -1, t0);
    r.record(1, vote::no, -1, t0);
    r.record(2, vote::no, -2, t0);
    EXPECT_EQ(r.wait_for_majority_ms(), -1);
  }
}

// The acquisition machine's jitter: RedLock's contenders must not retry in step.
TEST(Quorum, RetriesAfterABusyAnswerWaitARandomShareOfTheRoundTrip) {
  acquire_limits l;
  l.jitter_round_trips = 2;
  double draw = 0.5;
  attempt_timing m(l, [&] { return draw; });
  m.start(t0);
  m.note_round_trip(milliseconds(4));
  // A split vote (PTTL 0): wait 0.5 × 2 × 4 ms.
  auto s = m.on_busy(0, t0 + milliseconds(4));
  EXPECT_EQ(s.kind, step_kind::wait);
  EXPECT_EQ(s.until, t0 + milliseconds(8));
  // An unlock message before then does not cut the jitter short...
  s = m.on_wake(t0 + milliseconds(5));
  EXPECT_EQ(s.kind, step_kind::wait);
  EXPECT_EQ(s.until, t0 + milliseconds(8));
  // ...and once it has passed, the waiter attempts.
  EXPECT_EQ(m.on_wake(t0 + milliseconds(8)).kind, step_kind::attempt);
  // Held with a PTTL: the jitter comes on top of it.
  draw = 0.25;
  s = m.on_busy(100, t0 + milliseconds(10));
  EXPECT_EQ(s.until, t0 + milliseconds(112));
}

TEST(Quorum, WithoutJitterABusyAnswerWaitsOnlyForThePttl) {
  attempt_timing m(acquire_limits{});
  m.start(t0);
  m.note_round_trip(milliseconds(4));
  EXPECT_EQ(m.on_busy(-2, t0).kind, step_kind::attempt);
  const auto s = m.on_busy(100, t0);
  EXPECT_EQ(s.until, t0 + milliseconds(100));
  EXPECT_EQ(m.on_wake(t0 + milliseconds(1)).kind, step_kind::attempt);
}

}  // namespace
