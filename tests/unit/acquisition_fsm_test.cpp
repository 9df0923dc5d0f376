// Unit tests for one acquisition's state machine, with no server, socket, queue or clock: each
// test feeds events with made-up times and answers the machine's questions (its turn in the
// queue, a message that came while nobody waited) as a driver would, then checks the actions.
// The races a live server reaches only by chance are written out here: a cancel or the client
// closing while an attempt is out, an unlock message during an attempt, a grant whose reply
// arrives after its validity, a grant too few replicas acknowledged, a fair waiter giving back
// its place before its caller hears.
#include "locks/sansio/acquisition_fsm.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <vector>

#include "dlock/error.hpp"

namespace {

using dlock::errc;
using dlock::detail::acquisition_fsm;
using dlock::detail::acquisition_setup;
using dlock::detail::attempt_reply;
using dlock::detail::steady;
using action = acquisition_fsm::action;
using act = acquisition_fsm::action::type;
using ev = acquisition_fsm::event::type;
using ending = acquisition_fsm::ending;
using undo = acquisition_fsm::undo;
using state = acquisition_fsm::state;
using std::chrono::hours;
using std::chrono::milliseconds;

const steady::time_point t0 = steady::time_point{} + hours(1);

// Defaults: max_recheck 1000 ms, command_timeout 5000 ms, retry_backoff 20 ms; a mutex that
// waits up to 60 s with a 10 s lease valid for 9.9 s.
acquisition_setup waiting_mutex() {
  acquisition_setup s;
  s.limits.deadline = t0 + milliseconds(60000);
  s.validity = milliseconds(9900);
  return s;
}

acquisition_setup single_attempt() {
  auto s = waiting_mutex();
  s.limits.single_attempt = true;
  return s;
}

acquisition_setup fair_waiter() {
  auto s = waiting_mutex();
  s.keeps_waiter_place = true;
  return s;
}

// How the test's driver answers the machine's questions.
struct answers {
  bool admitted = true;
  std::optional<steady::time_point> yield_until{};
  bool message_waiting = false;
};

// Feeds `e` and every answer the machine asks for, returning the actions until it waits.
std::vector<action> feed(acquisition_fsm& m, acquisition_fsm::event e, answers a = {}) {
  std::vector<action> out;
  for (auto x = m.resume(e); x.what != act::wait; x = m.resume(e)) {
    out.push_back(x);
    e = acquisition_fsm::event::of(ev::carried_out, {});
    if (x.what == act::join_queue) {
      e = acquisition_fsm::event::of(ev::queue_joined, {}, a.admitted);
      e.yield_until = a.yield_until;
    } else if (x.what == act::listen) {
      e = acquisition_fsm::event::of(ev::listening, {});
      e.message_waiting = x.take_message && a.message_waiting;
    }
  }
  return out;
}

std::vector<act> kinds(const std::vector<action>& actions) {
  std::vector<act> k;
  for (const auto& a : actions)
    k.push_back(a.what);
  return k;
}

acquisition_fsm::event at(ev what, steady::time_point now, bool admitted = true) {
  return acquisition_fsm::event::of(what, now, admitted);
}

acquisition_fsm::event reply(attempt_reply::type what, steady::time_point sent_at,
                             steady::time_point now, bool admitted = true) {
  auto e = at(ev::reply, now, admitted);
  e.reply.what = what;
  e.reply.sent_at = sent_at;
  if (what == attempt_reply::type::granted || what == attempt_reply::type::reentered) {
    e.reply.fence = 42;
  }
  return e;
}

acquisition_fsm::event busy(steady::time_point sent_at, steady::time_point now, std::int64_t pttl,
                            bool admitted = true) {
  auto e = reply(attempt_reply::type::busy, sent_at, now, admitted);
  e.reply.pttl = pttl;
  return e;
}

acquisition_fsm::event failed(std::error_code ec, steady::time_point sent_at,
                              steady::time_point now) {
  auto e = reply(attempt_reply::type::failed, sent_at, now);
  e.reply.error = ec;
  return e;
}

const action& last(const std::vector<action>& a) {
  return a.back();
}

// ---- a free lock ----------------------------------------------------------------------------

TEST(AcquisitionFsm, AFreeLockTakenDirectlyIsHandedOutAndTheClaimEndsBeforeTheCallerHears) {
  acquisition_fsm m(waiting_mutex());
  const auto first = m.resume(at(ev::start_direct, t0));
  EXPECT_EQ(first.what, act::send_attempt);
  EXPECT_TRUE(first.publish_direct);
  EXPECT_EQ(first.at, t0 + milliseconds(5000));
  EXPECT_EQ(m.resume(at(ev::carried_out, {})).what, act::wait);  // nothing after the send
  EXPECT_TRUE(m.direct_claim());

  const auto out = feed(m, reply(attempt_reply::type::granted, t0, t0 + milliseconds(2)));
  EXPECT_EQ(kinds(out),
            (std::vector{act::hand_out, act::end_direct_claim, act::retire, act::deliver}));
  EXPECT_EQ(out[0].fence, 42u);
  EXPECT_FALSE(out[0].reentry);
  EXPECT_EQ(out[0].sent_at, t0);
  EXPECT_EQ(last(out).end, ending::granted);
  EXPECT_EQ(m.current(), state::done);
}

TEST(AcquisitionFsm, ASingleAttemptNeverQueuesAndEndsOnABusyAnswer) {
  acquisition_fsm m(single_attempt());
  EXPECT_FALSE(m.may_queue());
  auto out = feed(m, at(ev::start, t0));
  ASSERT_EQ(kinds(out), std::vector{act::send_attempt});
  EXPECT_FALSE(out[0].publish_direct);
  out = feed(m, busy(t0, t0 + milliseconds(1), 5000));
  EXPECT_EQ(kinds(out), (std::vector{act::retire, act::deliver}));
  EXPECT_EQ(last(out).end, ending::not_acquired);
  EXPECT_FALSE(last(out).error);
}

TEST(AcquisitionFsm, AReentryNeverQueuesBehindWaiters) {
  auto s = waiting_mutex();
  s.reentry = true;
  acquisition_fsm m(s);
  EXPECT_FALSE(m.may_queue());
  EXPECT_EQ(kinds(feed(m, at(ev::start, t0))), std::vector{act::send_attempt});
  // Busy (another owner took it meanwhile): it waits without joining the queue or listening.
  const auto out = feed(m, busy(t0, t0 + milliseconds(1), 300));
  ASSERT_EQ(kinds(out), std::vector{act::arm_timer});
  EXPECT_EQ(out[0].at, t0 + milliseconds(301));
}

// ---- queueing and listening -----------------------------------------------------------------

TEST(AcquisitionFsm, AWaiterQueuesFirstThenListensOnceTheLockIsFoundHeld) {
  acquisition_fsm m(waiting_mutex());
  auto out = feed(m, at(ev::start, t0));
  ASSERT_EQ(kinds(out), (std::vector{act::join_queue, act::send_attempt}));
  EXPECT_TRUE(out[0].direct_first);
  EXPECT_TRUE(m.queued());

  out = feed(m, busy(t0, t0 + milliseconds(2), 300));
  ASSERT_EQ(kinds(out), (std::vector{act::listen, act::arm_timer}));
  EXPECT_TRUE(out[0].take_message);
  EXPECT_EQ(out[1].at, t0 + milliseconds(302));  // the holder's PTTL
  EXPECT_EQ(m.current(), state::waiting);

  EXPECT_EQ(kinds(feed(m, at(ev::woken, t0 + milliseconds(100)))), std::vector{act::send_attempt});
  out =
      feed(m, reply(attempt_reply::type::granted, t0 + milliseconds(100), t0 + milliseconds(101)));
  EXPECT_EQ(kinds(out), (std::vector{act::hand_out, act::retire, act::leave_queue, act::deliver}));
  EXPECT_TRUE(out[2].granted);
}

TEST(AcquisitionFsm, AWaiterBehindOthersWaitsForItsTurnUntilTheDeadlineOnly) {
  acquisition_fsm m(waiting_mutex());
  auto out = feed(m, at(ev::start, t0), {.admitted = false});
  ASSERT_EQ(kinds(out), (std::vector{act::join_queue, act::arm_timer}));
  EXPECT_EQ(out[1].at, t0 + milliseconds(60000));
  EXPECT_EQ(m.current(), state::waiting_turn);
  // An unrelated timer (an older arming) before the deadline: still not our turn.
  out = feed(m, at(ev::timer, t0 + milliseconds(10), false));
  ASSERT_EQ(kinds(out), std::vector{act::arm_timer});
  EXPECT_EQ(out[0].at, t0 + milliseconds(60000));
  // The waiter ahead left holding the mutex: it is held for up to its lease, capped by the
  // re-check period; no attempt yet.
  auto admitted = at(ev::admitted, t0 + milliseconds(20));
  admitted.predecessor_granted = true;
  admitted.predecessor_lease = milliseconds(500);
  out = feed(m, admitted);
  ASSERT_EQ(kinds(out), std::vector{act::arm_timer});
  EXPECT_EQ(out[0].at, t0 + milliseconds(520));
  EXPECT_EQ(m.current(), state::waiting);
}

TEST(AcquisitionFsm, AWaiterWhosePredecessorGaveUpAttemptsAtOnce) {
  acquisition_fsm m(waiting_mutex());
  feed(m, at(ev::start, t0), {.admitted = false});
  EXPECT_EQ(kinds(feed(m, at(ev::admitted, t0 + milliseconds(5)))), std::vector{act::send_attempt});
}

TEST(AcquisitionFsm, AnAdmissionTheQueueNoLongerConfirmsIsIgnored) {
  acquisition_fsm m(waiting_mutex());
  feed(m, at(ev::start, t0), {.admitted = false});
  EXPECT_TRUE(feed(m, at(ev::admitted, t0 + milliseconds(5), false)).empty());
}

TEST(AcquisitionFsm, NotAdmittedAtTheDeadlineEndsWithoutTheLockAndLeavesTheQueue) {
  acquisition_fsm m(waiting_mutex());
  feed(m, at(ev::start, t0), {.admitted = false});
  const auto out = feed(m, at(ev::timer, t0 + milliseconds(60000), false));
  EXPECT_EQ(kinds(out), (std::vector{act::retire, act::leave_queue, act::deliver}));
  EXPECT_FALSE(out[1].granted);
  EXPECT_EQ(last(out).end, ending::not_acquired);
}

TEST(AcquisitionFsm, AYieldInForceAtStartListensAndWaitsForIt) {
  acquisition_fsm m(waiting_mutex());
  const auto out = feed(m, at(ev::start, t0), {.yield_until = t0 + milliseconds(8)});
  ASSERT_EQ(kinds(out), (std::vector{act::join_queue, act::listen, act::arm_timer}));
  EXPECT_FALSE(out[1].take_message);  // a message meant for a later waiter stays for it
  EXPECT_EQ(out[2].at, t0 + milliseconds(8));
  EXPECT_EQ(m.attempts(), 0);
  EXPECT_EQ(kinds(feed(m, at(ev::timer, t0 + milliseconds(8)))), std::vector{act::send_attempt});
}

TEST(AcquisitionFsm, ADirectAttemptFoundBusyJoinsTheQueueThenTheClaimEnds) {
  acquisition_fsm m(waiting_mutex());
  m.resume(at(ev::start_direct, t0));
  const auto out = feed(m, busy(t0, t0 + milliseconds(1), 300, false));
  ASSERT_EQ(kinds(out),
            (std::vector{act::join_queue, act::listen, act::arm_timer, act::end_direct_claim}));
  EXPECT_FALSE(out[0].direct_first);
  EXPECT_FALSE(m.direct_claim());
}

TEST(AcquisitionFsm, ADirectAttemptQueuedByALaterOneDoesNotJoinAgain) {
  acquisition_fsm m(waiting_mutex());
  m.resume(at(ev::start_direct, t0));
  EXPECT_TRUE(feed(m, at(ev::queued, t0)).empty());
  EXPECT_TRUE(m.queued());
  const auto out = feed(m, busy(t0, t0 + milliseconds(1), 300));
  EXPECT_EQ(kinds(out), (std::vector{act::listen, act::arm_timer, act::end_direct_claim}));
}

TEST(AcquisitionFsm, AMessageThatCameWhileNobodyWaitedIsTakenAndAttemptsAgainAtOnce) {
  acquisition_fsm m(waiting_mutex());
  m.resume(at(ev::start_direct, t0));
  const auto out = feed(m, busy(t0, t0 + milliseconds(1), 300), {.message_waiting = true});
  EXPECT_EQ(kinds(out),
            (std::vector{act::join_queue, act::listen, act::send_attempt, act::end_direct_claim}));
}

TEST(AcquisitionFsm, AnUnlockMessageDuringAnAttemptMakesItsBusyAnswerStale) {
  acquisition_fsm m(waiting_mutex());
  feed(m, at(ev::start, t0));
  EXPECT_TRUE(feed(m, at(ev::woken, t0 + milliseconds(1))).empty());  // noted, no second send
  const auto out = feed(m, busy(t0, t0 + milliseconds(2), 300));
  EXPECT_EQ(kinds(out), (std::vector{act::listen, act::send_attempt}));
}

TEST(AcquisitionFsm, AReleaseOfOursLetsTheFrontWaiterAttemptRightBehindIt) {
  acquisition_fsm m(waiting_mutex());
  feed(m, at(ev::start, t0));
  feed(m, busy(t0, t0 + milliseconds(1), 300));
  EXPECT_EQ(kinds(feed(m, at(ev::behind_release, t0 + milliseconds(5)))),
            std::vector{act::send_attempt});
  // Its attempt already out: a second release does not send another.
  EXPECT_TRUE(feed(m, at(ev::behind_release, t0 + milliseconds(6))).empty());
}

TEST(AcquisitionFsm, AYieldToAnotherClientHoldsTheWaiterBackUntilItsEnd) {
  acquisition_fsm m(waiting_mutex());
  feed(m, at(ev::start, t0));
  feed(m, busy(t0, t0 + milliseconds(1), 300));
  auto y = at(ev::yield, t0 + milliseconds(5));
  y.until = t0 + milliseconds(13);
  const auto out = feed(m, y);
  ASSERT_EQ(kinds(out), std::vector{act::arm_timer});
  EXPECT_EQ(out[0].at, t0 + milliseconds(13));
}

// ---- grants that may not be handed out ------------------------------------------------------

TEST(AcquisitionFsm, AGrantWhoseReplyArrivesAfterItsValidityIsUndoneAndTheWaitGoesOn) {
  acquisition_fsm m(waiting_mutex());
  feed(m, at(ev::start, t0));
  const auto out = feed(m, reply(attempt_reply::type::granted, t0, t0 + milliseconds(9900)));
  ASSERT_EQ(kinds(out), (std::vector{act::undo_grant, act::send_attempt}));
  EXPECT_EQ(out[0].how, undo::drop);
  EXPECT_TRUE(out[0].born_dead);
}

TEST(AcquisitionFsm, ABornDeadGrantAtTheDeadlineEndsWithoutTheLock) {
  auto s = waiting_mutex();
  s.limits.deadline = t0 + milliseconds(5000);
  acquisition_fsm m(s);
  feed(m, at(ev::start, t0));
  const auto out = feed(m, reply(attempt_reply::type::granted, t0, t0 + milliseconds(9950)));
  EXPECT_EQ(kinds(out),
            (std::vector{act::undo_grant, act::retire, act::leave_queue, act::deliver}));
  EXPECT_EQ(last(out).end, ending::not_acquired);
}

TEST(AcquisitionFsm, ADeadReentryOnAValidHoldIsHandedOut) {
  auto s = waiting_mutex();
  s.reentry = true;
  acquisition_fsm m(s);
  feed(m, at(ev::start, t0));
  auto e = reply(attempt_reply::type::reentered, t0, t0 + milliseconds(9950));
  e.reply.joined_hold = attempt_reply::joined::valid;
  const auto out = feed(m, e);
  EXPECT_EQ(kinds(out), (std::vector{act::hand_out, act::retire, act::deliver}));
  EXPECT_TRUE(out[0].reentry);
}

TEST(AcquisitionFsm, ADeadReentryWhoseJoinedHoldRanOutLosesThatHold) {
  auto s = waiting_mutex();
  s.reentry = true;
  acquisition_fsm m(s);
  feed(m, at(ev::start, t0));
  auto e = reply(attempt_reply::type::reentered, t0, t0 + milliseconds(9950));
  e.reply.joined_hold = attempt_reply::joined::expired;
  const auto out = feed(m, e);
  ASSERT_EQ(kinds(out), (std::vector{act::undo_grant, act::send_attempt}));
  EXPECT_EQ(out[0].how, undo::lose_joined);
  EXPECT_TRUE(out[0].born_dead);
}

TEST(AcquisitionFsm, AnUnreplicatedGrantIsUndoneAndAWaitEndingSoFailsWithNotReplicated) {
  auto s = waiting_mutex();
  s.limits.deadline = t0 + milliseconds(1000);
  acquisition_fsm m(s);
  feed(m, at(ev::start, t0));
  auto e = reply(attempt_reply::type::granted, t0, t0 + milliseconds(500));
  e.reply.error = errc::not_replicated;
  auto out = feed(m, e);
  ASSERT_EQ(kinds(out), (std::vector{act::undo_grant, act::send_attempt}));
  EXPECT_EQ(out[0].how, undo::drop);
  EXPECT_FALSE(out[0].born_dead);
  out = feed(m, busy(t0 + milliseconds(500), t0 + milliseconds(1000), 300));
  EXPECT_EQ(kinds(out), (std::vector{act::retire, act::leave_queue, act::deliver}));
  EXPECT_EQ(last(out).end, ending::failed);
  EXPECT_EQ(last(out).error, errc::not_replicated);
  EXPECT_FALSE(last(out).with_server_reply);
}

TEST(AcquisitionFsm, AnUnreplicatedReentryUndoesOnlyItsOwnCount) {
  auto s = waiting_mutex();
  s.reentry = true;
  acquisition_fsm m(s);
  feed(m, at(ev::start, t0));
  auto e = reply(attempt_reply::type::reentered, t0, t0 + milliseconds(5));
  e.reply.error = errc::not_replicated;
  const auto out = feed(m, e);
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out[0].how, undo::release_added);
}

TEST(AcquisitionFsm, AnUnreplicatedBusyAnswerWaitsAsAnyBusyAnswer) {
  acquisition_fsm m(waiting_mutex());
  feed(m, at(ev::start, t0));
  auto e = busy(t0, t0 + milliseconds(1), 300);
  e.reply.error = errc::not_replicated;
  EXPECT_EQ(kinds(feed(m, e)), (std::vector{act::listen, act::arm_timer}));
}

// ---- errors ---------------------------------------------------------------------------------

TEST(AcquisitionFsm, ATimeoutUndoesTheGrantTheScriptMayHaveMadeAndRetriesWithBackoff) {
  acquisition_fsm m(waiting_mutex());
  feed(m, at(ev::start, t0));
  const auto out = feed(m, failed(errc::timeout, t0, t0 + milliseconds(5000)));
  ASSERT_EQ(kinds(out), (std::vector{act::undo_grant, act::arm_timer}));
  EXPECT_EQ(out[0].how, undo::drop_if_fresh);
  EXPECT_EQ(out[1].at, t0 + milliseconds(5020));
}

TEST(AcquisitionFsm, AServerErrorEndsTheCallWithTheServersWords) {
  acquisition_fsm m(waiting_mutex());
  feed(m, at(ev::start, t0));
  const auto out = feed(m, failed(errc::wrong_type, t0, t0 + milliseconds(1)));
  EXPECT_EQ(kinds(out), (std::vector{act::retire, act::leave_queue, act::deliver}));
  EXPECT_EQ(last(out).error, errc::wrong_type);
  EXPECT_TRUE(last(out).with_server_reply);
}

TEST(AcquisitionFsm, AMalformedReplyEndsTheCall) {
  acquisition_fsm m(single_attempt());
  feed(m, at(ev::start, t0));
  const auto out = feed(m, reply(attempt_reply::type::malformed, t0, t0 + milliseconds(1)));
  EXPECT_EQ(kinds(out), (std::vector{act::retire, act::deliver}));
  EXPECT_EQ(last(out).error, errc::unexpected_reply);
}

// ---- cancelling, closing, settling ----------------------------------------------------------

TEST(AcquisitionFsm, CancelledBeforeItStartedItEndsAtOnceAndNeverAttempts) {
  acquisition_fsm m(waiting_mutex());
  const auto out = feed(m, at(ev::cancel, t0));
  EXPECT_EQ(kinds(out), (std::vector{act::retire, act::deliver}));
  EXPECT_EQ(last(out).error, errc::cancelled);
  EXPECT_TRUE(feed(m, at(ev::start, t0)).empty());
  EXPECT_EQ(m.attempts(), 0);
}

TEST(AcquisitionFsm, CancelledWhileWaitingItLeavesTheQueueAndIgnoresLaterEvents) {
  acquisition_fsm m(waiting_mutex());
  feed(m, at(ev::start, t0));
  feed(m, busy(t0, t0 + milliseconds(1), 300));
  const auto out = feed(m, at(ev::cancel, t0 + milliseconds(50)));
  EXPECT_EQ(kinds(out), (std::vector{act::retire, act::leave_queue, act::deliver}));
  EXPECT_TRUE(feed(m, at(ev::timer, t0 + milliseconds(301))).empty());
  EXPECT_TRUE(feed(m, at(ev::woken, t0 + milliseconds(302))).empty());
  EXPECT_TRUE(feed(m, at(ev::cancel, t0 + milliseconds(303))).empty());
}

TEST(AcquisitionFsm, CancelledWithADirectAttemptOutItTakesAPlaceAndUndoesWhatTheReplyGrants) {
  acquisition_fsm m(waiting_mutex());
  m.resume(at(ev::start_direct, t0));
  auto out = feed(m, at(ev::cancel, t0 + milliseconds(1)));
  // The caller hears at once; the place taken keeps later waiters behind the undo.
  EXPECT_EQ(kinds(out),
            (std::vector{act::begin_settling, act::join_queue, act::retire, act::deliver}));
  EXPECT_EQ(last(out).error, errc::cancelled);
  EXPECT_EQ(m.current(), state::settling);
  EXPECT_TRUE(m.finished());

  out = feed(m, reply(attempt_reply::type::granted, t0, t0 + milliseconds(2)));
  EXPECT_EQ(kinds(out), (std::vector{act::undo_grant, act::leave_queue, act::end_settling,
                                     act::end_direct_claim}));
  EXPECT_EQ(out[0].how, undo::release_added);  // not a drop: a re-entry since must stay
  EXPECT_EQ(m.current(), state::done);
}

TEST(AcquisitionFsm, TheClientClosingWithAnAttemptOutSettlesAsACancelDoes) {
  acquisition_fsm m(waiting_mutex());
  feed(m, at(ev::start, t0));
  // The client closes while the attempt is out: the caller hears, the attempt still settles.
  auto out = feed(m, at(ev::close, t0 + milliseconds(1)));
  EXPECT_EQ(kinds(out), (std::vector{act::begin_settling, act::retire, act::deliver}));
  EXPECT_EQ(last(out).error, errc::client_closed);
  out = feed(m, failed(errc::connection_lost, t0, t0 + milliseconds(2)));
  EXPECT_EQ(kinds(out), (std::vector{act::undo_grant, act::leave_queue, act::end_settling}));
  EXPECT_EQ(out[0].how, undo::drop_if_fresh);
}

TEST(AcquisitionFsm, ASettlingFairWaiterGivesBackItsPlaceBeforeTheClientMayClose) {
  acquisition_fsm m(fair_waiter());
  feed(m, at(ev::start, t0));
  feed(m, at(ev::cancel, t0 + milliseconds(1)));
  auto out = feed(m, busy(t0, t0 + milliseconds(2), 300));
  EXPECT_EQ(kinds(out), (std::vector{act::leave_queue, act::give_back_place}));
  out = feed(m, at(ev::place_given_back, t0 + milliseconds(3)));
  EXPECT_EQ(kinds(out), std::vector{act::end_settling});
}

TEST(AcquisitionFsm, AFairWaiterThatGivesUpIsToldOnlyOnceItsPlaceIsGone) {
  acquisition_fsm m(fair_waiter());
  feed(m, at(ev::start, t0));
  feed(m, busy(t0, t0 + milliseconds(1), 300));
  auto out = feed(m, at(ev::cancel, t0 + milliseconds(50)));
  EXPECT_EQ(kinds(out), (std::vector{act::retire, act::leave_queue, act::give_back_place}));
  out = feed(m, at(ev::place_given_back, t0 + milliseconds(51)));
  ASSERT_EQ(kinds(out), std::vector{act::deliver});
  EXPECT_EQ(out[0].error, errc::cancelled);
}

TEST(AcquisitionFsm, AFairWaiterThatNeverAttemptedHasNoPlaceToGiveBack) {
  acquisition_fsm m(fair_waiter());
  feed(m, at(ev::start, t0), {.admitted = false});
  const auto out = feed(m, at(ev::cancel, t0 + milliseconds(5), false));
  EXPECT_EQ(kinds(out), (std::vector{act::retire, act::leave_queue, act::deliver}));
}

TEST(AcquisitionFsm, AFairWaiterGrantedGivesNothingBack) {
  acquisition_fsm m(fair_waiter());
  feed(m, at(ev::start, t0));
  const auto out = feed(m, reply(attempt_reply::type::granted, t0, t0 + milliseconds(1)));
  EXPECT_EQ(kinds(out), (std::vector{act::hand_out, act::retire, act::leave_queue, act::deliver}));
}

TEST(AcquisitionFsm, EventsThatComeAfterTheEndAreIgnored) {
  acquisition_fsm m(waiting_mutex());
  feed(m, at(ev::start, t0));
  feed(m, reply(attempt_reply::type::granted, t0, t0 + milliseconds(1)));
  EXPECT_TRUE(feed(m, reply(attempt_reply::type::granted, t0, t0 + milliseconds(2))).empty());
  EXPECT_TRUE(feed(m, at(ev::close, t0 + milliseconds(3))).empty());
}

}  // namespace
