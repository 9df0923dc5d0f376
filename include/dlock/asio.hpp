// dlock/asio.hpp — dlock's acquisitions (a lock, a lock with reads under it, a multi-lock), a
// latch's wait, the calls that take one round trip (releases, a lease's extension, a
// semaphore's release, a latch's count-down) and those that look at or set up a lock, a
// semaphore or a latch (info, is_locked, force_unlock, try_set_permits, count, ...) as asio
// asynchronous operations: any completion token (a callback, asio::use_awaitable,
// asio::deferred, asio::use_future, ...), completions on the handler's executor, per-operation
// cancellation through the handler's cancellation slot. Optional: the one dlock header that
// includes asio (standalone asio, `<asio/...>`, 1.22 or newer: Debian's libasio-dev);
// dlock/dlock.hpp does not include it, and nothing in the dlock library depends on it.
//
//   asio::co_spawn(io, [&]() -> asio::awaitable<void> {
//     dlock::lease held = co_await dlock::async_acquire(lock, 10s, asio::use_awaitable);
//     if (!held) co_return;  // not acquired within 10 s
//     ...
//     co_await dlock::async_release(held, asio::use_awaitable);
//   }, asio::detached);
#pragma once

#include <asio/associated_allocator.hpp>
#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/bind_allocator.hpp>
#include <asio/cancellation_type.hpp>
#include <asio/error.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/post.hpp>
#include <asio/system_executor.hpp>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "dlock/async.hpp"
#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/fencing.hpp"
#include "dlock/latch.hpp"
#include "dlock/lease.hpp"
#include "dlock/lock.hpp"
#include "dlock/multi_lock.hpp"
#include "dlock/read_write_lock.hpp"
#include "dlock/semaphore.hpp"

namespace dlock {

namespace detail {

/// basic_lock's way in for this header, which the library does not compile.
struct async_access {
  static acquire_handle start(basic_lock& lock, std::chrono::milliseconds wait,
                              acquire_callback done, lease_options options) {
    return lock.start_async(wait, std::move(done), std::move(options), true);
  }
  static acquire_handle start_read(basic_lock& lock, std::chrono::milliseconds wait,
                                   std::vector<std::vector<std::string>> reads,
                                   acquire_and_read_callback done, lease_options options) {
    return lock.start_read_async(wait, std::move(reads), std::move(done), std::move(options), true);
  }
  static acquire_handle start_multi(multi_lock& lock, std::chrono::milliseconds wait,
                                    multi_acquire_callback done, lease_options options) {
    return lock.start_async(wait, std::move(done), std::move(options), true);
  }
};

/// One asio operation in flight: the handler, outstanding work on its executor (so that the
/// executor's io_context::run() does not return before the completion), and, for an acquisition,
/// the handle that cancels it. Shared by dlock's completion (on the client's I/O thread) and the
/// cancellation slot's handler.
template <class Handler>
class asio_operation {
 public:
  using executor_type = asio::associated_executor_t<Handler, asio::system_executor>;
  using allocator_type = asio::associated_allocator_t<Handler>;

  explicit asio_operation(Handler&& handler)
      : handler_(std::move(handler)),
        work_(asio::get_associated_executor(*handler_, asio::system_executor())),
        allocator_(asio::get_associated_allocator(*handler_)),
        slot_(asio::get_associated_cancellation_slot(*handler_)) {}

  /// Allocated with the handler's associated allocator.
  static std::shared_ptr<asio_operation> make(Handler&& handler) {
    using rebound = typename std::allocator_traits<allocator_type>::template rebind_alloc<char>;
    const rebound allocator(asio::get_associated_allocator(handler));
    return std::allocate_shared<asio_operation>(allocator, std::move(handler));
  }

  /// Installs the cancellation handler, if the handler has a slot: before the operation starts,
  /// on the initiating thread, as asio's own operations do.
  template <class Cancel>
  void on_cancel(Cancel cancel) {
    if (slot_.is_connected()) slot_.assign(std::move(cancel));
  }

  /// Hands the completion to the handler's executor (never runs it here, on dlock's thread), with
  /// the handler's allocator; the slot is cleared there, before the handler runs.
  template <class... Values>
  static void complete(std::shared_ptr<asio_operation> self, Values... values) {
    auto executor = self->work_.get_executor();
    const auto allocator = self->allocator_;
    const auto keep = self;
    keep->poster_ = std::this_thread::get_id();
    asio::post(executor,
               asio::bind_allocator(
                   allocator, [self = std::move(self), ... values = std::move(values)]() mutable {
                     self->await_posted();
                     if (self->slot_.is_connected()) self->slot_.clear();
                     auto handler = std::move(*self->handler_);
                     self->handler_.reset();
                     // The work ends once the handler has run (this posted call counts until then).
                     auto work = std::move(self->work_);
                     self.reset();
                     std::move(handler)(std::move(values)...);
                   }));
    keep->posted_.store(true, std::memory_order_release);
    keep->posted_.notify_one();
  }

  /// The acquisition's handle, and whether cancellation was asked for before it was known.
  std::mutex mutex;
  acquire_handle handle;
  bool cancel_requested = false;

 private:
  // asio::post still touches the executor's scheduler after it has queued the completion (an
  // io_context signals a sleeping thread after unlocking): the handler, whose end may let the
  // caller stop and destroy that io_context, runs only once dlock's thread is out of post().
  void await_posted() {
    if (std::this_thread::get_id() == poster_) return;  // an executor that ran it inside post()
    while (!posted_.load(std::memory_order_acquire))
      posted_.wait(false, std::memory_order_acquire);
  }
  std::atomic<bool> posted_{false};
  std::thread::id poster_;

  std::optional<Handler> handler_;
  asio::executor_work_guard<executor_type> work_;
  allocator_type allocator_;
  asio::cancellation_slot slot_;
};

template <class Handler>
struct asio_canceller {
  std::shared_ptr<asio_operation<Handler>> op;
  void operator()(asio::cancellation_type type) const {
    // Terminal and partial cancellation: the acquisition ends holding nothing. Total
    // cancellation (no observable side effects at all) is not offered: a grant on its way when
    // the cancellation comes is undone, but it took a fencing token.
    if ((type & (asio::cancellation_type::terminal | asio::cancellation_type::partial)) ==
        asio::cancellation_type::none) {
      return;
    }
    acquire_handle handle;
    {
      std::lock_guard lock(op->mutex);
      op->cancel_requested = true;
      handle = op->handle;
    }
    handle.cancel();  // a no-op while the acquisition has not started (see initiate_acquire)
  }
};

/// Cancelled through the slot (the only way here): asio's code for it, which
/// asio::use_awaitable throws as std::system_error and asio users test for.
inline std::error_code asio_code(std::error_code ec) {
  if (ec == dlock::errc::cancelled) return asio::error::operation_aborted;
  return ec;
}

/// Starts an acquisition for `handler`: `start(op)` starts it with a completion that ends `op`,
/// and returns its handle, which the handler's cancellation slot then reaches.
template <class Handler, class Start>
void start_cancellable(Handler&& handler, Start start) {
  auto op = asio_operation<Handler>::make(std::move(handler));
  op->on_cancel(asio_canceller<Handler>{op});
  auto handle = start(op);
  bool cancel_now = false;
  {
    std::lock_guard lock_op(op->mutex);
    op->handle = handle;
    cancel_now = op->cancel_requested;
  }
  if (cancel_now) handle.cancel();
}

struct initiate_acquire {
  basic_lock lock;  // a copy: deferred tokens initiate later, perhaps after the caller's is gone

  template <class Handler>
  void operator()(Handler&& handler, std::chrono::milliseconds wait, lease_options options) {
    using operation = asio_operation<std::decay_t<Handler>>;
    start_cancellable(std::decay_t<Handler>(std::forward<Handler>(handler)),
                      [&](std::shared_ptr<operation> op) {
                        return async_access::start(
                            lock, wait,
                            [op](acquire_result r) {
                              operation::complete(op, asio_code(r.error), std::move(r.held));
                            },
                            std::move(options));
                      });
  }
};

struct initiate_acquire_and_read {
  basic_lock lock;  // as initiate_acquire's

  template <class Handler>
  void operator()(Handler&& handler, std::chrono::milliseconds wait,
                  std::vector<std::vector<std::string>> reads, lease_options options) {
    using operation = asio_operation<std::decay_t<Handler>>;
    start_cancellable(
        std::decay_t<Handler>(std::forward<Handler>(handler)), [&](std::shared_ptr<operation> op) {
          return async_access::start_read(
              lock, wait, std::move(reads),
              [op](acquire_and_read_result r) {
                operation::complete(op, asio_code(r.error),
                                    lease_and_reads{std::move(r.held), std::move(r.reads)});
              },
              std::move(options));
        });
  }
};

struct initiate_multi_acquire {
  multi_lock lock;  // as initiate_acquire's

  template <class Handler>
  void operator()(Handler&& handler, std::chrono::milliseconds wait, lease_options options) {
    using operation = asio_operation<std::decay_t<Handler>>;
    start_cancellable(std::decay_t<Handler>(std::forward<Handler>(handler)),
                      [&](std::shared_ptr<operation> op) {
                        return async_access::start_multi(
                            lock, wait,
                            [op](multi_acquire_result r) {
                              operation::complete(op, asio_code(r.error), std::move(r.held));
                            },
                            std::move(options));
                      });
  }
};

struct initiate_release {
  template <class Handler>
  void operator()(Handler&& handler, lease held) {
    using operation = asio_operation<std::decay_t<Handler>>;
    auto op = operation::make(std::move(handler));
    held.release_async(
        [op](bool released) { operation::complete(op, std::error_code(), released); });
  }
};

struct initiate_upgrade {
  read_lock lock;      // as initiate_acquire's
  const lease* reads;  // the caller's read hold, looked at only while initiating

  template <class Handler>
  void operator()(Handler&& handler, std::chrono::milliseconds wait) {
    using operation = asio_operation<std::decay_t<Handler>>;
    start_cancellable(std::decay_t<Handler>(std::forward<Handler>(handler)),
                      [&](std::shared_ptr<operation> op) {
                        return lock.upgrade_async(*reads, wait, [op](acquire_result r) {
                          operation::complete(op, asio_code(r.error), std::move(r.held));
                        });
                      });
  }
};

struct initiate_latch_wait {
  countdown_latch latch;  // as initiate_acquire's lock

  template <class Handler>
  void operator()(Handler&& handler, std::chrono::milliseconds wait) {
    using operation = asio_operation<std::decay_t<Handler>>;
    start_cancellable(std::decay_t<Handler>(std::forward<Handler>(handler)),
                      [&](std::shared_ptr<operation> op) {
                        return latch.wait_async(wait, [op](latch_wait_result r) {
                          operation::complete(op, asio_code(r.error), r.reached);
                        });
                      });
  }
};

/// Starts, for `handler`, a call that takes one round trip: `start(done)` starts it with a
/// callback that gets its call_result<T>; the handler gets the error and, unless T is void, the
/// value. Such calls cannot be cancelled (each ends within the client's command timeout).
template <class T, class Handler, class Start>
void start_call(Handler&& handler, Start&& start) {
  using operation = asio_operation<std::decay_t<Handler>>;
  auto op = operation::make(std::decay_t<Handler>(std::forward<Handler>(handler)));
  start([op](call_result<T> r) {
    if constexpr (std::is_void_v<T>) {
      operation::complete(op, asio_code(r.error));
    } else {
      operation::complete(op, asio_code(r.error), std::move(r.value));
    }
  });
}

struct initiate_extend {
  lease* held;  // the caller's, which must outlive the initiation (as asio's I/O objects do)

  template <class Handler>
  void operator()(Handler&& handler, std::chrono::milliseconds lease_time) {
    start_call<bool>(std::forward<Handler>(handler),
                     [&](std::function<void(call_result<bool>)> done) {
                       held->extend_async(lease_time, std::move(done));
                     });
  }
};

struct initiate_write_under_hold {
  lease* held;   // as initiate_extend's
  bool release;  // write_and_release, else write_while_held

  template <class Handler>
  void operator()(Handler&& handler, std::vector<std::vector<std::string>> writes) {
    start_call<std::vector<reply>>(
        std::forward<Handler>(handler),
        [&](std::function<void(call_result<std::vector<reply>>)> done) {
          if (release) {
            held->write_and_release_async(std::move(writes), std::move(done));
          } else {
            held->write_while_held_async(std::move(writes), std::move(done));
          }
        });
  }
};

struct initiate_release_permits {
  semaphore permits;  // as initiate_acquire's lock

  template <class Handler>
  void operator()(Handler&& handler, std::int64_t count) {
    start_call<void>(std::forward<Handler>(handler),
                     [&](std::function<void(call_result<void>)> done) {
                       permits.release_async(count, std::move(done));
                     });
  }
};

struct initiate_release_permit_id {
  leased_semaphore permits;  // as initiate_acquire's lock

  template <class Handler>
  void operator()(Handler&& handler, std::string permit_id) {
    start_call<bool>(std::forward<Handler>(handler),
                     [&](std::function<void(call_result<bool>)> done) {
                       permits.release_async(permit_id, std::move(done));
                     });
  }
};

struct initiate_count_down {
  countdown_latch latch;  // as initiate_acquire's lock

  template <class Handler>
  void operator()(Handler&& handler) {
    start_call<std::int64_t>(std::forward<Handler>(handler),
                             [&](std::function<void(call_result<std::int64_t>)> done) {
                               latch.count_down_async(std::move(done));
                             });
  }
};

/// The initiation of a call that takes one round trip, started by `start(done)` (a copy of the
/// object the call is made on, calling its callback form).
template <class T, class Start>
struct initiate_call {
  Start start;

  template <class Handler>
  void operator()(Handler&& handler) {
    start_call<T>(std::forward<Handler>(handler), start);
  }
};

/// Such a call's completion signature: `void(std::error_code, T)`, or `void(std::error_code)`.
template <class T>
struct call_signature {
  using type = void(std::error_code, T);
};
template <>
struct call_signature<void> {
  using type = void(std::error_code);
};

/// `asio::async_initiate` for such a call.
template <class T, class CompletionToken, class Start>
auto async_call(Start start, CompletionToken&& token) {
  return asio::async_initiate<CompletionToken, typename call_signature<T>::type>(
      initiate_call<T, Start>{std::move(start)}, token);
}

}  // namespace detail

/// Acquires `lock` as an asio asynchronous operation; completion signature
/// `void(std::error_code, dlock::lease)`. Waits up to `wait` (negative: one attempt;
/// `milliseconds::max()`: forever) as `basic_lock::try_acquire_for` does, without parking a
/// thread. Not acquired within the wait is no error: an empty lease.
///
/// Errors: a `dlock::errc` (compare `ec == dlock::errc::wrong_type`), as `try_acquire` throws
/// them (invalid_argument for a non-positive lease time, wrong_type, permission_denied, timeout,
/// client_closed, ...); the server's own words are not carried (the callback form of
/// `basic_lock::acquire_async` has them). With `asio::use_awaitable` an error is thrown as
/// `std::system_error` (not `dlock::error`) with that code.
///
/// Where the handler runs: on its associated executor (`asio::bind_executor`, a coroutine's
/// executor), always through `asio::post`, never inside this call and never on dlock's I/O
/// thread; a handler without one runs on `asio::system_executor` (a thread of asio's system
/// pool), so a plain lambda does not run on your io_context: wrap it in
/// `asio::bind_executor(io, ...)`. Outstanding work is kept on the handler's executor until
/// then, so its `io_context::run()` does not return early. Keep the executor's context alive until
/// the handler has run. Memory comes from the handler's associated allocator.
///
/// Cancellation: the handler's associated cancellation slot (`asio::bind_cancellation_slot`,
/// a coroutine's cancellation state, `asio::experimental::awaitable_operators`' `||`) with
/// `cancellation_type::terminal` or `partial`: the operation completes with
/// `asio::error::operation_aborted` and an empty lease, holding nothing, as
/// `acquire_handle::cancel` describes (a grant on its way is undone on the server). If the
/// completion was already on its way, the cancellation has no effect and the lease is
/// delivered. `total` is not supported (an undone grant still consumed a fencing token).
///
/// Ownership: a reentrant, fair or read-write acquisition without `options.owner` gets an owner
/// of its own, not the initiating thread's (which every coroutine on that thread would share).
///
/// The lock is copied (cheap), so a deferred operation may outlive the caller's lock object.
///
/// Two overloads rather than a default argument: GCC 12 destroys class-type temporaries of a
/// `co_await` expression twice, and a defaulted `lease_options{}` would be one. With GCC 12 pass
/// `options` as a named variable (not `{.lease_time = 5s}` inside the `co_await`).
template <class CompletionToken>
auto async_acquire(const basic_lock& lock, std::chrono::milliseconds wait, CompletionToken&& token,
                   const lease_options& options) {
  return asio::async_initiate<CompletionToken, void(std::error_code, lease)>(
      detail::initiate_acquire{lock}, token, wait, options);
}

/// `async_acquire` with default `lease_options`.
template <class CompletionToken>
auto async_acquire(const basic_lock& lock, std::chrono::milliseconds wait,
                   CompletionToken&& token) {
  return dlock::async_acquire(lock, wait, std::forward<CompletionToken>(token), lease_options{});
}

/// Acquires every name of a multi-lock as an asio asynchronous operation; completion signature
/// `void(std::error_code, dlock::multi_lease)` (empty: not acquired within the wait, no partial
/// hold kept). Errors, where the handler runs, cancellation (the names taken so far are
/// released) and ownership are as `async_acquire`'s for one lock; errors are those
/// `multi_lock::try_acquire_for` throws.
template <class CompletionToken>
auto async_acquire(const multi_lock& lock, std::chrono::milliseconds wait, CompletionToken&& token,
                   const lease_options& options) {
  return asio::async_initiate<CompletionToken, void(std::error_code, multi_lease)>(
      detail::initiate_multi_acquire{lock}, token, wait, options);
}

/// `async_acquire` of a multi-lock with default `lease_options`.
template <class CompletionToken>
auto async_acquire(const multi_lock& lock, std::chrono::milliseconds wait,
                   CompletionToken&& token) {
  return dlock::async_acquire(lock, wait, std::forward<CompletionToken>(token), lease_options{});
}

/// Acquires `lock` and runs `reads` under it, as `basic_lock::try_acquire_and_read` does (one
/// round trip when the lock is free), as an asio asynchronous operation; completion signature
/// `void(std::error_code, dlock::lease_and_reads)`. Waiting, errors (also those
/// `try_acquire_and_read` throws: invalid_argument for an empty command, a RedLock client or a
/// semaphore; lease_lost), where the handler runs, cancellation (until the lock is granted;
/// then the reads' reply is awaited, within the command timeout) and ownership are as
/// `async_acquire`'s. The reads are copied.
template <class CompletionToken>
auto async_acquire_and_read(const basic_lock& lock, std::chrono::milliseconds wait,
                            std::vector<std::vector<std::string>> reads, CompletionToken&& token,
                            const lease_options& options) {
  return asio::async_initiate<CompletionToken, void(std::error_code, lease_and_reads)>(
      detail::initiate_acquire_and_read{lock}, token, wait, std::move(reads), options);
}

/// `async_acquire_and_read` with default `lease_options`.
template <class CompletionToken>
auto async_acquire_and_read(const basic_lock& lock, std::chrono::milliseconds wait,
                            std::vector<std::vector<std::string>> reads, CompletionToken&& token) {
  return dlock::async_acquire_and_read(lock, wait, std::move(reads),
                                       std::forward<CompletionToken>(token), lease_options{});
}

/// Releases `held` as an asio asynchronous operation; completion signature
/// `void(std::error_code, bool released)`. `held` is emptied at once (by this call, also for a
/// deferred token); `released` is what `lease::release` would have returned: true if the server
/// confirmed it, false if the lock was no longer held by this lease, the server could not be
/// reached (the lease then ends at its expiry; the watchdog has stopped renewing it), or the
/// lease was empty. The error code is always success: a release never fails otherwise. The
/// handler runs on its associated executor as `async_acquire`'s does; the operation cannot be
/// cancelled.
template <class CompletionToken>
auto async_release(lease& held, CompletionToken&& token) {
  return asio::async_initiate<CompletionToken, void(std::error_code, bool)>(
      detail::initiate_release{}, token, std::move(held));
}

/// Upgrades the read hold `read_hold` of `lock` to a write hold, as `read_lock::upgrade` does,
/// as an asio asynchronous operation; completion signature `void(std::error_code, dlock::lease)`
/// (empty: the other readers did not leave within `wait`). Errors (upgrade_conflict for a second
/// upgrader, invalid_argument for a hold that is not a live read hold of this lock), where the
/// handler runs and cancellation through the handler's slot are as `async_acquire`'s.
/// `read_hold` is looked at only while the operation is initiated (at once, except with a
/// deferred token): keep it alive until then.
template <class CompletionToken>
auto async_upgrade(const read_lock& lock, const lease& read_hold, std::chrono::milliseconds wait,
                   CompletionToken&& token) {
  return asio::async_initiate<CompletionToken, void(std::error_code, lease)>(
      detail::initiate_upgrade{lock, &read_hold}, token, wait);
}

/// Waits up to `wait` for `latch` to reach 0, as `countdown_latch::wait_for` does, as an asio
/// asynchronous operation; completion signature `void(std::error_code, bool reached)`. Not
/// reached within the wait is no error (`false`). Errors, where the handler runs, and
/// cancellation through the handler's slot (`terminal` or `partial`:
/// `asio::error::operation_aborted`, `false`) are as `async_acquire`'s. The latch is copied.
template <class CompletionToken>
auto async_wait(const countdown_latch& latch, std::chrono::milliseconds wait,
                CompletionToken&& token) {
  return asio::async_initiate<CompletionToken, void(std::error_code, bool)>(
      detail::initiate_latch_wait{latch}, token, wait);
}

/// Counts `latch` down by one, as `countdown_latch::count_down` does, as an asio asynchronous
/// operation; completion signature `void(std::error_code, std::int64_t left)`: the count left
/// (0: the latch is open). Errors and where the handler runs are as `async_acquire`'s; it cannot
/// be cancelled (it ends within the client's command timeout). The latch is copied.
template <class CompletionToken>
auto async_count_down(const countdown_latch& latch, CompletionToken&& token) {
  return asio::async_initiate<CompletionToken, void(std::error_code, std::int64_t)>(
      detail::initiate_count_down{latch}, token);
}

/// Gives back `permits` permits to a semaphore, as `semaphore::release(permits)` does, as an
/// asio asynchronous operation; completion signature `void(std::error_code)`. Errors (also
/// invalid_argument for permits < 1) and where the handler runs are as `async_acquire`'s; it
/// cannot be cancelled. The semaphore is copied.
template <class CompletionToken>
auto async_release(const semaphore& permits_of, std::int64_t permits, CompletionToken&& token) {
  return asio::async_initiate<CompletionToken, void(std::error_code)>(
      detail::initiate_release_permits{permits_of}, token, permits);
}

/// Releases the permit(s) `permit_id` of a leased semaphore, as `leased_semaphore::release(id)`
/// does, as an asio asynchronous operation; completion signature `void(std::error_code, bool
/// released)`. Errors and where the handler runs are as `async_acquire`'s; it cannot be
/// cancelled. The semaphore and the id are copied.
template <class CompletionToken>
auto async_release(const leased_semaphore& permits_of, std::string_view permit_id,
                   CompletionToken&& token) {
  return asio::async_initiate<CompletionToken, void(std::error_code, bool)>(
      detail::initiate_release_permit_id{permits_of}, token, std::string(permit_id));
}

/// Extends `held` to `lease_time` from now, as `lease::extend` does, as an asio asynchronous
/// operation; completion signature `void(std::error_code, bool extended)` (false: no longer held;
/// the lease is then lost). Errors (errc::lease_lost for an empty or lost lease,
/// invalid_argument for a non-positive time, ...) and where the handler runs are as
/// `async_acquire`'s; it cannot be cancelled. `held` is referred to until the operation is
/// initiated (at once, except for a deferred token): keep it alive until then.
template <class CompletionToken>
auto async_extend(lease& held, std::chrono::milliseconds lease_time, CompletionToken&& token) {
  return asio::async_initiate<CompletionToken, void(std::error_code, bool)>(
      detail::initiate_extend{&held}, token, lease_time);
}

/// Runs `writes` while `held` still holds its lock, as `lease::write_while_held` does, as an
/// asio asynchronous operation; completion signature `void(std::error_code,
/// std::vector<dlock::reply>)`, one reply per write. Errors (errc::lease_lost: nothing written,
/// the lease lost; invalid_argument: nothing sent; ...) and where the handler runs are as
/// `async_acquire`'s; it cannot be cancelled. `held` is referred to until the operation is
/// initiated (at once, except for a deferred token): keep it alive until then.
template <class CompletionToken>
auto async_write_while_held(lease& held, std::vector<std::vector<std::string>> writes,
                            CompletionToken&& token) {
  return asio::async_initiate<CompletionToken, void(std::error_code, std::vector<reply>)>(
      detail::initiate_write_under_hold{&held, false}, token, std::move(writes));
}

/// `lease::write_and_release` as an asio asynchronous operation: the writes and the release in
/// one round trip; `held` is emptied when the operation is initiated (unless the arguments are
/// refused). Completion signature, errors and the rest as `async_write_while_held`'s.
template <class CompletionToken>
auto async_write_and_release(lease& held, std::vector<std::vector<std::string>> writes,
                             CompletionToken&& token) {
  return asio::async_initiate<CompletionToken, void(std::error_code, std::vector<reply>)>(
      detail::initiate_write_under_hold{&held, true}, token, std::move(writes));
}

// ---- Looking and setting up: each as its blocking form, as an asio operation. Errors (the
// blocking form's, as `dlock::errc` codes) and where the handler runs are as `async_acquire`'s;
// none can be cancelled (each ends within the client's command timeout). The object is copied.

/// `basic_lock::is_locked`; completion signature `void(std::error_code, bool locked)`.
template <class CompletionToken>
auto async_is_locked(const basic_lock& lock, CompletionToken&& token) {
  return detail::async_call<bool>([lock](auto done) { lock.is_locked_async(std::move(done)); },
                                  std::forward<CompletionToken>(token));
}

/// `basic_lock::info`; completion signature `void(std::error_code, dlock::lock_info)`.
template <class CompletionToken>
auto async_info(const basic_lock& lock, CompletionToken&& token) {
  return detail::async_call<lock_info>([lock](auto done) { lock.info_async(std::move(done)); },
                                       std::forward<CompletionToken>(token));
}

/// `basic_lock::force_unlock(check)`; completion signature `void(std::error_code,
/// dlock::lock_info removed)`.
template <class CompletionToken>
auto async_force_unlock(const basic_lock& lock, force_unlock_check check, CompletionToken&& token) {
  return detail::async_call<lock_info>(
      [lock, check](auto done) { lock.force_unlock_async(check, std::move(done)); },
      std::forward<CompletionToken>(token));
}

/// `basic_semaphore::try_set_permits`; completion signature `void(std::error_code, bool set)`.
template <class CompletionToken>
auto async_try_set_permits(const basic_semaphore& permits_of, std::int64_t permits,
                           CompletionToken&& token) {
  return detail::async_call<bool>(
      [sem = permits_of, permits](auto done) mutable {
        sem.try_set_permits_async(permits, std::move(done));
      },
      std::forward<CompletionToken>(token));
}

/// `basic_semaphore::add_permits`; completion signature `void(std::error_code)`.
template <class CompletionToken>
auto async_add_permits(const basic_semaphore& permits_of, std::int64_t permits,
                       CompletionToken&& token) {
  return detail::async_call<void>(
      [sem = permits_of, permits](auto done) mutable {
        sem.add_permits_async(permits, std::move(done));
      },
      std::forward<CompletionToken>(token));
}

/// `basic_semaphore::available`; completion signature `void(std::error_code, std::int64_t)`.
template <class CompletionToken>
auto async_available(const basic_semaphore& permits_of, CompletionToken&& token) {
  return detail::async_call<std::int64_t>(
      [sem = permits_of](auto done) { sem.available_async(std::move(done)); },
      std::forward<CompletionToken>(token));
}

/// `basic_semaphore::info`; completion signature `void(std::error_code, dlock::semaphore_info)`.
template <class CompletionToken>
auto async_info(const basic_semaphore& permits_of, CompletionToken&& token) {
  return detail::async_call<semaphore_info>(
      [sem = permits_of](auto done) { sem.info_async(std::move(done)); },
      std::forward<CompletionToken>(token));
}

/// `countdown_latch::try_set_count`; completion signature `void(std::error_code, bool set)`.
template <class CompletionToken>
auto async_try_set_count(const countdown_latch& latch, std::int64_t count,
                         CompletionToken&& token) {
  return detail::async_call<bool>(
      [latch, count](auto done) { latch.try_set_count_async(count, std::move(done)); },
      std::forward<CompletionToken>(token));
}

/// `countdown_latch::count`; completion signature `void(std::error_code, std::int64_t count)`.
template <class CompletionToken>
auto async_count(const countdown_latch& latch, CompletionToken&& token) {
  return detail::async_call<std::int64_t>(
      [latch](auto done) { latch.count_async(std::move(done)); },
      std::forward<CompletionToken>(token));
}

/// `countdown_latch::remove`; completion signature `void(std::error_code, bool existed)`.
template <class CompletionToken>
auto async_remove(const countdown_latch& latch, CompletionToken&& token) {
  return detail::async_call<bool>([latch](auto done) { latch.remove_async(std::move(done)); },
                                  std::forward<CompletionToken>(token));
}

/// `dlock::fenced_set` through a dlock client; completion signature `void(std::error_code,
/// dlock::fenced_write_result)` (a rejected stale write is no error: `written` is false). The
/// client (a handle), the key and the value are copied.
template <class CompletionToken>
auto async_fenced_set(const client& c, std::string_view key, std::string_view value,
                      std::uint64_t fence, CompletionToken&& token) {
  return detail::async_call<fenced_write_result>(
      [c, key = std::string(key), value = std::string(value), fence](auto done) {
        dlock::fenced_set_async(c, key, value, fence, std::move(done));
      },
      std::forward<CompletionToken>(token));
}

}  // namespace dlock
