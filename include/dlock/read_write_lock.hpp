// dlock/read_write_lock.hpp — many readers or one writer, in Redisson's RReadWriteLock layout.
#pragma once

#include "dlock/export.hpp"

#include <chrono>
#include <memory>
#include <stop_token>
#include <string>

#include "dlock/async.hpp"
#include "dlock/lease.hpp"
#include "dlock/lock.hpp"

namespace dlock {

/// The read side of a `read_write_lock`. Any number of owners may hold it at once while no one
/// holds the write side; each owner's read holds are re-entrant. A read hold renewed by the
/// watchdog keeps Redisson's per-hold timeout key (`{NAME}:<owner>:rwlock_timeout:<n>`) alive,
/// so Redisson's readers and dlock's share the lock and neither's release cuts the other's
/// lease short.
///
/// Writers are not starved: while a dlock writer waits, dlock readers that do not already hold
/// a read hold wait behind it (a short-lived intent key, `{NAME}:write_intent`, renewed by the
/// waiting writer and gone within `client_options::fair_waiter_lease` if it dies). The writer
/// holding the intent therefore waits at most for the read holds taken before it; writers
/// waiting behind it take the intent in turn.
/// Redisson's readers do not know that key and may still join.
class DLOCK_API DLOCK_CAPABILITY("dlock::read_lock") read_lock : public basic_lock {
 public:
  /// Turns the read hold `read_hold` (a lease of this lock, held by the calling owner) into a
  /// write hold, waiting up to `wait` for the other readers to leave. New readers wait behind
  /// the upgrade. Returns the write lease (the read hold stays, as after a downgrade; release it
  /// when done), or an empty lease if the wait ended first (the read hold is untouched).
  /// Only one holder may upgrade at a time: a second upgrade attempt meanwhile throws
  /// errc::upgrade_conflict at once, never deadlocks. Throws errc::invalid_argument if
  /// `read_hold` is not a live read hold of this lock, and as `try_acquire` otherwise.
  lease upgrade(const lease& read_hold, std::chrono::milliseconds wait);
  /// `upgrade` without parking a thread: returns at once; `done` runs once, on the client's I/O
  /// thread, with the write lease (empty: the wait ended first), or the error `upgrade` would
  /// have thrown (errc::upgrade_conflict, errc::invalid_argument, ...). Never throws. The handle
  /// cancels it (errc::cancelled; the upgrade's place is handed back and new readers go on).
  /// `read_hold` is only looked at during this call.
  acquire_handle upgrade_async(const lease& read_hold, std::chrono::milliseconds wait,
                               acquire_callback done);
  /// The same for a C++20 coroutine: `dlock::lease w = co_await reads.upgrade_async(r, 10s);`,
  /// with `acquire_awaitable`'s rules (it starts when awaited; the coroutine continues on the I/O
  /// thread; a stop token cancels it). It refers to the read hold, not to the `lease` object: a
  /// hold released before the `co_await` makes it throw errc::invalid_argument.
  [[nodiscard]] acquire_awaitable upgrade_async(const lease& read_hold,
                                                std::chrono::milliseconds wait);
  [[nodiscard]] acquire_awaitable upgrade_async(const lease& read_hold,
                                                std::chrono::milliseconds wait,
                                                std::stop_token cancel);

 private:
  friend class read_write_lock;
  read_lock(std::shared_ptr<detail::lock_core> core, std::string name);
};

/// The write side of a `read_write_lock`: one owner at a time, and no readers meanwhile except
/// the writer's own. Re-entrant; its holder may also take the read side (a downgrade: take the
/// read lock, then release the write lease). The holder field is `<owner>:write`, as in
/// Redisson. A write release publishes `1` on `redisson_rwlock:{NAME}`, which wakes every
/// waiter; a last read release publishes `0`.
class DLOCK_API DLOCK_CAPABILITY("dlock::write_lock") write_lock : public basic_lock {
 private:
  friend class read_write_lock;
  write_lock(std::shared_ptr<detail::lock_core> core, std::string name);
};

/// A read-write lock: a name with a read side and a write side. Cheap to copy; does not talk to
/// the server until one side is acquired.
class DLOCK_API read_write_lock {
 public:
  const std::string& name() const noexcept { return name_; }
  /// The read side.
  read_lock read() const;
  /// The write side.
  write_lock write() const;

 private:
  friend class client;
  read_write_lock(std::shared_ptr<detail::lock_core> core, std::string name);
  std::shared_ptr<detail::lock_core> core_;
  std::string name_;
};

}  // namespace dlock
