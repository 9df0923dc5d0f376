// dlock/multi_lock.hpp — several locks taken as one, all or nothing, without deadlock.
#pragma once

#include "dlock/export.hpp"

#include <chrono>
#include <concepts>
#include <coroutine>
#include <cstdint>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "dlock/async.hpp"
#include "dlock/lease.hpp"
#include "dlock/lock.hpp"

namespace dlock {

/// The holds of one multi-lock acquisition: one lease per name, each with its own fencing
/// token. Move-only; destroying it releases every hold (never throws).
class DLOCK_API multi_lease {
 public:
  multi_lease() = default;
  explicit multi_lease(std::vector<lease> holds) noexcept : holds_(std::move(holds)) {}
  /// True if it holds all the names.
  bool held() const noexcept { return !holds_.empty(); }
  explicit operator bool() const noexcept { return held(); }
  /// True while every hold is valid.
  bool valid() const noexcept;
  /// The holds, in the multi-lock's name order (sorted, see `multi_lock`).
  const std::vector<lease>& holds() const noexcept { return holds_; }
  /// The fencing token of the hold on `name` (0 if not held here).
  std::uint64_t fence(const std::string& name) const noexcept;
  /// Releases every hold; true if the server confirmed them all. Never throws.
  bool release() noexcept;
  /// Hands the holds over to the caller (in name order), leaving this object empty.
  std::vector<lease> take() noexcept { return std::exchange(holds_, {}); }

 private:
  std::vector<lease> holds_;
};

/// How an asynchronous multi-lock acquisition ended: granted (`held` has every name), not
/// acquired within the wait (all empty), or failed (`error` is a `dlock::errc` and `message` says
/// why, with the server's own text when the server refused).
struct multi_acquire_result {
  multi_lease held;
  std::error_code error;
  std::string message;
};

/// Completion of an asynchronous multi-lock acquisition. Runs on the client's I/O thread; do not
/// block in it.
using multi_acquire_callback = std::function<void(multi_acquire_result result)>;

namespace detail {
struct async_access;
}  // namespace detail

/// What `co_await multi.acquire_async(wait, ...)` waits on: an `acquire_awaitable` (the same
/// rules: nothing sent until awaited, single use, the coroutine continues on the client's I/O
/// thread, destruction while suspended cancels) that yields every name's hold.
class DLOCK_API multi_acquire_awaitable {
 public:
  /// As `acquire_awaitable::await_ready`.
  bool await_ready() { return acquisition_.await_ready(); }
  /// As `acquire_awaitable::await_suspend`.
  bool await_suspend(std::coroutine_handle<> awaiting) {
    return acquisition_.await_suspend(awaiting);
  }
  /// Every name's hold, or an empty multi_lease if the wait ended first. Throws `dlock::error`:
  /// errc::cancelled if the stop token was stopped first, and as `multi_lock::try_acquire_for`.
  multi_lease await_resume();

 private:
  friend class multi_lock;
  explicit multi_acquire_awaitable(acquire_awaitable acquisition) noexcept;
  acquire_awaitable acquisition_;
};

/// Several reentrant locks taken as one: all names or none. When every name lives on one node
/// in one slot (a standalone server or Sentinel master, or names sharing a hash tag on a
/// cluster), one script call takes all the free ones or none. Otherwise the names are taken one
/// by one in one global order (sorted by name bytes), each within what is left of the wait, and
/// any partial holds are released if the wait ends: two multi-locks over overlapping names
/// never deadlock, whatever order their names were given in. Each name is an ordinary
/// reentrant lock (Redisson's RLock layout), so single-name lockers exclude it and vice versa.
///
/// The holds are owned as a reentrant lock's are: by the calling thread, or by
/// `lease_options::owner`; a name the owner already holds is re-entered (and shares that hold's
/// fencing token). The lease options apply to every hold: watchdog or fixed lease, and
/// `on_lost`, which runs once for each hold that is lost. RedLock always takes the names one by
/// one, each by majority. Copyable; thread-safe.
class DLOCK_API multi_lock {
 public:
  /// The names, sorted and de-duplicated.
  const std::vector<std::string>& names() const noexcept { return names_; }
  /// One attempt at all names. Throws as `basic_lock::try_acquire`.
  multi_lease try_acquire(const lease_options& options = {});
  /// Waits up to `wait` for all names. Returns an empty multi_lease if the wait ends first (no
  /// partial hold is kept). Throws as `basic_lock::try_acquire_for`.
  multi_lease try_acquire_for(std::chrono::milliseconds wait, const lease_options& options = {});
  /// Waits for as long as it takes.
  multi_lease acquire(const lease_options& options = {});

  /// Asynchronous acquisition of every name, as `basic_lock::acquire_async`'s callback form:
  /// returns at once; `done` (anything a `multi_acquire_callback` can be made from) runs once,
  /// on the client's I/O thread, with every name held, nothing (the wait ended: `wait` negative
  /// = one attempt, `milliseconds::max()` = forever), or the error the blocking calls would
  /// throw (argument errors too; never thrown from here). No thread is parked while it waits.
  /// The holds are owned by `options.owner`, else by the calling thread. The handle cancels it:
  /// `done` then sees errc::cancelled, and it holds nothing (the names taken so far are
  /// released; a grant on its way is undone, as `acquire_handle::cancel` describes).
  template <std::convertible_to<multi_acquire_callback> Callback>
  acquire_handle acquire_async(std::chrono::milliseconds wait, Callback&& done,
                               lease_options options = {}) {
    return start_async(wait, multi_acquire_callback(std::forward<Callback>(done)),
                       std::move(options), false);
  }
  /// The same for a C++20 coroutine: `dlock::multi_lease held = co_await
  /// multi.acquire_async(10s);`, with `basic_lock::acquire_async`'s awaitable rules (it starts
  /// when awaited, the coroutine continues on the I/O thread, stopping `cancel` ends the wait
  /// with errc::cancelled holding nothing, and without `options.owner` the holds have an owner
  /// of their own, not the calling thread).
  [[nodiscard]] multi_acquire_awaitable acquire_async(std::chrono::milliseconds wait);
  [[nodiscard]] multi_acquire_awaitable acquire_async(std::chrono::milliseconds wait,
                                                      const lease_options& options);
  [[nodiscard]] multi_acquire_awaitable acquire_async(std::chrono::milliseconds wait,
                                                      const lease_options& options,
                                                      std::stop_token cancel);

 private:
  friend class client;
  friend struct detail::async_access;
  /// The callback form, and dlock/asio.hpp's: `own_owner` gives holds without `options.owner` an
  /// owner of their own instead of the calling thread.
  acquire_handle start_async(std::chrono::milliseconds wait, multi_acquire_callback done,
                             lease_options options, bool own_owner);
  multi_lock(std::shared_ptr<detail::lock_core> core, std::vector<std::string> names);
  std::shared_ptr<detail::lock_core> core_;
  std::vector<std::string> names_;
};

}  // namespace dlock
