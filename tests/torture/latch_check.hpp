// The countdown latch's property, checked from the workers' latch lines (event_log.hpp: c and C):
// a waiter is released only once the count reached 0, and every waiter is released by a 0 that
// lasts. Times are the workers' CLOCK_MONOTONIC readings.
//
//   The latch may be at 0 from the send of a count-down that left 0, failed, or never returned
//   (a worker killed in it) until the reply of the next successful set sent after it; also from
//   the start of a fault that may lose writes (a failover, a restart without data: a latch lost
//   is a latch at 0), and before anyone set it.
//
//   The latch is at 0 for sure from the reply of a count-down that left 0 until the send of the
//   next set that armed it, failed or never returned, or the start of a fault that may lose
//   writes (the delete can be undone with the data).
//
//   A released wait (wait_for true) is early if its [call, return] meets no time the latch may
//   be at 0; only by a fault's window if it meets none other.
//
//   A wait that ended without the release missed it if, with no fault on the deployment or on
//   its own worker during the wait, the latch was at 0 for sure for more than `release_bound_ns` of
//   it: a waiter hears of the 0 from the channel, or at its next re-check.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dlock::torture {

struct latch_op {
  std::int64_t worker = 0;
  std::string_view name;
  char op = 0;  ///< 's' set, 'd' down, 'w' wait
  std::int64_t t_call = 0;
  std::int64_t t_reply = 0;  ///< `never` if it never returned
  /// set: "1" armed, "0" it existed; down: the count left; wait: "1" reached, "0" the wait
  /// ended; "err" for an error; empty if it never returned.
  std::string_view result;
};

struct latch_fault {
  std::int64_t t_start = 0, t_end = 0;
  bool may_lose_writes = false;
  std::int64_t worker = -1;  ///< a worker's kill or stop: only that worker's waits are touched
};

struct latch_report {
  std::uint64_t ops = 0;
  std::uint64_t zeros = 0;  ///< count-downs that left 0
  std::uint64_t waits_released = 0;
  std::uint64_t waits_ended = 0;          ///< the wait ended first
  std::uint64_t early_releases = 0;       ///< must be 0
  std::uint64_t releases_after_loss = 0;  ///< released only by a fault that may lose writes
  std::uint64_t waits_checked = 0;    ///< waits that ended without the release, no fault in them
  std::uint64_t missed_releases = 0;  ///< must be 0
  /// From the 0 (the count-down's reply) to the release of a waiter that was waiting then.
  std::vector<double> release_delay_ms;
  /// "worker W: wait [a, b] on NAME ..." for the first failures, and when they happened.
  std::vector<std::string> examples;
  std::vector<std::pair<std::int64_t, std::string_view>> failures_at;  ///< (time, name)
};

inline constexpr std::int64_t latch_never = INT64_MAX;

/// Checks every latch of `ops` (any order) against the faults.
latch_report check_latches(std::vector<latch_op> ops, const std::vector<latch_fault>& faults,
                           std::int64_t release_bound_ns);

}  // namespace dlock::torture
