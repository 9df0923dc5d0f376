// The timing of one acquisition, sans-io (acquisition_fsm asks it, and a latch's wait):
// when to try, how long to wait and when to give up, from the outcomes it
// is told and the time it is given. It owns no clock, socket or timer, so every path is
// unit-testable with made-up times.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <system_error>

namespace dlock::detail {

using steady = std::chrono::steady_clock;

struct acquire_limits {
  /// When the whole call must end. time_point::max() waits forever.
  steady::time_point deadline = steady::time_point::max();
  /// One attempt only (try_acquire, or a wait ≤ 0).
  bool single_attempt = false;
  /// Longest sleep without an unlock message before re-checking.
  std::chrono::milliseconds max_recheck{1000};
  /// Bound on one attempt's round trip (the client's command timeout).
  std::chrono::milliseconds command_timeout{5000};
  /// First pause after a connection failure; doubles up to max_recheck.
  std::chrono::milliseconds retry_backoff{20};
  /// 0: retry as soon as the lock may be free. Otherwise each retry after a busy answer first
  /// waits a random time of up to this many of the last attempt's round trips, and wake-ups
  /// meanwhile wait for it too (RedLock: contenders that retry in step split the vote again).
  double jitter_round_trips = 0;
};

class attempt_timing {
 public:
  enum class step_kind {
    attempt,       ///< send an attempt; its reply must arrive by `until`
    wait,          ///< sleep until `until` unless woken (unlock message) first
    granted,       ///< done: the lock is ours
    not_acquired,  ///< done: the wait ended without the lock
    failed,        ///< done: `error` cannot be fixed by waiting
  };
  struct step {
    step_kind kind;
    steady::time_point until{};
    std::error_code error{};
  };

  /// `uniform` draws the jitter's share, in [0, 1); the default is a per-thread PRNG (jitter
  /// needs spread, not secrecy). Tests inject their own.
  explicit attempt_timing(acquire_limits limits, std::function<double()> uniform = {});

  /// The first step: always an attempt, even if the deadline has passed (a wait ≤ 0 means
  /// "try once").
  step start(steady::time_point now);
  /// The attempt was granted.
  step on_granted();
  /// The attempt found the lock held; `pttl_ms` is the holder's remaining lease as PTTL reports
  /// it (-1: no expiry, -2: the key vanished meanwhile).
  step on_busy(std::int64_t pttl_ms, steady::time_point now);
  /// Woken: an unlock message, a timer, a renewed subscription, or promotion to the head of the
  /// local queue. Attempts again unless the deadline has passed, or waits out the jitter still
  /// due from the last busy answer.
  step on_wake(steady::time_point now);
  /// The last attempt took `d` from sending to its reply (the jitter's unit).
  void note_round_trip(steady::duration d) noexcept { round_trip_ = d; }
  /// The attempt failed with `ec`. What is temporary (timeout, connection_lost, and
  /// server_busy: a server loading its data after a restart, busy with a script, or without its
  /// master) is retried with backoff while the deadline allows, except for a single attempt;
  /// other errors end the call.
  step on_error(std::error_code ec, steady::time_point now);

  const acquire_limits& limits() const noexcept { return limits_; }
  /// Attempts sent so far.
  int attempts() const noexcept { return attempts_; }

 private:
  step attempt(steady::time_point now);
  step wait_until(steady::time_point t) const;

  acquire_limits limits_;
  std::function<double()> uniform_;
  std::chrono::milliseconds backoff_{0};
  int attempts_ = 0;
  steady::duration round_trip_{0};
  steady::time_point jitter_until_{};
};

/// `now + d`, saturating at time_point::max() instead of overflowing.
steady::time_point saturating_add(steady::time_point now, std::chrono::milliseconds d);

}  // namespace dlock::detail
