// dlock/client.hpp — the entry point: a connection to Redis that hands out locks by name.
#pragma once

#include "dlock/export.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "dlock/redis/connection_options.hpp"

namespace dlock {

class redis_client;
class reentrant_lock;
class simple_lock;

namespace detail {
class lock_core;
}

/// Settings of a client: where Redis is, and how leases and waiting behave.
struct DLOCK_API client_options {
  connection_options connection;
  /// Lease time of watchdog leases (acquisitions without a fixed lease time).
  std::chrono::milliseconds watchdog_lease{30'000};
  /// How often the watchdog renews; 0 means a third of `watchdog_lease`. Must be shorter than
  /// the lease.
  std::chrono::milliseconds watchdog_period{0};
  /// A waiter that hears no unlock message re-checks the lock at least this often, so a lost
  /// message costs at most this long. Must be positive.
  std::chrono::milliseconds max_recheck{1'000};
  /// Leases renewed per script call in the watchdog's pipelined batch.
  std::size_t renewal_batch = 500;
  /// Where fencing tokens come from. Empty (the default): one counter per lock name,
  /// `redisson_lock_token:{NAME}`, as Redisson's fenced lock keeps it; that key stays after the
  /// lock is gone, one per name ever locked. Set to a key name to draw every lock's tokens from
  /// that one counter instead: tokens still strictly increase for each lock (they increase
  /// overall), and locks on millions of names leave no key each. For a standalone server (a
  /// script cannot reach two cluster slots); all clients locking a name must agree on it.
  std::string fence_counter;

  /// `connection_options::from_url(url)` with the other settings at their defaults.
  static client_options from_url(std::string_view url);
};

/// What a client is doing, for monitoring and tests.
struct client_stats {
  std::uint64_t grants = 0;            ///< successful acquisitions (re-entries included)
  std::uint64_t attempts = 0;          ///< acquire scripts sent
  std::uint64_t releases = 0;          ///< holds released
  std::uint64_t release_failures = 0;  ///< releases the server could not confirm
  std::uint64_t leases_lost = 0;
  std::uint64_t renewal_rounds = 0;   ///< watchdog periods that renewed at least one lease
  std::uint64_t renewal_calls = 0;    ///< renew scripts sent (one per batch)
  std::uint64_t leases_renewed = 0;   ///< individual lease renewals
  std::uint64_t watched_leases = 0;   ///< leases the watchdog currently renews
  std::uint64_t unlock_messages = 0;  ///< unlock messages received by waiters
  /// Grants not handed out because their validity had run out before their reply arrived (a
  /// stalled server or network): each was undone and the wait went on.
  std::uint64_t grants_born_dead = 0;
};

/// A client of one Redis server that hands out locks. Copies are cheap and share one
/// connection, one I/O thread, one watchdog and one pub/sub subscription per waited-on lock;
/// everything closes when the last copy, lock and lease is gone (asynchronous acquisitions still
/// waiting then complete with errc::client_closed). Do not let the last of them go inside a
/// callback, on the client's own I/O thread. Thread-safe.
///
/// Each client has a random UUID; reentrant holds are owned by "<uuid>:<thread id>" (or an
/// explicit owner id), as in Redisson, so two clients never share ownership.
class DLOCK_API client {
 public:
  /// Connects. Throws `dlock::error` as `redis_client` does (errc::invalid_url,
  /// connect_failed, auth_failed, tls_failed), or errc::invalid_argument for inconsistent
  /// options (a non-positive lease or recheck interval, a watchdog period not shorter than the
  /// lease, a zero batch).
  explicit client(client_options options);
  /// Connects to `url` with default lease settings.
  explicit client(std::string_view url);

  /// A reentrant lock (Redisson RLock layout) named `name`. Throws errc::invalid_argument for an
  /// empty name. Cheap; does not talk to the server.
  reentrant_lock reentrant(std::string name) const;
  /// A simple, non-reentrant lock (the `SET NAME token NX PX` layout of node-redlock, redsync
  /// and redis-py). Throws errc::invalid_argument for an empty name.
  simple_lock simple(std::string name) const;

  /// This client's UUID, the prefix of its reentrant owner ids.
  const std::string& id() const noexcept;
  /// The underlying Redis connection, for commands of your own.
  redis_client& redis() const noexcept;
  client_stats stats() const noexcept;
  const client_options& options() const noexcept;

 private:
  std::shared_ptr<detail::lock_core> core_;
};

}  // namespace dlock
