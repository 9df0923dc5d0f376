// When the I/O thread polls before it sleeps (client_options::busy_poll), without a thread or a
// server: while recent round trips come back within the limit and replies come back alone (no
// other command in flight on their connection), or while the client is loaded (many commands in
// flight) and the thread's waits for its next event average within 1.5 x the limit.
#include <gtest/gtest.h>

#include <initializer_list>

#include "net/busy_poll.hpp"

namespace {

using dlock::net::busy_poll_policy;
using dlock::net::under_load;
using namespace std::chrono_literals;

void note(busy_poll_policy& p, int replies, std::chrono::nanoseconds round_trip,
          std::size_t others_in_flight = 0) {
  for (int i = 0; i < replies; ++i)
    p.note_reply(round_trip, others_in_flight);
}

// Replies of `round_trip` it takes until the window is open (or shut), at most 100.
int replies_until(busy_poll_policy& p, std::chrono::nanoseconds round_trip, bool open) {
  int replies = 0;
  while ((p.window() != 0ns) != open && replies < 100) {
    p.note_reply(round_trip, 0);
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
  EXPECT_LE(replies, 3);  // each counts for 2 x the limit: 25, 44, 58 us
  note(p, 100, 400us);
  EXPECT_EQ(p.window(), 0ns);
}

TEST(BusyPoll, OneSlowReplyAmongFastOnesDoesNotStopIt) {
  busy_poll_policy p(50us);
  note(p, 20, 15us);
  p.note_reply(120us, 0);
  EXPECT_EQ(p.window(), 50us);
}

TEST(BusyPoll, OneOutlierAloneDoesNotShutItButTwoInARowDo) {
  busy_poll_policy p(50us);
  note(p, 20, 15us);
  p.note_reply(5ms, 0);  // a preempted thread, a stalled vCPU
  EXPECT_EQ(p.window(), 50us);
  p.note_reply(5ms, 0);
  EXPECT_EQ(p.window(), 0ns);
}

TEST(BusyPoll, FastRepliesOpenItAgainAfterSlowOnes) {
  busy_poll_policy p(50us);
  note(p, 20, 1ms);
  ASSERT_EQ(p.window(), 0ns);
  const int replies = replies_until(p, 15us, true);
  EXPECT_EQ(p.window(), 50us);
  EXPECT_LE(replies, 13);  // the excess over 15 us shrinks by 3/4 a reply: 12 replies
}

TEST(BusyPoll, AReplyWithOthersInFlightShutsItAtOnce) {
  busy_poll_policy p(50us);
  note(p, 100, 10us);
  ASSERT_EQ(p.window(), 50us);
  note(p, 1, 10us, 1);  // pipelined callers: the next reply is coming anyway
  EXPECT_EQ(p.window(), 0ns);
}

TEST(BusyPoll, CallersThatPipelineKeepItShut) {
  // A release sent without waiting, then the next acquisition: every other reply had the
  // other command in flight.
  busy_poll_policy p(50us);
  for (int i = 0; i < 50; ++i) {
    note(p, 1, 20us, 1);
    note(p, 1, 20us, 0);
    EXPECT_EQ(p.window(), 0ns) << "pair " << i;
  }
}

TEST(BusyPoll, LoneFastRepliesOpenItAgainAfterPipelinedOnes) {
  busy_poll_policy p(50us);
  note(p, 20, 20us, 1);
  ASSERT_EQ(p.window(), 0ns);
  const int replies = replies_until(p, 20us, true);
  EXPECT_EQ(p.window(), 50us);
  EXPECT_LE(replies, 10);  // the excess over 20 us (380 us) shrinks by 3/4 a reply: 9 replies
}

// 16 callers on 2 connections: every reply is queued behind others (a long round trip), but
// the next burst of replies comes within microseconds.
void loaded_round(busy_poll_policy& p, std::chrono::nanoseconds wait) {
  note(p, 8, 150us, busy_poll_policy::loaded_in_flight + 4);
  p.note_wait(wait);
}

// Loaded rounds with these waits, repeated, until the window is open (or shut); at least 1, at
// most 100.
int rounds_until(busy_poll_policy& p, std::initializer_list<std::chrono::nanoseconds> waits,
                 bool open) {
  int rounds = 0;
  do {
    for (auto wait : waits)
      loaded_round(p, wait);
    ++rounds;
  } while ((p.window() != 0ns) != open && rounds < 100);
  return rounds;
}

TEST(BusyPoll, ALoadedClientWhoseEventsComeCloseTogetherPolls) {
  busy_poll_policy p(50us, under_load::always);
  loaded_round(p, 10us);
  EXPECT_EQ(p.window(), 0ns) << "a loaded client polls only once its waits have shown short";
  EXPECT_LE(rounds_until(p, {10us}, true), 10);
  for (int i = 0; i < 50; ++i) {
    loaded_round(p, 10us);
    EXPECT_EQ(p.window(), 50us) << "round " << i;
  }
}

// The waits of 16 threads on loopback are spread wide: many within a few microseconds, some of
// a few hundred. Their average a little above the limit still opens the window.
TEST(BusyPoll, ALoadedClientWhoseWaitsAreMostlyShortPolls) {
  busy_poll_policy p(50us, under_load::always);
  EXPECT_LT(rounds_until(p, {5us, 10us, 20us, 40us, 200us}, true), 100);  // mean 55 us
  for (int i = 0; i < 50; ++i) {
    for (auto wait : {5us, 10us, 20us, 40us, 200us})
      loaded_round(p, wait);
    EXPECT_EQ(p.window(), 50us) << "round " << i;
  }
}

// Through a forwarding proxy on the same host the waits average nearly twice the limit, and
// polling then only costs CPU.
TEST(BusyPoll, ALoadedClientWhoseWaitsAverageTwiceTheLimitSleeps) {
  busy_poll_policy p(50us, under_load::always);
  for (int i = 0; i < 50; ++i) {
    for (auto wait : {10us, 40us, 80us, 120us, 200us})  // mean 90 us
      loaded_round(p, wait);
    EXPECT_EQ(p.window(), 0ns) << "round " << i;
  }
}

TEST(BusyPoll, ALoadedClientOfADistantServerSleeps) {
  busy_poll_policy p(50us, under_load::always);
  for (int i = 0; i < 50; ++i) {
    loaded_round(p, 400us);  // bursts of replies 400 us apart
    EXPECT_EQ(p.window(), 0ns) << "round " << i;
  }
}

TEST(BusyPoll, OneStallShutsAPollingLoadedClientAtOnce) {
  busy_poll_policy p(50us, under_load::always);
  EXPECT_LE(rounds_until(p, {10us}, true), 10);
  loaded_round(p, 2ms);  // the server stalled, or the next burst is a network away
  EXPECT_EQ(p.window(), 0ns);
}

TEST(BusyPoll, ALullBetweenBurstsDoesNotShutItButTheEndOfTheLoadDoes) {
  busy_poll_policy p(50us, under_load::always);
  EXPECT_LE(rounds_until(p, {10us}, true), 10);
  note(p, 3, 150us, 1);  // a few replies with few others in flight: the burst's tail
  EXPECT_EQ(p.window(), 50us);
  note(p, 20, 150us, 1);  // callers that pipeline lightly: shut, as without load
  EXPECT_EQ(p.window(), 0ns);
}

TEST(BusyPoll, WaitsDoNotOpenItWithoutLoad) {
  busy_poll_policy p(50us, under_load::always);
  note(p, 20, 1ms);  // a distant server, one caller
  for (int i = 0; i < 20; ++i)
    p.note_wait(5us);
  EXPECT_EQ(p.window(), 0ns);
}

TEST(BusyPoll, ItIsLoadedOnlyWhileManyCommandsAreInFlight) {
  busy_poll_policy p(50us, under_load::always);
  EXPECT_FALSE(p.loaded());
  note(p, 1, 150us, busy_poll_policy::loaded_in_flight - 1);
  EXPECT_FALSE(p.loaded());
  note(p, 1, 150us, busy_poll_policy::loaded_in_flight);
  EXPECT_TRUE(p.loaded());
  note(p, 10, 150us, 0);
  EXPECT_FALSE(p.loaded());
}

TEST(BusyPoll, ALoadedClientSleepsUnlessPollingUnderLoadIsOn) {
  busy_poll_policy p(50us);  // the default
  for (int i = 0; i < 50; ++i) {
    loaded_round(p, 10us);
    EXPECT_EQ(p.window(), 0ns) << "round " << i;
    EXPECT_FALSE(p.loaded()) << "round " << i;  // nor does it time its waits
  }
}

TEST(BusyPoll, ZeroIgnoresLoadToo) {
  busy_poll_policy p(0us, under_load::always);
  loaded_round(p, 1us);
  EXPECT_EQ(p.window(), 0ns);
}

// ---- under_load::when_it_pays: a trial decides (load_poll_trial.hpp) ----

using dlock::net::load_poll_trial;
using trial_clock = load_poll_trial::clock;

// Runs `t` from `now` for `length`, ticking every 100 us; in each tick the client completes
// `with` replies while the trial polls and `without` while it does not.
void run_trial_load(load_poll_trial& t, trial_clock::time_point& now, trial_clock::duration length,
                    int with, int without) {
  for (const auto end = now + length; now < end; now += 100us) {
    for (int i = 0, n = t.polling() ? with : without; i < n; ++i)
      t.note_reply();
    t.note_time(now);
  }
}

// The length of one trial that starts as the load does (a settling period, then four), with a
// tick's slack per period.
constexpr auto trial_length = 5 * (load_poll_trial::period + 100us);

TEST(LoadPollTrial, ALoadedClientStartsWithATrialAndPollsWhereItPays) {
  load_poll_trial t;
  auto now = trial_clock::now();
  t.note_time(now);
  EXPECT_TRUE(t.trying()) << "the first loaded moment starts a trial";
  run_trial_load(t, now, trial_length, 12, 10);  // 20 % more replies while polling
  ASSERT_FALSE(t.trying());
  EXPECT_TRUE(t.polling());
  run_trial_load(t, now, load_poll_trial::hold - 10ms, 12, 10);
  EXPECT_TRUE(t.polling()) << "the choice holds until the next trial";
  EXPECT_FALSE(t.trying());
}

TEST(LoadPollTrial, ItDoesNotPollWherePollingCostsOrChangesNothing) {
  // A steady 100 replies per tick without polling; 80, 100 or 104 (within the margin) with it.
  for (const int with : {80, 100, 104}) {
    SCOPED_TRACE(with);
    load_poll_trial t;
    auto now = trial_clock::now();
    run_trial_load(t, now, trial_length, with, 100);
    ASSERT_FALSE(t.trying());
    EXPECT_FALSE(t.polling());
  }
}

// The order without, with, with, without: a rate that rises steadily through the trial (a load
// ramping up) favours neither mode. (In the order without, with, without, with, this rise, by
// half over the trial, would count ~10 % for polling.)
TEST(LoadPollTrial, ASteadyRiseInTheRateFavoursNeither) {
  load_poll_trial t;
  auto now = trial_clock::now();
  const auto start = now;
  for (const auto end = now + trial_length; now < end; now += 100us) {
    const auto ticks = (now - start) / 100us;
    for (auto i = 0 * ticks; i < 100 + ticks / 40; ++i)  // 100 per tick, rising to ~150
      t.note_reply();
    t.note_time(now);
  }
  ASSERT_FALSE(t.trying());
  EXPECT_FALSE(t.polling());
}

// Callers starting up: the rate climbs through the first period, then holds. Counted, that
// period would make polling look 25 % better (the periods without it include it); it is not.
TEST(LoadPollTrial, ALoadThatJustStartedSettlesBeforeItIsCounted) {
  load_poll_trial t;
  auto now = trial_clock::now();
  run_trial_load(t, now, load_poll_trial::period, 20, 20);
  ASSERT_TRUE(t.trying());
  EXPECT_FALSE(t.polling()) << "it settles without polling";
  run_trial_load(t, now, trial_length - load_poll_trial::period, 100, 100);
  ASSERT_FALSE(t.trying());
  EXPECT_FALSE(t.polling());
}

TEST(LoadPollTrial, TrialsRepeatAndFollowAChangedWorkload) {
  load_poll_trial t;
  auto now = trial_clock::now();
  run_trial_load(t, now, trial_length, 12, 10);
  ASSERT_TRUE(t.polling());
  // The callers now have work of their own: polling costs them.
  run_trial_load(t, now, load_poll_trial::hold + trial_length, 8, 10);
  EXPECT_FALSE(t.trying());
  EXPECT_FALSE(t.polling());
  run_trial_load(t, now, load_poll_trial::hold + trial_length, 12, 10);
  EXPECT_TRUE(t.polling());
}

TEST(LoadPollTrial, AGapVoidsTheTrialUnderWay) {
  load_poll_trial t;
  auto now = trial_clock::now();
  // The periods without polling come out busy, those with it idle: were they compared, it would
  // not poll. Then the load stops (no ticks) for a second, and comes back polling-bound.
  run_trial_load(t, now, 3 * load_poll_trial::period + 150us, 0, 1000);
  ASSERT_TRUE(t.trying());
  ASSERT_TRUE(t.polling()) << "the trial is in a period with polling";
  now += 1s;
  t.note_time(now);
  EXPECT_TRUE(t.trying());
  EXPECT_FALSE(t.polling()) << "a fresh trial starts without polling";
  run_trial_load(t, now, trial_length, 12, 10);
  ASSERT_FALSE(t.trying());
  EXPECT_TRUE(t.polling());
}

TEST(LoadPollTrial, AGapStartsAFreshTrialEvenWhileAChoiceHolds) {
  load_poll_trial t;
  auto now = trial_clock::now();
  run_trial_load(t, now, trial_length, 12, 10);
  ASSERT_TRUE(t.polling());
  ASSERT_FALSE(t.trying());
  now += 100ms;  // the load stops, and another comes: polling now costs it
  run_trial_load(t, now, trial_length, 8, 10);
  EXPECT_FALSE(t.trying());
  EXPECT_FALSE(t.polling()) << "the new load was tried at once, not after the hold";
}

// The policy: with when_it_pays the loaded window opens only while the trial polls.
TEST(BusyPoll, WhenItPaysALoadedClientPollsOnlyWhileTheTrialSaysSo) {
  busy_poll_policy p(50us, under_load::when_it_pays);
  auto now = trial_clock::now();
  bool polled_in_trial = false;
  // Loaded rounds whose waits are short; the trial counts 12 replies per tick while the window
  // is open and 8 while it is shut: polling pays.
  for (const auto end = now + trial_length; now < end; now += 100us) {
    const bool open = p.window() != 0ns;
    polled_in_trial |= open;
    // (Before the first loaded reply the window is open for the lone-reply rule.)
    if (p.loaded()) {
      ASSERT_EQ(open, p.trial().polling());
    }
    note(p, open ? 12 : 8, 150us, busy_poll_policy::loaded_in_flight + 4);
    p.note_wait(10us);
    p.note_time(now);
    if (p.trial().trying()) {
      ASSERT_TRUE(p.times_waits()) << "a trial times the waits";
    }
  }
  EXPECT_TRUE(polled_in_trial);
  ASSERT_FALSE(p.trial().trying());
  EXPECT_TRUE(p.trial().polling());
  EXPECT_EQ(p.window(), 50us);
}

TEST(BusyPoll, WhenItDoesNotPayALoadedClientSleepsAndStopsTimingItsWaits) {
  busy_poll_policy p(50us, under_load::when_it_pays);
  auto now = trial_clock::now();
  for (const auto end = now + trial_length; now < end; now += 100us) {
    note(p, p.window() != 0ns ? 8 : 12, 150us, busy_poll_policy::loaded_in_flight + 4);
    p.note_wait(10us);
    p.note_time(now);
  }
  ASSERT_FALSE(p.trial().trying());
  EXPECT_FALSE(p.trial().polling());
  EXPECT_EQ(p.window(), 0ns);
  EXPECT_TRUE(p.loaded()) << "it still reads the clock, for the next trial";
  EXPECT_FALSE(p.times_waits());
}

TEST(BusyPoll, WhenItPaysTheTrialWaitsForLoad) {
  busy_poll_policy p(50us, under_load::when_it_pays);
  note(p, 20, 1ms);  // one caller of a distant server: not loaded, the window shut
  p.note_time(trial_clock::now());
  EXPECT_FALSE(p.trial().trying());
  EXPECT_FALSE(p.loaded());
  EXPECT_EQ(p.window(), 0ns);
}

}  // namespace
