// When the I/O thread polls before it sleeps (client_options::busy_poll), without a thread or a
// server: only while recent round trips come back within the limit.
#include <gtest/gtest.h>

#include "net/busy_poll.hpp"

namespace {

using dlock::net::busy_poll_policy;
using namespace std::chrono_literals;

void note(busy_poll_policy& p, int replies, std::chrono::nanoseconds round_trip) {
  for (int i = 0; i < replies; ++i)
    p.note_round_trip(round_trip);
}

// Replies of `round_trip` it takes until the window is open (or shut), at most 100.
int replies_until(busy_poll_policy& p, std::chrono::nanoseconds round_trip, bool open) {
  int replies = 0;
  while ((p.window() != 0ns) != open && replies < 100) {
    p.note_round_trip(round_trip);
    ++replies;
  }
  return replies;
}

TEST(BusyPoll, PollsForTheLimitBeforeAnyReply) {
  const busy_poll_policy p(50us);
  EXPECT_EQ(p.window(), 50us);
}

TEST(BusyPoll, ZeroTurnsItOffWhateverTheRoundTrips) {
  busy_poll_policy p(0us);
  EXPECT_EQ(p.window(), 0ns);
  note(p, 10, 10us);
  EXPECT_EQ(p.window(), 0ns);
}

TEST(BusyPoll, FastRoundTripsKeepItPolling) {
  busy_poll_policy p(50us);
  note(p, 100, 20us);
  EXPECT_EQ(p.window(), 50us);
}

TEST(BusyPoll, ARemoteServersRoundTripsStopItWithinAFewReplies) {
  busy_poll_policy p(50us);
  const int replies = replies_until(p, 400us, false);  // a server across a network
  EXPECT_EQ(p.window(), 0ns);
  EXPECT_LE(replies, 2);
  note(p, 100, 400us);
  EXPECT_EQ(p.window(), 0ns);
}

TEST(BusyPoll, OneSlowReplyAmongFastOnesDoesNotStopIt) {
  busy_poll_policy p(50us);
  note(p, 20, 15us);
  p.note_round_trip(120us);
  EXPECT_EQ(p.window(), 50us);
}

TEST(BusyPoll, FastRepliesOpenItAgainAfterSlowOnes) {
  busy_poll_policy p(50us);
  note(p, 20, 1ms);
  ASSERT_EQ(p.window(), 0ns);
  const int replies = replies_until(p, 15us, true);
  EXPECT_EQ(p.window(), 50us);
  EXPECT_LE(replies, 13);  // the excess over 15 us shrinks by 3/4 a reply: 12 replies
}

}  // namespace
