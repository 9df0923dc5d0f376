// dlock/latch.hpp — a countdown latch in Redisson's RCountDownLatch layout.
#pragma once

#include "dlock/export.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <system_error>

#include "dlock/async.hpp"

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
/// `redisson_countdownlatch__channel__{NAME}` (always braced, as Redisson derives it), waking
/// every waiter at once, in dlock and in Redisson. A latch that does not exist counts as reached
/// (as in Redisson). Every change is one script, which refuses a name holding anything but a
/// count (a list, a hash, a string that is not an integer) with errc::wrong_type and leaves it
/// as it was. Waiting is event-driven: a subscription to the channel (shared by the client's
/// waiters on the name), the count read once it is confirmed, a re-check at least every
/// `client_options::max_recheck`, and the deadline.
/// Not available over RedLock (errc::invalid_argument). On a cluster, a name holding `{` puts
/// the channel in another slot than the count: such names are refused there
/// (errc::invalid_argument). Cheap to copy. Thread-safe.
class DLOCK_API countdown_latch {
 public:
  /// The latch's name: the key that holds its count.
  const std::string& name() const noexcept { return name_; }
  /// Sets the count to `count` if the latch does not exist (and publishes Redisson's "new
  /// count" message). Returns true if it set it, false if the latch exists already.
  /// Throws errc::invalid_argument for a count < 1 or on the client's I/O thread,
  /// errc::wrong_type if the name holds something that is not a count, and the server's errors
  /// as `basic_lock::try_acquire` does.
  bool try_set_count(std::int64_t count);
  /// `try_set_count` without parking a thread: returns at once, and `done` runs once, on the
  /// client's I/O thread, with what it would have returned or the error it would have thrown
  /// (argument errors too, with nothing sent). Never throws. Do not block in `done`.
  void try_set_count_async(std::int64_t count,
                           std::function<void(call_result<bool>)> done) const noexcept;
  /// The same for a C++20 coroutine: `bool set = co_await latch.try_set_count_async(3);`, with
  /// `call_awaitable`'s rules (sent when awaited; continues on the I/O thread).
  [[nodiscard]] call_awaitable<bool> try_set_count_async(std::int64_t count) const;
  /// Counts down by one. At 0 the latch is deleted and every waiter wakes. Counting down a latch
  /// that does not exist does nothing. Throws as `try_set_count`.
  void count_down();
  /// `count_down` without parking a thread: returns at once, and `done` runs once, on the
  /// client's I/O thread, with `value` the count left (0: the latch is open, by this count-down
  /// or an earlier one, or it never existed) or the error `count_down` would have thrown. Never
  /// throws; safe on the I/O thread, where `count_down` is refused. Do not block in `done`.
  void count_down_async(std::function<void(call_result<std::int64_t>)> done) const noexcept;
  /// The same for a C++20 coroutine: `std::int64_t left = co_await latch.count_down_async();`,
  /// with `call_awaitable`'s rules (sent when awaited; continues on the I/O thread).
  [[nodiscard]] call_awaitable<std::int64_t> count_down_async() const;
  /// The count now (0 if the latch does not exist). Throws as `try_set_count`.
  std::int64_t count() const;
  /// `count` without parking a thread, as `try_set_count_async`.
  void count_async(std::function<void(call_result<std::int64_t>)> done) const noexcept;
  /// `co_await latch.count_async()`, as `try_set_count_async`.
  [[nodiscard]] call_awaitable<std::int64_t> count_async() const;
  /// Waits up to `wait` for the count to reach 0. Returns true if it did, false if the wait
  /// ended first (a wait <= 0 checks once). While time remains, what passes (a reconnect, a
  /// loading server) is waited out. Throws as `try_set_count` for errors waiting cannot fix;
  /// errc::client_closed if the client closes meanwhile.
  bool wait_for(std::chrono::milliseconds wait) const;
  /// Waits for as long as it takes. Throws as `wait_for`.
  void wait() const;
  /// Asynchronous wait: returns at once; `done` runs once, on the client's I/O thread, when the
  /// count reaches 0, the wait ends (`milliseconds::max()`: never; <= 0: one check) or an error
  /// occurs. Never throws; errors, argument errors included, come through `done`. A pending
  /// wait does not keep the client open: when the client's last handle (client, lock, latch,
  /// lease) goes, it completes with errc::client_closed. The handle it returns cancels the
  /// wait (`done` then gets errc::cancelled); it is empty after an argument error. Do not block
  /// in `done`.
  acquire_handle wait_async(std::chrono::milliseconds wait,
                            std::function<void(latch_wait_result)> done) const;
  /// The same for a C++20 coroutine: `bool reached = co_await latch.wait_async(10s);`, with
  /// `call_awaitable`'s rules: the wait starts (and counts) when awaited, the coroutine
  /// continues on the client's I/O thread. A stop token, if given, cancels the wait: the
  /// `co_await` then throws errc::cancelled. Throws as `wait_for` otherwise.
  [[nodiscard]] call_awaitable<bool> wait_async(std::chrono::milliseconds wait) const;
  [[nodiscard]] call_awaitable<bool> wait_async(std::chrono::milliseconds wait,
                                                std::stop_token cancel) const;
  /// Deletes the latch, waking its waiters (they see it reached; Redisson's waiters too, which
  /// Redisson's own delete leaves waiting). Returns true if it existed. Throws as
  /// `try_set_count`.
  bool remove();
  /// `remove` without parking a thread, as `try_set_count_async`.
  void remove_async(std::function<void(call_result<bool>)> done) const noexcept;
  /// `co_await latch.remove_async()`, as `try_set_count_async`.
  [[nodiscard]] call_awaitable<bool> remove_async() const;

 private:
  friend class client;
  countdown_latch(std::shared_ptr<detail::lock_core> core, std::string name);
  std::shared_ptr<detail::lock_core> core_;
  std::string name_;
};

}  // namespace dlock
