// dlock/latch.hpp — a countdown latch in Redisson's RCountDownLatch layout.
#pragma once

#include "dlock/export.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <system_error>

namespace dlock {

namespace detail {
class lock_core;
}

/// How an asynchronous latch wait ended: `reached` (the count is 0), or not within the wait
/// (both empty), or failed (`error` is a `dlock::errc`, `message` says why).
struct latch_wait_result {
  bool reached = false;
  std::error_code error;
  std::string message;
};

/// A countdown latch shared by processes: the string `NAME` holds the count; when a count-down
/// takes it to 0 the key is deleted and `0` is published on
/// `redisson_countdownlatch__channel__{NAME}`, waking every waiter at once, in dlock and in
/// Redisson. A latch that does not exist counts as reached (as in Redisson). Waiting is
/// event-driven (a subscription plus a bounded re-check, `client_options::max_recheck`).
/// Not available over RedLock (errc::invalid_argument). On a cluster, a name holding `{` puts
/// the channel (always `{NAME}`-tagged, as Redisson derives it) in another slot than the count:
/// such names are refused there. Cheap to copy. Thread-safe.
class DLOCK_API countdown_latch {
 public:
  const std::string& name() const noexcept { return name_; }
  /// Sets the count to `count` if the latch does not exist. Returns true if it set it.
  /// Throws errc::invalid_argument for a count < 1, errc::wrong_type if the name holds
  /// something that is not a count, and the server's errors as `basic_lock::try_acquire` does.
  bool try_set_count(std::int64_t count);
  /// Counts down by one. At 0 the latch is deleted and every waiter wakes. Counting down a latch
  /// that does not exist does nothing. Throws as `try_set_count`.
  void count_down();
  /// The count now (0 if the latch does not exist). Throws as `try_set_count`.
  std::int64_t count() const;
  /// Waits up to `wait` for the count to reach 0. Returns true if it did, false if the wait
  /// ended first (a wait <= 0 checks once). Throws as `try_set_count`; errc::invalid_argument on
  /// the client's I/O thread.
  bool wait_for(std::chrono::milliseconds wait) const;
  /// Waits for as long as it takes.
  void wait() const;
  /// Asynchronous wait: returns at once; `done` runs on the client's I/O thread when the count
  /// reaches 0, the wait ends (`milliseconds::max()`: never) or an error occurs. Never throws.
  /// A pending wait keeps the client open until it ends.
  void wait_async(std::chrono::milliseconds wait,
                  std::function<void(latch_wait_result)> done) const;
  /// Deletes the latch, waking waiters (they see it reached). Returns true if it existed.
  bool remove();

 private:
  friend class client;
  countdown_latch(std::shared_ptr<detail::lock_core> core, std::string name);
  std::shared_ptr<detail::lock_core> core_;
  std::string name_;
};

}  // namespace dlock
