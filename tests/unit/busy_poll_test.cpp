// When the I/O thread polls before it sleeps (client_options::busy_poll), without a thread or a
// server: only while recent round trips come back within the limit.
#include <gtest/gtest.h>

#include "net/busy_poll.hpp"

namespace {

using dlock::net::busy_poll_policy;
using namespace std::chrono_literals;

TEST(BusyPoll, PollsForTheLimitBeforeAnyReply) {
  const busy_poll_policy p(50us);
  EXPECT_EQ(p.window(), 50us);
}

TEST(BusyPoll, ZeroTurnsItOffWhateverTheRoundTrips) {
  busy_poll_policy p(0us);
  EXPECT_EQ(p.window(), 0ns);
  for (int i = 0; i < 10; ++i)
    p.note_round_trip(10us);
  EXPECT_EQ(p.window(), 0ns);
}

TEST(BusyPoll, FastRoundTripsKeepItPolling) {
  busy_poll_policy p(50us);
  for (int i = 0; i < 100; ++i)
    p.note_round_trip(20us);
  EXPECT_EQ(p.window(), 50us);
}

TEST(BusyPoll, ARemoteServersRoundTripsStopItWithinAFewReplies) {
  busy_poll_policy p(50us);
  int replies = 0;
  while (p.window() != 0ns && replies < 100) {
    p.note_round_trip(400us);  // a server across a network
    ++replies;
  }
  EXPECT_EQ(p.window(), 0ns);
  EXPECT_LE(replies, 2);
  for (int i = 0; i < 100; ++i)
    p.note_round_trip(400us);
  EXPECT_EQ(p.window(), 0ns);
}

TEST(BusyPoll, OneSlowReplyAmongFastOnesDoesNotStopIt) {
  busy_poll_policy p(50us);
  for (int i = 0; i < 20; ++i)
    p.note_round_trip(15us);
  p.note_round_trip(120us);
  EXPECT_EQ(p.window(), 50us);
}

TEST(BusyPoll, FastRepliesOpenItAgainAfterSlowOnes) {
  busy_poll_policy p(50us);
  for (int i = 0; i < 20; ++i)
    p.note_round_trip(1ms);
  ASSERT_EQ(p.window(), 0ns);
  int replies = 0;
  while (p.window() == 0ns && replies < 100) {
    p.note_round_trip(15us);
    ++replies;
  }
  EXPECT_EQ(p.window(), 50us);
  EXPECT_LE(replies, 13);  // the excess over 15 us shrinks by 3/4 a reply: 12 replies
}

}  // namespace
