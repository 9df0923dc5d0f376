// dlock/async.hpp — acquisitions and calls that park no thread: the handle that cancels one
// started with a callback, the C++20 awaitable behind `co_await lock.acquire_async(wait)`, and the
// result and awaitable of the calls that take one round trip (`lease::extend_async`,
// `semaphore::release_async`, `countdown_latch::count_down_async`, ...). No asio here: the asio
// adapter (any completion token) is the optional dlock/asio.hpp.
#pragma once

#include "dlock/export.hpp"

#include <chrono>
#include <coroutine>
#include <cstdint>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

namespace dlock {

namespace detail {
class lock_core;
struct lock_handle;
struct acquire_wait;
struct cancellable;
struct awaitable_factory;
}  // namespace detail
namespace net {
class io_thread;
}  // namespace net
class lease;
class read_lock;
struct lease_and_reads;
class acquire_and_read_awaitable;
class multi_acquire_awaitable;

/// Cancels one asynchronous acquisition or wait: what `basic_lock::acquire_async(wait, callback)`,
/// `multi_lock::acquire_async` and `countdown_latch::wait_async(wait, callback)` return (for a
/// latch's wait, `cancel` ends it with `errc::cancelled`; it holds nothing to give back). A cheap,
/// copyable value that holds weak references only: it keeps neither the acquisition nor its client
/// alive. A default-constructed handle refers to nothing.
class DLOCK_API acquire_handle {
 public:
  acquire_handle() noexcept = default;

  /// Ends the acquisition if it has not completed yet: it then completes soon, on the client's
  /// I/O thread, with `errc::cancelled` and an empty lease, and holds nothing. It leaves this
  /// client's queue of waiters at once, and a fair lock's or waiting writer's place on the server
  /// too. An attempt already on its way to the server is not waited for: if its reply brings a
  /// grant, that grant is undone on the server (one hold given back, as a release would), and a
  /// reply that never comes is treated as a grant that may have been made. This client's waiters
  /// queued behind it on the same lock attempt only after that undo has been sent.
  ///
  /// If the completion has already run, or is running, this does nothing: the result stands
  /// (a lease, if granted, is the caller's to release). Any thread (also a callback on the I/O
  /// thread), any number of times, concurrently; never blocks, never throws.
  void cancel() const noexcept;

 private:
  friend class detail::lock_core;
  // The client's I/O thread, not the client: a cancel() must never be what closes the client
  // (a client closing inside a stop callback would wait for an I/O thread that waits for it).
  std::weak_ptr<net::io_thread> io_;
  std::weak_ptr<detail::cancellable> op_;
};

/// What `co_await lock.acquire_async(wait, options, stop)` waits on: the lease, empty if the wait
/// ended first. Nothing is sent until it is awaited, and the wait counts from there. Single use:
/// awaiting it again, or after it was moved from, throws errc::invalid_argument.
///
/// Where the coroutine continues: **on the client's I/O thread**, where completions run, unless
/// the result was known before it could suspend (an argument error, a stop already requested, or
/// a reply fast enough to beat the suspension), in which case it continues on the thread that
/// awaited. Code after the `co_await` that runs on the I/O thread must not block: dlock's
/// blocking calls throw `errc::invalid_argument` there (`lease::release` sends without waiting
/// and reports true); hop to your own executor first for long work.
///
/// Ownership: a reentrant, fair or read-write acquisition without `lease_options::owner` gets
/// an owner of its own (not the calling thread's id, which coroutines sharing a thread, or
/// moving between threads, would share): concurrent coroutines exclude each other, and a
/// coroutine that wants to re-enter its own hold passes the same explicit `owner` both times.
class DLOCK_API acquire_awaitable {
 public:
  acquire_awaitable(acquire_awaitable&&) noexcept;
  acquire_awaitable& operator=(acquire_awaitable&&) = delete;
  acquire_awaitable(const acquire_awaitable&) = delete;
  acquire_awaitable& operator=(const acquire_awaitable&) = delete;
  /// Destroying it while its coroutine is suspended on it (the coroutine frame destroyed
  /// without resuming) cancels the acquisition, and the coroutine is never resumed. Do that on
  /// the client's I/O thread (or while the lock is surely not coming), where the completion
  /// cannot be resuming the coroutine at the same moment.
  ~acquire_awaitable();

  /// True, with nothing sent, if the stop token was already stopped.
  bool await_ready();
  /// Starts the acquisition and registers the stop callback. Returns false, continuing at once,
  /// if the result is already known; the coroutine is resumed exactly once either way.
  bool await_suspend(std::coroutine_handle<> awaiting);
  /// The lease (empty: not acquired within the wait). Throws `dlock::error`: errc::cancelled if
  /// the stop token was stopped before the acquisition completed, and as
  /// `basic_lock::try_acquire` does for errors that waiting cannot fix (invalid_argument for a
  /// non-positive lease time, wrong_type, permission_denied, client_closed, ...).
  lease await_resume();

 private:
  friend class basic_lock;
  friend class multi_lock;
  friend class read_lock;
  friend class acquire_and_read_awaitable;
  friend class multi_acquire_awaitable;
  template <class T>
  friend class call_awaitable;
  friend struct detail::awaitable_factory;
  explicit acquire_awaitable(std::shared_ptr<detail::acquire_wait> state) noexcept;
  /// What every await_resume does first: throws the failure or the error, if any.
  void throw_if_failed();
  std::shared_ptr<detail::acquire_wait> state_;
};

/// What `co_await lock.acquire_and_read_async(wait, reads, ...)` waits on: an
/// `acquire_awaitable` (the same rules: nothing sent until awaited, single use, where the
/// coroutine continues, destruction while suspended) that also yields the replies of the reads
/// run under the lock.
class DLOCK_API acquire_and_read_awaitable {
 public:
  /// As `acquire_awaitable::await_ready`.
  bool await_ready() { return acquisition_.await_ready(); }
  /// As `acquire_awaitable::await_suspend`.
  bool await_suspend(std::coroutine_handle<> awaiting) {
    return acquisition_.await_suspend(awaiting);
  }
  /// The lease and the reads' replies (both empty: not acquired within the wait). Throws
  /// `dlock::error`: errc::cancelled if the stop token was stopped first, and as
  /// `basic_lock::try_acquire_and_read` does.
  lease_and_reads await_resume();

 private:
  friend class basic_lock;
  explicit acquire_and_read_awaitable(acquire_awaitable acquisition) noexcept;
  acquire_awaitable acquisition_;
};

/// How an asynchronous call that takes one round trip ended (`lease::extend_async`,
/// `semaphore::release_async`, `countdown_latch::count_down_async`, ...): `value` if it succeeded,
/// else `error` (a `dlock::errc`, compare `r.error == dlock::errc::wrong_type`) and `message`, the
/// words the blocking form would have thrown (the server's own, where it answered).
template <class T>
struct call_result {
  T value{};
  std::error_code error;
  std::string message;
};

/// The same for a call that yields nothing.
template <>
struct call_result<void> {
  std::error_code error;
  std::string message;
};

/// What `co_await` on such a call waits on: `co_await latch.count_down_async()`. Yields `T`
/// (nothing for void) or throws `dlock::error` with what the blocking form throws.
/// As `acquire_awaitable`: nothing is sent until it is awaited, single use, and the coroutine
/// continues **on the client's I/O thread** (where code must not block) unless the result was
/// known before it could suspend. Destroying it while its coroutine is suspended on it means the
/// coroutine is never resumed; a call already sent still runs on the server, and a latch's wait
/// is cancelled. Of these, only a latch's wait takes a stop token.
template <class T>
class call_awaitable {
  // Where the completion leaves the value for await_resume (none for void). Shared, so that a
  // completion that comes after the coroutine was destroyed writes into memory that still exists.
  using slot = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

 public:
  /// As `acquire_awaitable::await_ready`.
  bool await_ready() { return call_.await_ready(); }
  /// As `acquire_awaitable::await_suspend`.
  bool await_suspend(std::coroutine_handle<> awaiting) { return call_.await_suspend(awaiting); }
  /// The call's value; throws `dlock::error` as the blocking form of the call does (and
  /// errc::cancelled for a latch's wait whose stop token was stopped first).
  T await_resume() {
    call_.throw_if_failed();
    if constexpr (!std::is_void_v<T>) return std::move(*value_);
  }

 private:
  friend struct detail::awaitable_factory;
  call_awaitable(acquire_awaitable call, std::shared_ptr<slot> value) noexcept
      : call_(std::move(call)), value_(std::move(value)) {}
  acquire_awaitable call_;
  std::shared_ptr<slot> value_;
};

}  // namespace dlock
