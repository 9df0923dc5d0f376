// dlock/lock.hpp — named distributed locks: reentrant and fair (Redisson layouts) and simple
// (SET NX PX). Read-write locks, semaphores, latches and multi-locks have their own headers.
#pragma once

#include "dlock/export.hpp"

#include <chrono>
#include <concepts>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "dlock/async.hpp"
#include "dlock/lease.hpp"
#include "dlock/redis/reply.hpp"
#include "dlock/thread_annotations.hpp"

namespace dlock {

class client;

namespace detail {
class lock_core;
class lock_kind;
struct lock_handle;
struct async_access;
}  // namespace detail

/// Who took a hold, as the dlock client that took it recorded it beside the lock, in the key
/// `dlock_holder:{NAME}` (docs/operating.md): a hash of the hold's owner (a semaphore's permit)
/// to what is below. Written, renewed and removed by the scripts that grant, renew and release
/// the hold, so it lasts as long as the hold. A hold taken by Redisson, node-redlock or any
/// other library has none.
struct holder_identity {
  /// The holder's host name (gethostname).
  std::string host;
  /// The holder's process id.
  std::int64_t pid = 0;
  /// The user the holder ran as.
  std::string user;
  /// client_options::holder_label: the program's name by default; `dlock run`'s command.
  std::string label;
  /// The id of the client that took it (the `<client-uuid>` of a reentrant owner field).
  std::string client_id;
  /// When the server granted the hold (its clock, to the millisecond); a re-entry keeps it.
  std::chrono::system_clock::time_point since{};
};

/// Who holds a lock, as the server sees it.
struct lock_holder {
  /// Reentrant locks: the owner's hash field "<client-uuid>:<thread or owner id>".
  /// Simple locks: the holder's random token.
  std::string owner;
  /// Hold count (always 1 for a simple lock).
  std::int64_t holds = 0;
  /// Who took it, if a dlock client that records it did (nothing for Redisson's holds, or a
  /// client with client_options::record_holder off).
  std::optional<holder_identity> identity{};
};

/// What kind of key a lock name holds.
enum class lock_type {
  none,        ///< nothing: the lock is free
  reentrant,   ///< a hash of owner -> hold count (dlock's reentrant lock, Redisson's RLock)
  simple,      ///< a string holding a token (dlock's simple lock, node-redlock, redsync, redis-py)
  other,       ///< some other Redis type: not a lock
  read_write,  ///< a hash with a `mode` field (dlock's and Redisson's read-write lock)
  fair,        ///< a reentrant lock's hash with a queue of waiters (Redisson's RFairLock)
};

/// A consistent snapshot of a lock, read in one round trip (plus one for `waiters`).
struct lock_info {
  /// What the lock's own key holds: `none` (free), `reentrant` (a hash of holds; `fair` when a
  /// fair lock asks), `simple` or `other`. `kind` below tells the kinds that share a layout apart.
  lock_type type = lock_type::none;
  /// For `lock_type::other`: what the key holds instead, e.g. "a list" or "a hash that is not a
  /// lock". Empty otherwise.
  std::string content;
  /// Every owner and its hold count (one entry for a simple lock).
  std::vector<lock_holder> holders;
  /// Remaining lease; nothing if the lock is free, `milliseconds::max()` if it has no expiry.
  std::optional<std::chrono::milliseconds> ttl;
  /// The newest fencing token issued for this name (0 if none yet).
  std::uint64_t fence = 0;
  /// Clients subscribed to the lock's unlock channel: waiters, in dlock or Redisson.
  std::int64_t waiters = 0;
  /// A fair lock's queue, first in line first (owner ids). Empty otherwise.
  std::vector<std::string> queue;
  /// What kind of lock the name is, judged by its keys alone, whichever lock object asked
  /// (kinds that share a layout are told apart by what they keep beside it): `read_write` for a
  /// lock's hash with a `mode` field; `fair` while a fair lock's queue of waiters
  /// (`redisson_lock_queue:{NAME}`) exists beside a lock's hash or beside no key (the lock free a
  /// moment between two holders: `type` is then `none`); otherwise what the lock's key alone
  /// is: `none`, `reentrant`, `simple` or `other`. A fair lock nobody waits for has no queue, and
  /// is `reentrant`: the two keep the same hash.
  lock_type kind = lock_type::none;
};

/// How an asynchronous acquisition ended: granted (`held` is set), not acquired within the wait
/// (all empty), or failed (`error` is a `dlock::errc` and `message` says why, with the server's
/// own text when the server refused).
struct acquire_result {
  lease held;
  std::error_code error;
  std::string message;
};

/// What `basic_lock::try_acquire_and_read` returns: the lease, and the replies of the reads that
/// ran while it was held.
struct lease_and_reads {
  /// Empty if the lock was not acquired within the wait.
  lease held;
  /// One reply per read, in the order given; empty when `held` is. A read the server refused
  /// (a wrong type, a write, an unknown command) has the server's error reply in its place.
  std::vector<reply> reads;
};

/// How an asynchronous `acquire_and_read_async` ended: as `acquire_result`, with the replies of
/// the reads that ran under the lock when it was granted (empty otherwise).
struct acquire_and_read_result {
  lease held;
  std::vector<reply> reads;
  std::error_code error;
  std::string message;
};

/// Completion of an asynchronous acquisition. Runs on the client's I/O thread; do not block in
/// it.
using acquire_callback = std::function<void(acquire_result result)>;
/// Completion of an asynchronous acquisition that carries reads; same rules.
using acquire_and_read_callback = std::function<void(acquire_and_read_result result)>;

/// How sure `force_unlock` must be that a key is a lock before it deletes it.
enum class force_unlock_check {
  /// Only a key in a lock's layout with an expiry: every lock dlock, Redisson and the SET NX
  /// libraries take has one. A key that merely looks like a lock is left alone.
  layout_and_expiry,
  /// Also a key in this lock object's layout without an expiry (a lock someone left without a
  /// TTL): the caller confirms the kind. Counters are never deleted.
  confirmed_kind,
};

/// What both kinds of lock can do. A lock object is a cheap, copyable handle: a name bound to a
/// client. Copies share their Lockable state (the holds taken through `lock()`/`try_lock*()`).
/// Thread-safe.
///
/// Waiting never polls. A waiter first tries; if the lock is held it listens for the unlock
/// message on the lock's channel (one subscription per lock name per client, shared by all its
/// waiters) and tries again when the message arrives, when the holder's lease runs out, or
/// after `client_options::max_recheck` at the latest. Waiters of one client on one name are
/// served in arrival order.
///
/// Waiting has one hard deadline per call. A negative or zero wait means a single attempt.
/// Not getting the lock is not an error: an empty lease, or `false`.
class DLOCK_API DLOCK_CAPABILITY("dlock::lock") basic_lock {
 public:
  const std::string& name() const noexcept;

  /// One attempt. Returns the lease, or an empty lease if the lock is held by someone else. A
  /// grant whose validity ran out before its reply arrived (a stalled server) is never returned:
  /// it is undone and counts as not acquired.
  /// Throws `dlock::error` (the message carries the server's own text where it has one):
  /// errc::invalid_argument (non-positive lease time, or an owner id on a simple lock),
  /// errc::wrong_type (the name holds something that is not a lock: a list, a JSON string, a
  /// hash of user fields), errc::permission_denied (the ACL forbids a command the lock needs),
  /// errc::read_only (the server is a replica), errc::server_busy (LOADING, BUSY, ...),
  /// errc::timeout / connection_lost (the server did not answer), errc::server_error (others,
  /// such as OOM).
  lease try_acquire(const lease_options& options = {});
  /// Waits up to `wait` for the lock. Returns an empty lease if the wait ends first, however slow
  /// the server is (attempts in flight are bounded by the same deadline). While time remains,
  /// what is temporary is retried: connection failures and reconnects, errc::server_busy
  /// (a restarting server loading its data, a long script, a failover), and born-dead grants;
  /// at the deadline they count as "not acquired". Throws as `try_acquire` for errors that
  /// waiting cannot fix.
  lease try_acquire_for(std::chrono::milliseconds wait, const lease_options& options = {});
  /// As `try_acquire_for`, with an absolute deadline; a deadline in the past means one attempt.
  lease try_acquire_until(std::chrono::steady_clock::time_point deadline,
                          const lease_options& options = {});
  /// Waits for as long as it takes (across server outages: it keeps retrying). Throws as
  /// `try_acquire` for errors that waiting cannot fix.
  lease acquire(const lease_options& options = {});

  /// Waits up to `wait` for the lock as `try_acquire_for` does, and runs `reads` on the lock's
  /// server while this caller holds it: atomically, in order, in one script call that checks
  /// the hold first, so their replies show the data as it was under the lock. When the first
  /// attempt finds the lock free, the reads travel right behind it and the whole call costs
  /// one round trip, where acquiring and then reading costs two; otherwise they run again once
  /// the lock is granted.
  ///
  /// Each read is one command with its arguments, e.g. `{"HGET", "users:17", "funds"}`. They
  /// must be read-only: the server refuses a write among them (Redis 7's `no-writes` script
  /// flag), held or not, and its error takes that read's place. Their keys must live on the
  /// lock's server: on a cluster, in the lock's slot (give them the lock name's hash tag; a read
  /// of a key elsewhere gets the server's error in its place).
  /// Needs Redis 7.0 or later (an older server cannot load the script: its error is thrown,
  /// and nothing is held). Throws as `try_acquire_for`, and `dlock::error` with
  /// errc::invalid_argument (an empty command, or one of more than 4,096 arguments; a RedLock
  /// client: its lock has no single server to read from; a semaphore: its permits have no
  /// holder to check; a call from the client's I/O thread, where it would wait for itself),
  /// errc::lease_lost (the lock was lost before the reads could run; nothing is held), or the
  /// server's error when the reads could not run at all (the lease is released).
  lease_and_reads try_acquire_and_read(std::chrono::milliseconds wait,
                                       const std::vector<std::vector<std::string>>& reads,
                                       const lease_options& options = {});

  /// `try_acquire_and_read` without parking a thread: returns at once; `done` (anything an
  /// `acquire_and_read_callback` can be made from) runs once on the client's I/O thread with the
  /// lease and the reads' replies, an empty result (not acquired within `wait`; negative = one
  /// attempt; `milliseconds::max()` = forever), or the error `try_acquire_and_read` would throw
  /// (argument errors too, never thrown from here). The reads are copied. The handle cancels
  /// the acquisition as `acquire_async`'s does; once the lock is granted, the call ends when the
  /// reads' reply comes (within the connection's command timeout) and cancelling does nothing.
  /// A reentrant acquisition without `options.owner` is owned by the calling thread.
  template <std::convertible_to<acquire_and_read_callback> Callback>
  acquire_handle acquire_and_read_async(std::chrono::milliseconds wait,
                                        std::vector<std::vector<std::string>> reads,
                                        Callback&& done, lease_options options = {}) {
    return start_read_async(wait, std::move(reads),
                            acquire_and_read_callback(std::forward<Callback>(done)),
                            std::move(options), false);
  }
  /// The same for a C++20 coroutine: `auto [held, reads] = co_await lock.acquire_and_read_async(
  /// 10s, reads);`, with `acquire_async`'s awaitable rules (it starts when awaited, the coroutine
  /// continues on the I/O thread, `cancel` ends a wait with errc::cancelled, an acquisition
  /// without `options.owner` has an owner of its own). Yields `lease_and_reads` or throws as
  /// `try_acquire_and_read` does. With GCC 12, make the awaitable in a statement of its own
  /// when `reads` or `options` are written inside the `co_await` (see `acquire_async`).
  [[nodiscard]] acquire_and_read_awaitable acquire_and_read_async(
      std::chrono::milliseconds wait, std::vector<std::vector<std::string>> reads);
  [[nodiscard]] acquire_and_read_awaitable acquire_and_read_async(
      std::chrono::milliseconds wait, std::vector<std::vector<std::string>> reads,
      const lease_options& options);
  [[nodiscard]] acquire_and_read_awaitable acquire_and_read_async(
      std::chrono::milliseconds wait, std::vector<std::vector<std::string>> reads,
      const lease_options& options, std::stop_token cancel);

  /// Asynchronous acquisition: returns at once; `done` (anything an `acquire_callback` can be
  /// made from) runs on the client's I/O thread, exactly once, when the lock is granted, the
  /// wait (`wait`; negative = one attempt; `milliseconds::max()` = forever) ends, the
  /// acquisition is cancelled, or an error occurs. No thread is parked while it waits. Never
  /// throws; argument errors are reported through `done`. A reentrant acquisition is owned by
  /// `options.owner`, else by the calling thread. The handle returned cancels it
  /// (`acquire_handle::cancel`: `done` then sees errc::cancelled); ignoring it is fine.
  template <std::convertible_to<acquire_callback> Callback>
  acquire_handle acquire_async(std::chrono::milliseconds wait, Callback&& done,
                               lease_options options = {}) {
    return start_async(wait, acquire_callback(std::forward<Callback>(done)), std::move(options),
                       false);
  }
  /// The same for a C++20 coroutine: `dlock::lease l = co_await lock.acquire_async(10s);`.
  /// Yields the lease (empty if not acquired within `wait`) or throws `dlock::error`; the
  /// acquisition starts when awaited, and the coroutine continues on the client's I/O thread
  /// (see `acquire_awaitable`: do not block there). Stopping `cancel` while it waits ends it
  /// with errc::cancelled, holding nothing; a token stopped before the `co_await` sends
  /// nothing. Without `options.owner`, a reentrant acquisition has an owner of its own, not the
  /// calling thread.
  ///
  /// GCC 12 mishandles temporaries of class type inside a `co_await` expression (they are
  /// destroyed twice): pass `options` as a named variable, or make the awaitable in a statement
  /// of its own (`auto acquiring = lock.acquire_async(10s, {.lease_time = 5s});`, then
  /// `co_await acquiring;`). Clang 14 has no such trouble.
  [[nodiscard]] acquire_awaitable acquire_async(std::chrono::milliseconds wait);
  [[nodiscard]] acquire_awaitable acquire_async(std::chrono::milliseconds wait,
                                                const lease_options& options);
  [[nodiscard]] acquire_awaitable acquire_async(std::chrono::milliseconds wait,
                                                const lease_options& options,
                                                std::stop_token cancel);
  /// The same, as a future: yields the lease (empty if not acquired) or throws `dlock::error`.
  std::future<lease> acquire_future(std::chrono::milliseconds wait, lease_options options = {});

  /// True if anyone holds the lock (one EXISTS). Throws the server's errors as `try_acquire`
  /// does, and errc::invalid_argument on the client's I/O thread (use `is_locked_async` there).
  bool is_locked() const;
  /// `is_locked` without parking a thread: returns at once, and `done` runs once, on the
  /// client's I/O thread, with the answer or the error `is_locked` would have thrown. Never
  /// throws. Do not block in `done`. (All the `_async` calls below work the same way.)
  void is_locked_async(std::function<void(call_result<bool>)> done) const noexcept;
  /// The same for a C++20 coroutine: `bool locked = co_await lock.is_locked_async();`, with
  /// `call_awaitable`'s rules (sent when awaited; continues on the I/O thread).
  [[nodiscard]] call_awaitable<bool> is_locked_async() const;
  /// Who holds it, or nothing if it is free. Throws errc::wrong_type if the key is not a lock of
  /// this kind.
  std::optional<lock_holder> holder() const;
  /// The lock's remaining lease, or nothing if it is not held. A lock without expiry (created by
  /// someone else without a TTL) reports `milliseconds::max()`.
  std::optional<std::chrono::milliseconds> remaining_ttl() const;
  /// The newest fencing token issued for this name (0 if none yet).
  std::uint64_t fence() const;
  /// How many clients are subscribed to the lock's unlock channel: waiters elsewhere.
  std::int64_t waiting_clients() const;
  /// Everything about the lock at one instant: type, holders, TTL, fencing token, waiters.
  /// Throws as `is_locked`.
  lock_info info() const;
  /// `info` without parking a thread, as `is_locked_async`.
  void info_async(std::function<void(call_result<lock_info>)> done) const noexcept;
  /// `co_await lock.info_async()`, as `is_locked_async`.
  [[nodiscard]] call_awaitable<lock_info> info_async() const;
  /// Deletes the lock whoever holds it and wakes its waiters (a fair lock's first waiter too,
  /// whatever kind this lock object is); returns what it removed (type
  /// `none` if there was no lock). The holder learns of it at its next renewal
  /// (`lease_lost_reason::not_held`). Throws errc::wrong_type, deleting nothing, if the name
  /// holds a key that is not a lock by `check` (a list, a JSON string, a hash of user fields,
  /// a counter, a lock-like key without expiry unless confirmed), and as `try_acquire` for
  /// server errors.
  lock_info force_unlock(force_unlock_check check = force_unlock_check::layout_and_expiry) const;
  /// `force_unlock` without parking a thread, as `is_locked_async`; a key that is not a lock
  /// comes through `done` as errc::wrong_type, and nothing is deleted.
  void force_unlock_async(force_unlock_check check,
                          std::function<void(call_result<lock_info>)> done) const noexcept;
  /// `co_await lock.force_unlock_async()`, as `is_locked_async`.
  [[nodiscard]] call_awaitable<lock_info> force_unlock_async(
      force_unlock_check check = force_unlock_check::layout_and_expiry) const;

  // ---- Lockable (std::unique_lock, std::scoped_lock, std::lock) ----
  // Holds taken through these are kept inside the lock object (shared by its copies), per
  // thread; unlock() releases the calling thread's most recent one.

  /// Waits for the lock as `acquire()` does. Throws `dlock::error` if it cannot be acquired.
  void lock() DLOCK_ACQUIRE();
  /// One attempt; false if held elsewhere. Throws on server errors.
  bool try_lock() DLOCK_TRY_ACQUIRE(true);
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& wait) DLOCK_TRY_ACQUIRE(true) {
    return keep(try_acquire_for(std::chrono::ceil<std::chrono::milliseconds>(wait)));
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline)
      DLOCK_TRY_ACQUIRE(true) {
    const auto left = deadline - Clock::now();
    return keep(try_acquire_for(std::chrono::ceil<std::chrono::milliseconds>(left)));
  }
  /// Releases the calling thread's most recent hold taken through `lock()`/`try_lock*()`.
  /// Never throws: if the thread holds nothing here, or the server cannot be reached, the
  /// failure is counted in `client::stats().release_failures` and the lease's expiry is the
  /// safety net.
  void unlock() noexcept DLOCK_RELEASE();
  /// Holds the calling thread took through the Lockable functions of this object and its copies.
  std::size_t local_holds() const noexcept;

 protected:
  basic_lock(std::shared_ptr<detail::lock_core> core, std::string name,
             const detail::lock_kind& kind);

  std::shared_ptr<detail::lock_handle> handle_;

 private:
  friend struct detail::async_access;
  bool keep(lease l);
  /// Both asynchronous forms, and dlock/asio.hpp's: `own_owner` gives a reentrant acquisition
  /// without `options.owner` an owner of its own instead of the calling thread.
  acquire_handle start_async(std::chrono::milliseconds wait, acquire_callback done,
                             lease_options options, bool own_owner);
  /// The same for `acquire_and_read_async`.
  acquire_handle start_read_async(std::chrono::milliseconds wait,
                                  std::vector<std::vector<std::string>> reads,
                                  acquire_and_read_callback done, lease_options options,
                                  bool own_owner);
};

/// A reentrant lock with Redisson's RLock layout (a hash of owner → hold count), so dlock and
/// Redisson exclude each other on the same name. The owner is the calling thread (or an explicit
/// owner id); the same owner may acquire it again and must release it as often. Only the
/// owner can release a hold; a release by anyone else is refused and changes nothing.
/// The last release publishes the unlock message, waking waiters here and in Redisson.
class DLOCK_API DLOCK_CAPABILITY("dlock::reentrant_lock") reentrant_lock : public basic_lock {
 public:
  /// True if the calling thread holds the lock (asks the server).
  bool held_by_current_thread() const;
  /// The calling thread's hold count on the server (0 if it holds nothing).
  std::int64_t hold_count() const;
  /// Same, for an explicit owner id.
  std::int64_t hold_count(const std::string& owner) const;

 private:
  friend class client;
  reentrant_lock(std::shared_ptr<detail::lock_core> core, std::string name);
};

/// A fair reentrant lock with Redisson's RFairLock layout (the RLock hash, plus a queue list
/// `redisson_lock_queue:{NAME}` and a deadline zset `redisson_lock_timeout:{NAME}`): waiters
/// across all processes are granted the lock in the order they first asked for it.
///
/// Unlike Redisson's, deadlines come from the server's clock (`TIME` in the scripts), never a
/// client's, and a waiter's place is a lease of its own (`client_options::fair_waiter_lease`)
/// that the waiter renews while it waits: a waiter that dies leaves the queue within that
/// lease instead of stalling it for minutes. A release wakes only the next waiter, on its own
/// channel `redisson_lock__channel:{NAME}:<owner>`, so a hand-off costs the next holder one
/// attempt, not one per waiting client. A waiter that gives up (its wait ends) leaves the queue
/// at once. Ownership and re-entry work as for `reentrant_lock`; a single attempt
/// (`try_acquire`) does not barge: it succeeds only if nobody is queued.
class DLOCK_API DLOCK_CAPABILITY("dlock::fair_lock") fair_lock : public basic_lock {
 public:
  /// The owner ids waiting in the queue now, first in line first (one round trip).
  std::vector<std::string> queue() const;

 private:
  friend class client;
  fair_lock(std::shared_ptr<detail::lock_core> core, std::string name);
};

/// A simple, non-reentrant lock with the layout of node-redlock, redsync and redis-py: the key
/// holds a random 128-bit token, set with SET NX PX; release and extension compare the token.
/// Mutually exclusive with those libraries on the same name. A second acquisition by the same
/// thread waits like anyone else's.
class DLOCK_API DLOCK_CAPABILITY("dlock::simple_lock") simple_lock : public basic_lock {
 private:
  friend class client;
  simple_lock(std::shared_ptr<detail::lock_core> core, std::string name);
};

}  // namespace dlock
