// Whether the I/O thread keeps polling for a while before it sleeps, and for how long.
//
// A reply that arrives while the I/O thread sleeps in epoll_wait has to wake it, and on a
// virtual machine with the thread's vCPU idle that wake-up can cost more than a loopback round
// trip (measured: 31 us from send to read, where a round trip whose reply came just after the
// thread went to sleep took ~20 us in all). Polling for up to `limit` after each burst of work
// saves it, but only pays while replies come back within `limit`: against a server across a
// network they never do, and polling would burn a core for nothing. So the window opens only
// while the recent round trips (a moving average) are within the limit.
//
// Nor does it pay for a few callers that pipeline: a reply that came back while other commands
// were still in flight on its connection means the I/O thread has more to read soon anyway, and
// polling then only takes a vCPU from the callers and the server (a release sent without
// waiting, then the next acquisition: 23-30 % slower at 1 and 4 threads when such replies
// counted as fast; level when they count as slow). Such a reply shuts the window at once,
// until a few replies that came back alone open it again.
//
// Under load it may pay again: with many commands in flight (16 async chains, say), each reply's
// round trip is long, queued behind the others, but the I/O thread's next event (the next burst
// of replies) may be due within microseconds, and sleeping between bursts costs each burst a
// wake-up. So the window may also open while replies come back with `loaded_in_flight` or more
// others in flight, provided the I/O thread's recent waits for its next event (a slow moving
// average the thread reports, counted from when it has nothing left to run) are within 1.5 x the
// limit: a loaded client of a distant server, whose bursts come far apart, still sleeps. The
// waits are spread wide (16 threads on loopback: a third under 8 us, a sixth over 128 us), so
// their average sits near the limit where polling pays (~53 us measured at 16 threads on
// loopback; ~91 us through a forwarding proxy on the same host, where polling only costs CPU;
// ~600 us 1 ms away): hence the margin, and a slow average that does not flicker across it.
// Even then a loaded client's I/O thread polls most of the time, and where the callers have work
// of their own between round trips that vCPU is theirs (the marketplace ran 15-17 % slower with
// it, while callers that only take and release locks ran 14-27 % faster; docs/benchmarks.md,
// Tuning). By default (under_load::when_it_pays) a trial decides which of the two this client is
// (load_poll_trial.hpp).
//
// Decisions only; io_thread acts on them.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>

#include "net/load_poll_trial.hpp"

namespace dlock::net {

/// Whether the window may also open while the client is loaded (see above).
enum class under_load { never, when_it_pays, always };

class busy_poll_policy {
 public:
  /// `limit` 0 turns polling off, under load too.
  explicit busy_poll_policy(std::chrono::microseconds limit,
                            under_load mode = under_load::never) noexcept
      : limit_(limit), mode_(mode) {}

  bool enabled() const noexcept { return limit_.count() > 0; }

  /// From this many other commands in flight on a reply's connection, the client is loaded.
  static constexpr std::size_t loaded_in_flight = 4;

  /// One reply came back `round_trip` after its command was written; `others_in_flight`: how
  /// many commands its connection still had in flight when it came.
  void note_reply(std::chrono::nanoseconds round_trip, std::size_t others_in_flight) noexcept {
    if (!enabled()) return;  // nothing reads the averages
    trial_.note_reply();
    // A reply that had others in flight counts for 8 x the limit: whatever the average was, it
    // lifts it past twice the limit. A reply that came back alone counts for at most 2 x the
    // limit, so that one outlier among fast replies (a preempted thread, a stalled vCPU: 2 to
    // 11 % of loopback replies on our 2-vCPU machines) does not shut the window; two in a row
    // do, and a distant server's replies within three. A shut window costs each following reply a
    // wake-up, which also inflates the round trip it measures and so keeps it shut longer
    // (measured: a lone caller's window stayed shut for up to a third of its run when one
    // outlier could shut it).
    if (others_in_flight > 0)
      round_trip = std::max<std::chrono::nanoseconds>(round_trip, 8 * limit_);
    else
      round_trip = std::min<std::chrono::nanoseconds>(round_trip, 2 * limit_);
    // An exponential moving average with weight 1/4: a few slow replies close the window (one
    // that had others in flight closes it at once), a few fast ones open it again.
    average_ += (round_trip - average_) / 4;
    // Load rises fast and falls slowly, so that a lull of a few lightly loaded replies between
    // bursts does not shut the window.
    load_ = others_in_flight >= loaded_in_flight ? std::min(load_ + 4, max_load)
                                                 : std::max(load_ - 1, 0);
  }

  /// True while replies come back with many others in flight and polling under load may
  /// open the window: the I/O thread then reports the time (note_time).
  bool loaded() const noexcept { return mode_ != under_load::never && load_ > 0; }

  /// True while the window may open under load: the I/O thread then also reports its waits for
  /// the next event (note_wait). Between trials that chose not to poll, it need not time them.
  bool times_waits() const noexcept {
    return loaded() && (mode_ == under_load::always || trial_.trying() || trial_.polling());
  }

  /// The I/O thread, with nothing left to run, waited `wait` for its next event (polling,
  /// sleeping, or both).
  void note_wait(std::chrono::nanoseconds wait) noexcept {
    if (!enabled()) return;
    // Weight 1/16: steady across the spread of one load's waits, yet one stall of a few
    // milliseconds lifts it past the bound at once.
    wait_average_ += (wait - wait_average_) / 16;
  }

  /// The I/O thread's clock, while loaded: it paces the trial (under_load::when_it_pays).
  void note_time(load_poll_trial::clock::time_point now) noexcept {
    if (mode_ == under_load::when_it_pays && load_ > 0) trial_.note_time(now);
  }

  /// The trial under way or last run (under_load::when_it_pays).
  const load_poll_trial& trial() const noexcept { return trial_; }

  /// How long to poll before sleeping: `limit` while the average round trip is within it, or
  /// while loaded, polling under load (always, or as the trial says) and the average wait for
  /// the next event is within 1.5 x it; else zero.
  std::chrono::nanoseconds window() const noexcept {
    if (!enabled()) return std::chrono::nanoseconds(0);
    if (average_ <= limit_) return limit_;
    const bool polls_under_load =
        mode_ == under_load::always || (mode_ == under_load::when_it_pays && trial_.polling());
    if (loaded() && polls_under_load && wait_average_ <= limit_ * 3 / 2) return limit_;
    return std::chrono::nanoseconds(0);
  }

 private:
  static constexpr int max_load = 16;
  std::chrono::nanoseconds limit_;
  under_load mode_;
  load_poll_trial trial_;
  std::chrono::nanoseconds average_{0};
  // Starts long: a loaded client polls only once its waits have shown they are short.
  std::chrono::nanoseconds wait_average_ = 2 * limit_;
  int load_ = 0;
};

}  // namespace dlock::net
