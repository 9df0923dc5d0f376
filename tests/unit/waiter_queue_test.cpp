// The waiter queue's rules without a server: arrival order, how many attempt at once, and the
// accounting that tells the echo of our own unlock message from other clients' releases.
#include <gtest/gtest.h>

#include "locks/sansio/waiter_queue.hpp"

namespace {

using dlock::detail::recent_unsubscribes;
using queue = dlock::detail::waiter_queue<int>;
using message = queue::message_action;
using release = queue::release_action;

TEST(WaiterQueue, ServesWaitersInArrivalOrderOneAtATimeForAMutex) {
  queue q;
  for (int w : {1, 2, 3})
    q.push(w);
  EXPECT_TRUE(q.admitted(1));
  EXPECT_FALSE(q.admitted(2));
  EXPECT_FALSE(q.admitted(3));
  q.remove(1);
  ASSERT_NE(q.newly_admitted(), nullptr);
  EXPECT_EQ(*q.newly_admitted(), 2);
  EXPECT_TRUE(q.admitted(2));
  EXPECT_FALSE(q.admitted(3));
  q.remove(3);  // a waiter whose deadline passed leaves from the middle
  q.remove(2);
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.newly_admitted(), nullptr);
}

TEST(WaiterQueue, AdmitsAsManyAsTheKindHasHolders) {
  queue q(3);  // a semaphore with three permits, say
  for (int w = 1; w <= 5; ++w)
    q.push(w);
  for (int w = 1; w <= 3; ++w)
    EXPECT_TRUE(q.admitted(w)) << w;
  EXPECT_FALSE(q.admitted(4));
  q.remove(2);
  ASSERT_NE(q.newly_admitted(), nullptr);
  EXPECT_EQ(*q.newly_admitted(), 4) << "the next in line takes the freed place";
  EXPECT_TRUE(q.admitted(4));
  EXPECT_FALSE(q.admitted(5));
  EXPECT_EQ(queue(0).size(), 0u);
  queue at_least_one(0);
  at_least_one.push(7);
  EXPECT_TRUE(at_least_one.admitted(7)) << "a queue always admits one";
}

TEST(WaiterQueue, AMessageWakesAsManyAdmittedWaitersAsItAnnounces) {
  queue mutex;
  for (int w : {1, 2, 3})
    mutex.push(w);
  EXPECT_EQ(mutex.front_waiters(5), std::vector<int>{1}) << "a mutex admits one";
  queue shared(SIZE_MAX);  // readers, or a semaphore's waiters
  for (int w : {1, 2, 3})
    shared.push(w);
  EXPECT_EQ(shared.front_waiters(2), (std::vector<int>{1, 2})) << "two permits came back";
  EXPECT_EQ(shared.front_waiters(SIZE_MAX), (std::vector<int>{1, 2, 3}));
  EXPECT_TRUE(queue().front_waiters(1).empty());
}

TEST(WaiterQueue, WithoutOurOwnReleasesEveryMessageWakesTheFront) {
  queue q;
  q.push(1);
  EXPECT_EQ(q.message_arrived(), message::wake);
  EXPECT_EQ(q.message_arrived(), message::wake);
}

TEST(WaiterQueue, OurOwnEchoIsSkippedWhenItComesAfterTheReply) {
  queue q;
  q.push(1);
  q.subscription = 42;
  q.confirmed = true;
  const auto note = q.release_started();
  EXPECT_TRUE(note.tracked && note.confirmed && note.requested);
  // The reply comes first: released, nobody else listening.
  EXPECT_EQ(q.release_finished(note, true, false), release::wake);
  // Then our own echo: already acted upon.
  EXPECT_EQ(q.message_arrived(), message::skip);
  // Someone else's release after that is a real wake-up.
  EXPECT_EQ(q.message_arrived(), message::wake);
}

TEST(WaiterQueue, MessagesDuringOurReleaseAreHeldAndOurEchoCancelsOne) {
  queue q;
  q.push(1);
  q.subscription = 42;
  q.confirmed = true;
  const auto note = q.release_started();
  EXPECT_EQ(q.message_arrived(), message::hold);  // our echo, before our reply
  EXPECT_EQ(q.release_finished(note, true, false), release::wake);
  EXPECT_EQ(q.message_arrived(), message::wake) << "the echo was already counted";
}

TEST(WaiterQueue, ANotHeldReleaseWakesForHeldMessagesFromOthers) {
  queue q;
  q.push(1);
  q.subscription = 42;
  q.confirmed = true;
  const auto note = q.release_started();
  EXPECT_EQ(q.message_arrived(), message::hold);  // another client's release meanwhile
  EXPECT_EQ(q.release_finished(note, false, false), release::wake)
      << "ours freed nothing, so what we heard was someone else's";
  const auto quiet = q.release_started();
  EXPECT_EQ(q.release_finished(quiet, false, false), release::none);
}

TEST(WaiterQueue, OtherListenersMakeTheFrontYield) {
  queue q;
  q.push(1);
  const auto note = q.release_started();
  EXPECT_EQ(q.release_finished(note, true, true), release::yield);
  queue empty;
  const auto n2 = empty.release_started();
  EXPECT_EQ(empty.release_finished(n2, true, true), release::none);
}

TEST(WaiterQueue, UnconfirmedSubscriptionsExpectNoEcho) {
  queue q;
  q.push(1);
  q.subscription = 42;  // requested, not yet confirmed: the publish may not reach us
  const auto note = q.release_started();
  EXPECT_FALSE(note.confirmed);
  EXPECT_EQ(q.release_finished(note, true, false), release::wake);
  EXPECT_EQ(q.message_arrived(), message::wake) << "nothing was set aside to skip";
}

TEST(RecentUnsubscribes, CountUsForASecondAfterWeLeave) {
  recent_unsubscribes r;
  const auto t0 = recent_unsubscribes::clock::now();
  r.note("c", t0);
  EXPECT_TRUE(r.maybe_subscribed("c", t0 + std::chrono::milliseconds(900)));
  EXPECT_FALSE(r.maybe_subscribed("c", t0 + std::chrono::milliseconds(1100)));
  EXPECT_FALSE(r.maybe_subscribed("never", t0));
}

}  // namespace
