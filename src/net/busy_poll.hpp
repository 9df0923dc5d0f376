// Whether the I/O thread keeps polling for a while before it sleeps, and for how long.
//
// A reply that arrives while the I/O thread sleeps in epoll_wait has to wake it, and on a
// virtual machine with the thread's vCPU idle that wake-up can cost more than a loopback round
// trip (docs/benchmarks.md 0.0c: 31 us from send to read, where a round trip whose reply came
// just after the thread went to sleep took ~20 us in all). Polling for up to `limit` after each
// burst of work saves it, but only pays while replies come back within `limit`: against a
// server across a network they never do, and polling would burn a core for nothing. So the
// window opens only while the recent round trips (a moving average) are within the limit.
//
// Nor does it pay for callers that pipeline: a reply that came back while other commands were
// still in flight on its connection means the I/O thread has more to read soon anyway, and
// polling then only takes a vCPU from the callers and the server (a release sent without
// waiting, then the next acquisition: 23-30 % slower at 1 and 4 threads when such replies
// counted as fast; level when they count as slow; docs/benchmarks.md 0.0d). Such a reply
// shuts the window at once, until a few replies that came back alone open it again.
//
// Decisions only; io_thread acts on them.
#pragma once

#include <algorithm>
#include <chrono>

namespace dlock::net {

class busy_poll_policy {
 public:
  /// `limit` 0 turns polling off.
  explicit busy_poll_policy(std::chrono::microseconds limit) noexcept : limit_(limit) {}

  bool enabled() const noexcept { return limit_.count() > 0; }

  /// One reply came back `round_trip` after its command was written; `others_in_flight`: its
  /// connection still had commands in flight when it came.
  void note_reply(std::chrono::nanoseconds round_trip, bool others_in_flight) noexcept {
    if (!enabled()) return;  // nothing reads the average
    // 8 x the limit: whatever the average was, this one reply lifts it past twice the limit.
    if (others_in_flight) round_trip = std::max<std::chrono::nanoseconds>(round_trip, 8 * limit_);
    // An exponential moving average with weight 1/4: a few slow replies close the window (one
    // that had others in flight closes it at once), a few fast ones open it again.
    average_ += (round_trip - average_) / 4;
  }

  /// How long to poll before sleeping: `limit` while the average round trip is within it, else
  /// zero.
  std::chrono::nanoseconds window() const noexcept {
    if (limit_.count() == 0 || average_ > limit_) return std::chrono::nanoseconds(0);
    return limit_;
  }

 private:
  std::chrono::nanoseconds limit_;
  std::chrono::nanoseconds average_{0};
};

}  // namespace dlock::net
