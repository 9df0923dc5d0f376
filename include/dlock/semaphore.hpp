// dlock/semaphore.hpp — counting semaphores: Redisson's RSemaphore, and leased, owned permits
// in Redisson's RPermitExpirableSemaphore layout.
#pragma once

#include "dlock/export.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "dlock/async.hpp"
#include "dlock/lease.hpp"
#include "dlock/lock.hpp"

namespace dlock {

/// What a semaphore's key holds now.
struct semaphore_info {
  /// False if the semaphore has never been given permits (or was deleted).
  bool exists = false;
  /// Permits free now.
  std::int64_t available = 0;
  /// Leased semaphores: permits held now, each with its id (hex) and remaining lease
  /// (`milliseconds::max()`: a permit taken without expiry).
  std::vector<std::pair<std::string, std::chrono::milliseconds>> leased;
  /// Who took the permits out now, per grant, where the dlock client that took them recorded it
  /// (the key for a leased semaphore's permit is its id, as in `leased`; a plain semaphore's
  /// grants have no id of their own: its key is the grant's mark). Grants made by Redisson or
  /// by a client with client_options::record_holder off are missing.
  std::vector<std::pair<std::string, holder_identity>> holders;
  /// Clients subscribed to the semaphore's channel: waiters, in dlock or Redisson.
  std::int64_t waiters = 0;
};

/// What both semaphores share: setting, adding and counting free permits, and looking at them.
/// Every call here is one script on the semaphore's server (two for `info`), and each has a form
/// that parks no thread. Not available over RedLock: errc::invalid_argument, nothing sent.
class DLOCK_API basic_semaphore : public basic_lock {
 public:
  /// Sets the number of free permits to `permits` if the semaphore has none set yet. Returns
  /// true if it set them. Throws errc::invalid_argument for a negative count (or on the
  /// client's I/O thread: use the `_async` form there), errc::wrong_type if the name holds
  /// something else, and as `try_acquire` for server errors.
  bool try_set_permits(std::int64_t permits);
  /// `try_set_permits` without parking a thread: returns at once, and `done` runs once, on the
  /// client's I/O thread, with what it would have returned or the error it would have thrown
  /// (argument errors too, with nothing sent). Never throws. Do not block in `done`. The other
  /// `_async` calls here work the same way.
  void try_set_permits_async(std::int64_t permits,
                             std::function<void(call_result<bool>)> done) noexcept;
  /// The same for a C++20 coroutine: `bool set = co_await sem.try_set_permits_async(5);`, with
  /// `call_awaitable`'s rules (sent when awaited; continues on the I/O thread).
  [[nodiscard]] call_awaitable<bool> try_set_permits_async(std::int64_t permits);
  /// Adds `permits` free permits (negative: removes them, possibly below zero), creating the
  /// semaphore if needed, and wakes waiters. Throws as `try_set_permits`.
  void add_permits(std::int64_t permits);
  /// `add_permits` without parking a thread, as `try_set_permits_async`.
  void add_permits_async(std::int64_t permits,
                         std::function<void(call_result<void>)> done) noexcept;
  /// `co_await sem.add_permits_async(n)`, as `try_set_permits_async`.
  [[nodiscard]] call_awaitable<void> add_permits_async(std::int64_t permits);
  /// Free permits now (0 if the semaphore does not exist); a leased semaphore counts expired
  /// permits, which the next acquisition reclaims. Throws as `try_set_permits`.
  std::int64_t available() const;
  /// `available` without parking a thread, as `try_set_permits_async`.
  void available_async(std::function<void(call_result<std::int64_t>)> done) const noexcept;
  /// `co_await sem.available_async()`, as `try_set_permits_async`.
  [[nodiscard]] call_awaitable<std::int64_t> available_async() const;
  /// Everything about it at one instant (a leased semaphore's expired permits not yet reclaimed
  /// are listed with a remaining lease of 0). Throws as `try_set_permits`.
  semaphore_info info() const;
  /// `info` without parking a thread, as `try_set_permits_async`.
  void info_async(std::function<void(call_result<semaphore_info>)> done) const noexcept;
  /// `co_await sem.info_async()`, as `try_set_permits_async`.
  [[nodiscard]] call_awaitable<semaphore_info> info_async() const;

 protected:
  using basic_lock::basic_lock;
};

/// Permits in Redisson's RSemaphore layout: the string `NAME` holds the count of free permits;
/// the channel `redisson_sc:{NAME}` carries the count after each release. Acquiring takes
/// `lease_options::permits` at once (all or none) and returns a lease; destroying or releasing
/// it gives them back. As in Redisson, the permits themselves have no owner and no expiry on
/// the server: a process that dies holding them never gives them back (use
/// `leased_semaphore` when that matters), so the lease's `lease_time` and watchdog do not
/// apply and `valid()` stays true until it is released. Waiting is event-driven: a release
/// publishes the new free count, and each client wakes that many of its waiters (at least one),
/// not all of them. Thread-safe.
class DLOCK_API DLOCK_CAPABILITY("dlock::semaphore") semaphore : public basic_semaphore {
 public:
  /// Gives back `permits` permits that were not taken through a lease (Redisson's release:
  /// anyone may call it). Throws as `try_set_permits`.
  void release(std::int64_t permits = 1);
  /// `release` without parking a thread: returns at once, and `done` runs once, on the client's
  /// I/O thread, with the error `release` would have thrown, if any. Never throws, argument
  /// errors included (they come through `done`). Safe on the I/O thread, where `release` is
  /// refused. Do not block in `done`.
  void release_async(std::int64_t permits, std::function<void(call_result<void>)> done) noexcept;
  /// The same for a C++20 coroutine: `co_await sem.release_async(2);`, with `call_awaitable`'s
  /// rules (sent when awaited; continues on the I/O thread); throws as `release`.
  [[nodiscard]] call_awaitable<void> release_async(std::int64_t permits = 1);

 private:
  friend class client;
  semaphore(std::shared_ptr<detail::lock_core> core, std::string name);
};

/// Leased, owned permits in Redisson's RPermitExpirableSemaphore layout: `NAME` holds the count
/// of free permits and the sorted set `{NAME}:timeout` holds every permit taken, by its random
/// 16-byte id, scored by its expiry (server time, ms). Each acquisition takes
/// `lease_options::permits` permits at once and returns a lease that works as a lock's does:
/// renewed by the watchdog (or a fixed lease time), lost loudly, released by its destructor.
/// A permit whose holder died comes back by itself when its lease ends (the next acquisition
/// reclaims it and wakes waiters). Only the holder of a permit id can release it: a foreign or
/// forged id is refused and changes nothing. Thread-safe.
class DLOCK_API DLOCK_CAPABILITY("dlock::leased_semaphore") leased_semaphore
    : public basic_semaphore {
 public:
  /// Releases the permit(s) with id `permit_id` (hex, as `lease::permit_id` gives it), from any
  /// process. Returns true if released, false if no such permit is held (released already,
  /// expired, or an id that was never issued): nothing changes then. Throws
  /// errc::invalid_argument for an id that is not hex of whole 16-byte permits.
  bool release(std::string_view permit_id);
  /// `release(permit_id)` without parking a thread: `done` runs once, on the client's I/O
  /// thread, with `value` what `release` would have returned or the error it would have thrown.
  /// Never throws; safe on the I/O thread. Do not block in `done`.
  void release_async(std::string_view permit_id,
                     std::function<void(call_result<bool>)> done) noexcept;
  /// The same for a C++20 coroutine: `bool released = co_await sem.release_async(id);` (the id
  /// is copied), with `call_awaitable`'s rules; throws as `release`.
  [[nodiscard]] call_awaitable<bool> release_async(std::string_view permit_id);

 private:
  friend class client;
  leased_semaphore(std::shared_ptr<detail::lock_core> core, std::string name);
};
}  // namespace dlock
