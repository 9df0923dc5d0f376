// Unit tests for an acquisition's timing (attempt_timing, sans-io). Every time is made up and
// advanced by hand; the machine owns no clock, so every path is deterministic.
#include "locks/sansio/attempt_timing.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <system_error>

#include "dlock/error.hpp"

namespace {

using dlock::errc;
using dlock::detail::acquire_limits;
using dlock::detail::attempt_timing;
using dlock::detail::saturating_add;
using dlock::detail::steady;
using kind = attempt_timing::step_kind;
using std::chrono::hours;
using std::chrono::milliseconds;

const steady::time_point t0 = steady::time_point{} + hours(1);
constexpr auto kForever = steady::time_point::max();

// Defaults: max_recheck 1000 ms, command_timeout 5000 ms, retry_backoff 20 ms.
acquire_limits waiting(steady::time_point deadline) {
  acquire_limits l;
  l.deadline = deadline;
  return l;
}

acquire_limits single(steady::time_point deadline) {
  acquire_limits l;
  l.deadline = deadline;
  l.single_attempt = true;
  return l;
}

// A machine that has already sent its first attempt at t0.
attempt_timing started(acquire_limits l) {
  attempt_timing m(l);
  EXPECT_EQ(m.start(t0).kind, kind::attempt);
  return m;
}

// ---- start() --------------------------------------------------------------------------------

TEST(AttemptTimingStart, AttemptUntilIsCommandTimeoutWhenDeadlineIsFarAway) {
  attempt_timing m(waiting(t0 + milliseconds(60000)));
  const auto s = m.start(t0);
  EXPECT_EQ(s.kind, kind::attempt);
  EXPECT_EQ(s.until, t0 + milliseconds(5000));
  EXPECT_FALSE(s.error);
  EXPECT_EQ(m.attempts(), 1);
}

TEST(AttemptTimingStart, AttemptUntilIsDeadlineWhenDeadlineIsBeforeCommandTimeout) {
  attempt_timing m(waiting(t0 + milliseconds(1500)));
  const auto s = m.start(t0);
  EXPECT_EQ(s.kind, kind::attempt);
  EXPECT_EQ(s.until, t0 + milliseconds(1500));
}

TEST(AttemptTimingStart, AttemptUntilIsCommandTimeoutWhenDeadlineIsForever) {
  attempt_timing m(waiting(kForever));
  const auto s = m.start(t0);
  EXPECT_EQ(s.kind, kind::attempt);
  EXPECT_EQ(s.until, t0 + milliseconds(5000));
}

TEST(AttemptTimingStart, SingleAttemptUntilIgnoresDeadline) {
  attempt_timing m(single(t0 + milliseconds(100)));
  const auto s = m.start(t0);
  EXPECT_EQ(s.kind, kind::attempt);
  EXPECT_EQ(s.until, t0 + milliseconds(5000));
}

TEST(AttemptTimingStart, SingleAttemptWithPastDeadlineStillAttemptsWithCommandTimeout) {
  attempt_timing m(single(t0 - milliseconds(500)));
  const auto s = m.start(t0);
  EXPECT_EQ(s.kind, kind::attempt);
  EXPECT_EQ(s.until, t0 + milliseconds(5000));
  EXPECT_EQ(m.attempts(), 1);
}

TEST(AttemptTimingStart, SingleAttemptWithDeadlineEqualToNowStillAttempts) {
  attempt_timing m(single(t0));
  const auto s = m.start(t0);
  EXPECT_EQ(s.kind, kind::attempt);
  EXPECT_EQ(s.until, t0 + milliseconds(5000));
}

TEST(AttemptTimingStart, WaitingAcquisitionWithPastDeadlineStillAttemptsButUntilIsNow) {
  // The deadline is already behind us: the attempt is still made, and its reply bound is
  // clamped to `now` (never a time in the past).
  attempt_timing m(waiting(t0 - milliseconds(500)));
  const auto s = m.start(t0);
  EXPECT_EQ(s.kind, kind::attempt);
  EXPECT_EQ(s.until, t0);
  EXPECT_EQ(m.attempts(), 1);
}

TEST(AttemptTimingStart, ExposesItsLimits) {
  auto l = waiting(t0 + milliseconds(42));
  l.max_recheck = milliseconds(7);
  const attempt_timing m(l);
  EXPECT_EQ(m.limits().deadline, t0 + milliseconds(42));
  EXPECT_EQ(m.limits().max_recheck, milliseconds(7));
  EXPECT_FALSE(m.limits().single_attempt);
  EXPECT_EQ(m.attempts(), 0);
}

// ---- on_granted() ---------------------------------------------------------------------------

TEST(AttemptTimingGranted, GrantedEndsTheCall) {
  auto m = started(waiting(t0 + milliseconds(10000)));
  const auto s = m.on_granted();
  EXPECT_EQ(s.kind, kind::granted);
  EXPECT_FALSE(s.error);
}

TEST(AttemptTimingGranted, SingleAttemptCanBeGranted) {
  auto m = started(single(t0));
  EXPECT_EQ(m.on_granted().kind, kind::granted);
}

// ---- on_busy() ------------------------------------------------------------------------------

TEST(AttemptTimingBusy, ShortPttlWaitsForTheLeaseToExpire) {
  auto m = started(waiting(t0 + milliseconds(10000)));
  const auto now = t0 + milliseconds(3);
  const auto s = m.on_busy(300, now);
  EXPECT_EQ(s.kind, kind::wait);
  EXPECT_EQ(s.until, now + milliseconds(300));
}

TEST(AttemptTimingBusy, PttlEqualToMaxRecheckWaitsMaxRecheck) {
  auto m = started(waiting(t0 + milliseconds(10000)));
  const auto s = m.on_busy(1000, t0);
  EXPECT_EQ(s.kind, kind::wait);
  EXPECT_EQ(s.until, t0 + milliseconds(1000));
}

TEST(AttemptTimingBusy, LongPttlWaitsOnlyMaxRecheck) {
  auto m = started(waiting(t0 + milliseconds(10000)));
  const auto s = m.on_busy(5000, t0);
  EXPECT_EQ(s.kind, kind::wait);
  EXPECT_EQ(s.until, t0 + milliseconds(1000));
}

TEST(AttemptTimingBusy, NoExpiryPttlWaitsMaxRecheck) {
  auto m = started(waiting(t0 + milliseconds(10000)));
  const auto s = m.on_busy(-1, t0);
  EXPECT_EQ(s.kind, kind::wait);
  EXPECT_EQ(s.until, t0 + milliseconds(1000));
}

TEST(AttemptTimingBusy, CustomMaxRecheckIsHonoured) {
  auto l = waiting(t0 + milliseconds(10000));
  l.max_recheck = milliseconds(250);
  auto m = started(l);
  EXPECT_EQ(m.on_busy(-1, t0).until, t0 + milliseconds(250));
  EXPECT_EQ(m.on_busy(100, t0).until, t0 + milliseconds(100));
  EXPECT_EQ(m.on_busy(400, t0).until, t0 + milliseconds(250));
}

TEST(AttemptTimingBusy, WaitNeverGoesBeyondTheDeadline) {
  const auto deadline = t0 + milliseconds(200);
  auto m = started(waiting(deadline));
  EXPECT_EQ(m.on_busy(300, t0).until, deadline);
  EXPECT_EQ(m.on_busy(-1, t0).until, deadline);
  EXPECT_EQ(m.on_busy(5000, t0).until, deadline);
  // A PTTL that ends before the deadline is used as is.
  EXPECT_EQ(m.on_busy(150, t0).until, t0 + milliseconds(150));
  // A wait just one tick short of the deadline.
  const auto s = m.on_busy(-1, deadline - std::chrono::nanoseconds(1));
  EXPECT_EQ(s.kind, kind::wait);
  EXPECT_EQ(s.until, deadline);
}

TEST(AttemptTimingBusy, VanishedKeyAttemptsImmediately) {
  auto m = started(waiting(t0 + milliseconds(10000)));
  const auto now = t0 + milliseconds(5);
  const auto s = m.on_busy(-2, now);
  EXPECT_EQ(s.kind, kind::attempt);
  EXPECT_EQ(s.until, now + milliseconds(5000));
  EXPECT_EQ(m.attempts(), 2);
}

TEST(AttemptTimingBusy, VanishedKeyAttemptIsBoundedByTheDeadline) {
  const auto deadline = t0 + milliseconds(700);
  auto m = started(waiting(deadline));
  const auto s = m.on_busy(-2, t0 + milliseconds(100));
  EXPECT_EQ(s.kind, kind::attempt);
  EXPECT_EQ(s.until, deadline);
}

TEST(AttemptTimingBusy, ZeroPttlWaitsUntilNowThenWakeAttempts) {
  auto m = started(waiting(t0 + milliseconds(10000)));
  const auto now = t0 + milliseconds(40);
  const auto s = m.on_busy(0, now);
  EXPECT_EQ(s.kind, kind::wait);
  EXPECT_EQ(s.until, now);
  const auto w = m.on_wake(now);
  EXPECT_EQ(w.kind, kind::attempt);
  EXPECT_EQ(m.attempts(), 2);
}

TEST(AttemptTimingBusy, SingleAttemptGivesUp) {
  auto m = started(single(t0 + milliseconds(10000)));
  for (const std::int64_t pttl :
       {std::int64_t{300}, std::int64_t{0}, std::int64_t{-1}, std::int64_t{-2}}) {
    const auto s = m.on_busy(pttl, t0);
    EXPECT_EQ(s.kind, kind::not_acquired) << "pttl " << pttl;
    EXPECT_FALSE(s.error) << "pttl " << pttl;
  }
  EXPECT_EQ(m.attempts(), 1);
}

TEST(AttemptTimingBusy, AtTheDeadlineGivesUp) {
  const auto deadline = t0 + milliseconds(500);
  auto m = started(waiting(deadline));
  const auto s = m.on_busy(300, deadline);
  EXPECT_EQ(s.kind, kind::not_acquired);
  EXPECT_FALSE(s.error);
}

TEST(AttemptTimingBusy, AfterTheDeadlineGivesUpEvenIfTheKeyVanished) {
  const auto deadline = t0 + milliseconds(500);
  auto m = started(waiting(deadline));
  EXPECT_EQ(m.on_busy(-2, deadline + milliseconds(1)).kind, kind::not_acquired);
  EXPECT_EQ(m.on_busy(-1, deadline + milliseconds(1)).kind, kind::not_acquired);
  EXPECT_EQ(m.on_busy(0, deadline).kind, kind::not_acquired);
  EXPECT_EQ(m.attempts(), 1);
}

// ---- on_wake() ------------------------------------------------------------------------------

TEST(AttemptTimingWake, BeforeTheDeadlineAttempts) {
  const auto deadline = t0 + milliseconds(10000);
  auto m = started(waiting(deadline));
  ASSERT_EQ(m.on_busy(-1, t0).kind, kind::wait);
  const auto now = t0 + milliseconds(400);  // woken early, by an unlock message
  const auto s = m.on_wake(now);
  EXPECT_EQ(s.kind, kind::attempt);
  EXPECT_EQ(s.until, now + milliseconds(5000));
  EXPECT_EQ(m.attempts(), 2);
}

TEST(AttemptTimingWake, CloseToTheDeadlineAttemptBoundedByDeadline) {
  const auto deadline = t0 + milliseconds(1000);
  auto m = started(waiting(deadline));
  const auto now = deadline - milliseconds(1);
  const auto s = m.on_wake(now);
  EXPECT_EQ(s.kind, kind::attempt);
  EXPECT_EQ(s.until, deadline);
}

TEST(AttemptTimingWake, AtTheDeadlineGivesUp) {
  const auto deadline = t0 + milliseconds(1000);
  auto m = started(waiting(deadline));
  ASSERT_EQ(m.on_busy(-1, t0).kind, kind::wait);
  const auto s = m.on_wake(deadline);
  EXPECT_EQ(s.kind, kind::not_acquired);
  EXPECT_FALSE(s.error);
  EXPECT_EQ(m.attempts(), 1);
}

TEST(AttemptTimingWake, AfterTheDeadlineGivesUp) {
  const auto deadline = t0 + milliseconds(1000);
  auto m = started(waiting(deadline));
  EXPECT_EQ(m.on_wake(deadline + milliseconds(250)).kind, kind::not_acquired);
  EXPECT_EQ(m.attempts(), 1);
}

TEST(AttemptTimingWake, ForeverDeadlineAlwaysAttempts) {
  auto m = started(waiting(kForever));
  const auto now = t0 + hours(24 * 365);
  const auto s = m.on_wake(now);
  EXPECT_EQ(s.kind, kind::attempt);
  EXPECT_EQ(s.until, now + milliseconds(5000));
}

// ---- on_error() -----------------------------------------------------------------------------

TEST(AttemptTimingError, TimeoutIsRetriedAfterRetryBackoff) {
  auto m = started(waiting(t0 + milliseconds(10000)));
  const auto now = t0 + milliseconds(5000);
  const auto s = m.on_error(make_error_code(errc::timeout), now);
  EXPECT_EQ(s.kind, kind::wait);
  EXPECT_EQ(s.until, now + milliseconds(20));
  EXPECT_FALSE(s.error);
}

TEST(AttemptTimingError, ConnectionLostIsRetriedAfterRetryBackoff) {
  auto m = started(waiting(t0 + milliseconds(10000)));
  const auto s = m.on_error(errc::connection_lost, t0);  // implicit conversion
  EXPECT_EQ(s.kind, kind::wait);
  EXPECT_EQ(s.until, t0 + milliseconds(20));
}

TEST(AttemptTimingError, BackoffDoublesAndIsCappedAtMaxRecheck) {
  auto m = started(waiting(kForever));
  auto now = t0;
  const milliseconds expected[] = {milliseconds(20),   milliseconds(40),   milliseconds(80),
                                   milliseconds(160),  milliseconds(320),  milliseconds(640),
                                   milliseconds(1000), milliseconds(1000), milliseconds(1000)};
  int i = 0;
  for (const auto want : expected) {
    const auto ec = make_error_code(i % 2 == 0 ? errc::connection_lost : errc::timeout);
    const auto s = m.on_error(ec, now);
    ASSERT_EQ(s.kind, kind::wait) << "retry " << i;
    EXPECT_EQ(s.until, now + want) << "retry " << i;
    now = s.until;
    const auto a = m.on_wake(now);
    ASSERT_EQ(a.kind, kind::attempt) << "retry " << i;
    now += milliseconds(7);  // the attempt's round trip before it fails again
    ++i;
  }
  EXPECT_EQ(m.attempts(), 1 + i);
}

TEST(AttemptTimingError, CustomBackoffAndCap) {
  auto l = waiting(kForever);
  l.retry_backoff = milliseconds(100);
  l.max_recheck = milliseconds(300);
  auto m = started(l);
  EXPECT_EQ(m.on_error(errc::timeout, t0).until, t0 + milliseconds(100));
  EXPECT_EQ(m.on_error(errc::timeout, t0).until, t0 + milliseconds(200));
  EXPECT_EQ(m.on_error(errc::timeout, t0).until, t0 + milliseconds(300));
  EXPECT_EQ(m.on_error(errc::timeout, t0).until, t0 + milliseconds(300));
}

TEST(AttemptTimingError, FirstBackoffLargerThanMaxRecheckIsCapped) {
  auto l = waiting(kForever);
  l.retry_backoff = milliseconds(2000);
  l.max_recheck = milliseconds(1000);
  auto m = started(l);
  const auto s = m.on_error(errc::connection_lost, t0);
  EXPECT_EQ(s.kind, kind::wait);
  EXPECT_EQ(s.until, t0 + milliseconds(1000));
}

TEST(AttemptTimingError, BackoffNeverGoesBeyondTheDeadline) {
  const auto deadline = t0 + milliseconds(50);
  auto m = started(waiting(deadline));
  auto s = m.on_error(errc::timeout, t0 + milliseconds(10));
  EXPECT_EQ(s.kind, kind::wait);
  EXPECT_EQ(s.until, t0 + milliseconds(30));
  s = m.on_error(errc::timeout, t0 + milliseconds(30));  // backoff 40 → would end at 70
  EXPECT_EQ(s.kind, kind::wait);
  EXPECT_EQ(s.until, deadline);
}

TEST(AttemptTimingError, BackoffResetsAfterABusyReply) {
  auto m = started(waiting(kForever));
  EXPECT_EQ(m.on_error(errc::timeout, t0).until, t0 + milliseconds(20));
  EXPECT_EQ(m.on_error(errc::timeout, t0).until, t0 + milliseconds(40));
  EXPECT_EQ(m.on_error(errc::timeout, t0).until, t0 + milliseconds(80));
  ASSERT_EQ(m.on_busy(300, t0).kind, kind::wait);
  EXPECT_EQ(m.on_error(errc::connection_lost, t0).until, t0 + milliseconds(20));
  EXPECT_EQ(m.on_error(errc::connection_lost, t0).until, t0 + milliseconds(40));
}

TEST(AttemptTimingError, BackoffResetsAfterAVanishedKeyReply) {
  auto m = started(waiting(kForever));
  EXPECT_EQ(m.on_error(errc::timeout, t0).until, t0 + milliseconds(20));
  EXPECT_EQ(m.on_error(errc::timeout, t0).until, t0 + milliseconds(40));
  ASSERT_EQ(m.on_busy(-2, t0).kind, kind::attempt);
  EXPECT_EQ(m.on_error(errc::timeout, t0).until, t0 + milliseconds(20));
}

TEST(AttemptTimingError, TransientErrorAtTheDeadlineGivesUp) {
  const auto deadline = t0 + milliseconds(1000);
  auto m = started(waiting(deadline));
  for (const auto e : {errc::timeout, errc::connection_lost}) {
    const auto at = m.on_error(e, deadline);
    EXPECT_EQ(at.kind, kind::not_acquired);
    EXPECT_FALSE(at.error);
    const auto after = m.on_error(e, deadline + milliseconds(1));
    EXPECT_EQ(after.kind, kind::not_acquired);
    EXPECT_FALSE(after.error);
  }
}

TEST(AttemptTimingError, TransientErrorWithSingleAttemptFailsWithThatError) {
  for (const auto e : {errc::timeout, errc::connection_lost}) {
    auto m = started(single(t0 + milliseconds(10000)));
    const auto s = m.on_error(e, t0 + milliseconds(1));
    EXPECT_EQ(s.kind, kind::failed);
    EXPECT_EQ(s.error, make_error_code(e));
    EXPECT_EQ(s.error, e);
  }
}

TEST(AttemptTimingError, TransientErrorWithSingleAttemptPastDeadlineStillFails) {
  auto m = started(single(t0 - milliseconds(1)));
  const auto s = m.on_error(errc::timeout, t0 + milliseconds(5000));
  EXPECT_EQ(s.kind, kind::failed);
  EXPECT_EQ(s.error, errc::timeout);
}

TEST(AttemptTimingError, OtherErrorsFailImmediately) {
  for (const auto e : {errc::wrong_type, errc::server_error, errc::auth_failed}) {
    auto m = started(waiting(t0 + milliseconds(10000)));
    const auto s = m.on_error(make_error_code(e), t0 + milliseconds(2));
    EXPECT_EQ(s.kind, kind::failed) << make_error_code(e).message();
    EXPECT_EQ(s.error, e) << make_error_code(e).message();
    EXPECT_EQ(s.error.category(), dlock::error_category());
    EXPECT_EQ(m.attempts(), 1);
  }
}

TEST(AttemptTimingError, OtherErrorsFailEvenWithSingleAttemptOrPastDeadline) {
  auto s1 = started(single(t0));
  EXPECT_EQ(s1.on_error(errc::server_error, t0).kind, kind::failed);
  auto s2 = started(waiting(t0 + milliseconds(10)));
  const auto s = s2.on_error(errc::wrong_type, t0 + milliseconds(20));
  EXPECT_EQ(s.kind, kind::failed);
  EXPECT_EQ(s.error, errc::wrong_type);
}

TEST(AttemptTimingError, SameValueInAnotherCategoryIsNotTransient) {
  // Only dlock's own timeout / connection_lost codes are retried.
  const std::error_code foreign(static_cast<int>(errc::timeout), std::generic_category());
  auto m = started(waiting(t0 + milliseconds(10000)));
  const auto s = m.on_error(foreign, t0);
  EXPECT_EQ(s.kind, kind::failed);
  EXPECT_EQ(s.error, foreign);
}

// ---- wait forever / saturating_add ----------------------------------------------------------

TEST(AttemptTimingSaturatingAdd, AddsNormally) {
  EXPECT_EQ(saturating_add(t0, milliseconds(0)), t0);
  EXPECT_EQ(saturating_add(t0, milliseconds(1500)), t0 + milliseconds(1500));
}

TEST(AttemptTimingSaturatingAdd, SaturatesAtMaxInsteadOfOverflowing) {
  EXPECT_EQ(saturating_add(kForever, milliseconds(1)), kForever);
  EXPECT_EQ(saturating_add(kForever, milliseconds(0)), kForever);
  EXPECT_EQ(saturating_add(kForever - milliseconds(500), milliseconds(1000)), kForever);
  EXPECT_EQ(saturating_add(t0, milliseconds::max()), kForever);
  EXPECT_EQ(saturating_add(steady::time_point{}, milliseconds::max()), kForever);
}

TEST(AttemptTimingSaturatingAdd, JustBelowMaxStillAdds) {
  const auto now = kForever - milliseconds(2000);
  EXPECT_EQ(saturating_add(now, milliseconds(1000)), now + milliseconds(1000));
  EXPECT_LT(saturating_add(now, milliseconds(1000)), kForever);
}

TEST(AttemptTimingForever, StartNearMaxDoesNotOverflow) {
  attempt_timing m(waiting(kForever));
  const auto now = kForever - milliseconds(100);
  const auto s = m.start(now);
  EXPECT_EQ(s.kind, kind::attempt);
  EXPECT_EQ(s.until, kForever);
  EXPECT_GE(s.until, now);
}

TEST(AttemptTimingForever, SingleAttemptAtMaxDoesNotOverflow) {
  attempt_timing m(single(kForever));
  const auto s = m.start(kForever - milliseconds(1));
  EXPECT_EQ(s.kind, kind::attempt);
  EXPECT_EQ(s.until, kForever);
}

TEST(AttemptTimingForever, BusyNearMaxWaitsUntilMax) {
  attempt_timing m(waiting(kForever));
  const auto now = kForever - milliseconds(10);
  ASSERT_EQ(m.start(now).kind, kind::attempt);
  for (const std::int64_t pttl : {std::int64_t{-1}, std::int64_t{300}, std::int64_t{5000}}) {
    const auto s = m.on_busy(pttl, now);
    EXPECT_EQ(s.kind, kind::wait) << "pttl " << pttl;
    EXPECT_EQ(s.until, kForever) << "pttl " << pttl;
    EXPECT_GE(s.until, now) << "pttl " << pttl;
  }
}

TEST(AttemptTimingForever, ErrorBackoffNearMaxWaitsUntilMax) {
  attempt_timing m(waiting(kForever));
  const auto now = kForever - milliseconds(5);
  ASSERT_EQ(m.start(now).kind, kind::attempt);
  const auto s = m.on_error(errc::connection_lost, now);
  EXPECT_EQ(s.kind, kind::wait);
  EXPECT_EQ(s.until, kForever);
}

TEST(AttemptTimingForever, LongWaitKeepsRetrying) {
  attempt_timing m(waiting(kForever));
  auto now = t0;
  ASSERT_EQ(m.start(now).kind, kind::attempt);
  for (int i = 0; i < 100; ++i) {
    const auto w = m.on_busy(-1, now);
    ASSERT_EQ(w.kind, kind::wait);
    ASSERT_EQ(w.until, now + milliseconds(1000));
    now = w.until;
    ASSERT_EQ(m.on_wake(now).kind, kind::attempt);
  }
  EXPECT_EQ(m.attempts(), 101);
}

// ---- attempts() -----------------------------------------------------------------------------

TEST(AttemptTimingAttempts, CountsOnlyAttempts) {
  attempt_timing m(waiting(t0 + milliseconds(10000)));
  EXPECT_EQ(m.attempts(), 0);
  ASSERT_EQ(m.start(t0).kind, kind::attempt);
  EXPECT_EQ(m.attempts(), 1);
  ASSERT_EQ(m.on_busy(100, t0).kind, kind::wait);
  EXPECT_EQ(m.attempts(), 1);
  ASSERT_EQ(m.on_wake(t0 + milliseconds(100)).kind, kind::attempt);
  EXPECT_EQ(m.attempts(), 2);
  ASSERT_EQ(m.on_busy(-2, t0 + milliseconds(101)).kind, kind::attempt);
  EXPECT_EQ(m.attempts(), 3);
  ASSERT_EQ(m.on_error(errc::timeout, t0 + milliseconds(200)).kind, kind::wait);
  EXPECT_EQ(m.attempts(), 3);
  ASSERT_EQ(m.on_wake(t0 + milliseconds(220)).kind, kind::attempt);
  EXPECT_EQ(m.attempts(), 4);
  ASSERT_EQ(m.on_wake(t0 + milliseconds(20000)).kind, kind::not_acquired);
  EXPECT_EQ(m.attempts(), 4);
  ASSERT_EQ(m.on_granted().kind, kind::granted);
  EXPECT_EQ(m.attempts(), 4);
}

// ---- scripted scenarios ---------------------------------------------------------------------

TEST(AttemptTimingScenario, BusyErrorBusyThenGranted) {
  const auto deadline = t0 + milliseconds(10000);
  attempt_timing m(waiting(deadline));
  auto now = t0;

  auto s = m.start(now);
  ASSERT_EQ(s.kind, kind::attempt);
  EXPECT_EQ(s.until, now + milliseconds(5000));

  now += milliseconds(2);  // reply: busy, holder has 5 s left → re-check after max_recheck
  s = m.on_busy(5000, now);
  ASSERT_EQ(s.kind, kind::wait);
  EXPECT_EQ(s.until, now + milliseconds(1000));

  now = s.until;  // the timer fires
  s = m.on_wake(now);
  ASSERT_EQ(s.kind, kind::attempt);
  EXPECT_EQ(s.until, now + milliseconds(5000));

  now += milliseconds(3);  // the connection drops mid-attempt → back off retry_backoff
  s = m.on_error(errc::connection_lost, now);
  ASSERT_EQ(s.kind, kind::wait);
  EXPECT_EQ(s.until, now + milliseconds(20));

  now = s.until;
  s = m.on_wake(now);
  ASSERT_EQ(s.kind, kind::attempt);

  now += milliseconds(2);  // busy, holder has 300 ms left → wait exactly that
  s = m.on_busy(300, now);
  ASSERT_EQ(s.kind, kind::wait);
  EXPECT_EQ(s.until, now + milliseconds(300));

  now = s.until;
  s = m.on_wake(now);
  ASSERT_EQ(s.kind, kind::attempt);
  EXPECT_EQ(s.until, now + milliseconds(5000));

  s = m.on_granted();
  EXPECT_EQ(s.kind, kind::granted);
  EXPECT_FALSE(s.error);
  EXPECT_EQ(m.attempts(), 4);
  EXPECT_LT(now, deadline);
}

TEST(AttemptTimingScenario, HeldPastTheDeadlineEndsNotAcquired) {
  const auto deadline = t0 + milliseconds(2500);
  attempt_timing m(waiting(deadline));
  auto now = t0;
  ASSERT_EQ(m.start(now).kind, kind::attempt);

  auto s = m.on_busy(-1, now);
  ASSERT_EQ(s.kind, kind::wait);
  EXPECT_EQ(s.until, t0 + milliseconds(1000));
  now = s.until;
  ASSERT_EQ(m.on_wake(now).kind, kind::attempt);

  s = m.on_busy(-1, now);
  ASSERT_EQ(s.kind, kind::wait);
  EXPECT_EQ(s.until, t0 + milliseconds(2000));
  now = s.until;
  s = m.on_wake(now);
  ASSERT_EQ(s.kind, kind::attempt);
  EXPECT_EQ(s.until, deadline);  // the last attempt's reply is due by the deadline

  s = m.on_busy(-1, now);
  ASSERT_EQ(s.kind, kind::wait);
  EXPECT_EQ(s.until, deadline);  // clipped
  now = s.until;
  s = m.on_wake(now);
  EXPECT_EQ(s.kind, kind::not_acquired);
  EXPECT_EQ(m.attempts(), 3);
}

TEST(AttemptTimingScenario, TryOnceBusyEndsNotAcquired) {
  attempt_timing m(single(t0));
  const auto s = m.start(t0);
  ASSERT_EQ(s.kind, kind::attempt);
  EXPECT_EQ(s.until, t0 + milliseconds(5000));
  EXPECT_EQ(m.on_busy(300, t0 + milliseconds(1)).kind, kind::not_acquired);
  EXPECT_EQ(m.attempts(), 1);
}

}  // namespace
