// dlock/client.hpp — the entry point: a connection to Redis that hands out locks by name.
#pragma once

#include "dlock/export.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/deployment_options.hpp"
#include "dlock/observe.hpp"
#include "dlock/redis/connection_options.hpp"
#include "dlock/redis/reply.hpp"

namespace dlock {

class redis_client;
class reentrant_lock;
class fair_lock;
class read_write_lock;
class semaphore;
class leased_semaphore;
class countdown_latch;
class multi_lock;
struct fenced_write_result;
class simple_lock;

namespace detail {
class lock_core;
struct client_access;
}  // namespace detail

/// Whether a client's I/O thread also busy-polls while the client is loaded
/// (client_options::busy_poll_under_load).
enum class load_polling {
  /// Never: under load it sleeps whenever it has nothing to do.
  never,
  /// When a trial shows it pays: every 2 s a loaded client spends 200 ms comparing the replies
  /// it completes with and without polling, and polls until the next trial only if polling
  /// completed 5 % more. Callers that only take and release locks get the faster mode; callers
  /// with work of their own between round trips keep their vCPU; callers that send at a fixed
  /// rate complete as many either way, and the thread sleeps.
  when_it_pays,
  /// Whenever loaded (while its waits for the next burst of replies are short; see
  /// client_options::busy_poll_under_load): for a client whose callers do little but take and
  /// release locks.
  always,
};

/// Settings of a client: where Redis is, and how leases and waiting behave.
///
/// The deployment is one of: a standalone server (`connection`), a Sentinel-managed master
/// (`sentinel.master_name` set), a Redis Cluster (`cluster_seeds` set), or RedLock over
/// independent masters (`redlock.masters` set). For Sentinel and Cluster, `connection` holds
/// what every data node shares (credentials, database, TLS, timeouts); its host and port are
/// not used. RedLock's masters carry their own.
struct DLOCK_API client_options {
  connection_options connection;
  /// Sentinel: the master's name and the sentinels. Empty master_name: not Sentinel.
  sentinel_options sentinel;
  /// Cluster: one or more nodes of the cluster to read the slot map from. Empty: not a cluster.
  std::vector<connection_options> cluster_seeds;
  /// RedLock: the independent masters and how long each may take. Empty masters: not RedLock.
  redlock_options redlock;
  /// A grant (and a watchdog renewal) counts only once this many replicas acknowledged it
  /// (WAIT after the script, on the same connection). A grant fewer replicas acknowledge
  /// within `replica_ack_timeout` is undone and retried while the caller's wait lasts, then
  /// reported as errc::not_replicated; a renewal they do not acknowledge does not extend the
  /// lease's validity. 0 (the default): the master's word is enough. docs/topologies.md says
  /// what this guarantees under failover and where it ends.
  int min_replica_acks = 0;
  /// How long WAIT waits for `min_replica_acks` replicas. It holds up the connection that
  /// long when replicas lag.
  std::chrono::milliseconds replica_ack_timeout{1'000};
  /// Lease time of watchdog leases (acquisitions without a fixed lease time).
  std::chrono::milliseconds watchdog_lease{30'000};
  /// Fair locks (and writers waiting on a read-write lock): how long a waiter's place lasts
  /// without the waiter renewing it. A waiter renews it at least three times per period while it
  /// waits, so a waiter that dies delays those behind it by at most this long. At least 30 ms.
  std::chrono::milliseconds fair_waiter_lease{5'000};
  /// How often the watchdog renews; 0 means a third of `watchdog_lease`. Must be shorter than
  /// the lease.
  std::chrono::milliseconds watchdog_period{0};
  /// A waiter that hears no unlock message re-checks the lock at least this often, so a lost
  /// message costs at most this long. Must be positive.
  std::chrono::milliseconds max_recheck{1'000};
  /// Command connections the client opens to a standalone server or a Sentinel-managed master
  /// (besides one for pub/sub), 1 to 64. Each lock name's calls always go on the same one,
  /// picked by its cluster hash slot, so they run in the order sent; different names spread
  /// over them, so the server works on one connection's batch while the client handles
  /// another's replies, which raises the throughput of many threads or asynchronous calls on
  /// distinct names. 1 keeps the client to one connection; measure before raising it above 2.
  /// `redis()` uses the first. A cluster's nodes and RedLock's masters get one each, whatever
  /// this says. docs/benchmarks.md (Tuning) has measurements.
  std::size_t command_connections = 2;
  /// How long the client's I/O thread keeps polling after handling replies before it sleeps,
  /// so that a reply arriving meanwhile needs no wake-up of a sleeping thread (on a VM that
  /// wake-up costs more than a loopback round trip). It polls while the recent round trips are
  /// within this time (one outlier among fast ones does not stop it; two in a row do) and
  /// replies come back one at a time (and, as busy_poll_under_load says, while the client is
  /// loaded). Against a server across a network, or for a few callers that pipeline (a release
  /// sent without waiting), it sleeps as soon as it has nothing to do.
  /// It pays most for a lone caller of a server on the same host. It costs CPU on the I/O
  /// thread while it polls: up to this long per burst of replies, most of a core for a lone
  /// caller locking in a tight loop. 0 turns it off, for a client whose CPU matters more than
  /// that latency. 0 to 10 ms. redlock_masters() sets it to 0: with masters that share the
  /// client's cores, polling between their replies takes CPU from the masters still to answer;
  /// set it again for masters on hosts of their own. docs/benchmarks.md (Tuning) has
  /// measurements.
  std::chrono::microseconds busy_poll{50};
  /// Whether to poll while the client is loaded too (4 or more commands in flight on a
  /// connection), provided its recent waits for the next burst of replies average within 1.5 x
  /// busy_poll. The I/O thread then polls most of the time, on a vCPU of its own. That pays
  /// where the callers do little but take and release locks, and costs where they have work of
  /// their own between round trips, on cores they share with the I/O thread. By default a trial
  /// finds out which of the two this client is, and repeats every 2 s
  /// (load_polling::when_it_pays); always and never fix the choice. Each client's trial counts
  /// its own replies only: a process with several loaded clients should share one, or fix the
  /// choice. No effect with busy_poll 0. docs/library.md (Tuning) says more, docs/benchmarks.md
  /// (Tuning) has measurements.
  load_polling busy_poll_under_load = load_polling::when_it_pays;
  /// Leases renewed per script call in the watchdog's pipelined batch.
  std::size_t renewal_batch = 500;
  /// Clock drift allowance: a lease counts as valid for `lease - elapsed - (drift_factor *
  /// lease + drift_floor)`, elapsed counted from when the attempt (or renewal) was sent, on
  /// every topology. 1 % + 2 ms is RedLock's allowance. drift_factor in [0, 0.5).
  double drift_factor = 0.01;
  std::chrono::milliseconds drift_floor{2};
  /// Where fencing tokens come from. Empty (the default): one counter per lock name,
  /// `redisson_lock_token:{NAME}`, as Redisson's fenced lock keeps it; that key stays after the
  /// lock is gone, one per name ever locked. Set to a key name to draw every lock's tokens from
  /// that one counter instead: tokens still strictly increase for each lock (they increase
  /// overall), and locks on millions of names leave no key each. For a standalone server (a
  /// script cannot reach two cluster slots); all clients locking a name must agree on it.
  std::string fence_counter;
  /// Whether each grant records who took it beside the lock (lock_holder::identity, the key
  /// `dlock_holder:{NAME}`), for `dlock status`, `ls` and `watch`. It costs each grant and
  /// renewal a few commands inside the same script, never a round trip (docs/operating.md has
  /// the measurement). Off: nothing is written beside Redisson's layout but the fence counter.
  bool record_holder = true;
  /// What the holder identity says the holder runs: the program's name by default (the first
  /// word of /proc/self/cmdline); `dlock run` puts the command it runs here. At most 512 bytes
  /// are kept; bytes that are not UTF-8 are replaced.
  std::string holder_label;

  /// Called with every event (dlock/observe.hpp) on a thread of the client's own, one event at
  /// a time in the order they happened; empty (the default): no events are built. The thread
  /// only delivers: a slow callback delays later events, never a renewal or a grant. Events
  /// beyond `event_queue_limit` waiting for it are dropped and counted
  /// (client_stats::events_dropped). It must not capture a copy of the client (the client
  /// would own itself and never close; capture what you need from it, or a weak reference of
  /// your own). Blocking calls on the client are allowed. What it throws is swallowed.
  std::function<void(const event&)> on_event;
  /// Called with the lines an operator reads: reconnects, failovers, lost leases, renewal and
  /// release failures, grants undone, server errors with their text (and, at log_level::debug,
  /// every grant and release). Same thread, order and queue as on_event. Empty (the default):
  /// nothing is logged. docs/library.md has an spdlog adapter.
  std::function<void(log_level, std::string_view message)> logger;
  /// The least level `logger` is called with.
  log_level min_log_level = log_level::info;
  /// Events and log lines that may wait for their callbacks; more are dropped (counted). A
  /// closing client delivers what waits for up to 2 s more, then drops the rest. At least 1.
  std::size_t event_queue_limit = 10'000;
  /// Whether the client keeps latency histograms and per-kind, per-prefix counters for
  /// `client::metrics()`. Each grant, release and script reply costs a few atomic additions;
  /// off, metrics() carries the counters alone.
  bool collect_metrics = true;
  /// A name's label in the metrics: by default its first segment, the part before the first
  /// ':' or '/' (the whole name if it has neither). Set it to group names your way; keep the
  /// number of distinct results small.
  std::function<std::string(std::string_view name)> metric_prefix;
  /// Distinct prefixes kept per kind; names beyond them count under "other". At least 1.
  std::size_t metric_prefix_limit = 100;

  /// Options from one URL, the other settings at their defaults: `redis://`, `rediss://`,
  /// `valkey://`, `valkeys://` and `unix://` as connection_options::from_url parses them (a
  /// standalone server), or
  /// `redis-sentinel://[[user:]password@]host1[:port1][,host2[:port2]...][/db][?query]#MASTER`
  /// (Sentinel; ports default to 26379; `valkey-sentinel://` is the same). In the Sentinel form the
  /// user and password are the master's; the sentinels' own come from the query options
  /// `sentinel_user` and `sentinel_password`, the other query options apply to both. Throws
  /// `dlock::error(errc::invalid_url)` naming the part that is wrong (never the password).
  static client_options from_url(std::string_view url);
  /// Options for a Redis Cluster reached through `seed_urls` (redis://, rediss:// or the valkey
  /// forms, database
  /// 0); the first seed's credentials, TLS and timeouts apply to every node. Throws as
  /// from_url does, or errc::invalid_argument for an empty list.
  static client_options cluster(const std::vector<std::string>& seed_urls);
  /// Options for RedLock over the independent masters at `master_urls` (redis://, rediss://
  /// or unix://; each URL's credentials, TLS and timeouts are that master's own), with
  /// busy_poll 0 (see there). Throws as from_url does, or errc::invalid_argument for fewer than
  /// 3 URLs.
  static client_options redlock_masters(const std::vector<std::string>& master_urls);
};

/// A client of one Redis deployment (a server, a Sentinel-managed master, a cluster, or RedLock's
/// independent masters) that hands out locks. Copies are cheap and share the command
/// connections, one I/O thread, one watchdog and one pub/sub subscription per waited-on lock;
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

  /// A fair lock (Redisson RFairLock layout). Throws errc::invalid_argument for an empty name.
  fair_lock fair(std::string name) const;
  /// A read-write lock (Redisson RReadWriteLock layout). Throws as `fair`.
  read_write_lock read_write(std::string name) const;
  /// A semaphore without owners (Redisson RSemaphore layout). Throws as `fair`.
  dlock::semaphore semaphore(std::string name) const;
  /// A semaphore of leased, owned permits (Redisson RPermitExpirableSemaphore layout). Throws
  /// as `fair`.
  dlock::leased_semaphore leased_semaphore(std::string name) const;
  /// A countdown latch (Redisson RCountDownLatch layout). Throws as `fair`.
  countdown_latch latch(std::string name) const;
  /// Several reentrant locks taken all or nothing (dlock/multi_lock.hpp). Throws
  /// errc::invalid_argument for no names or an empty one.
  dlock::multi_lock multi(std::vector<std::string> names) const;
  /// This client's UUID, the prefix of its reentrant owner ids.
  const std::string& id() const noexcept;
  /// The underlying Redis connection, for commands of your own: the server, the current
  /// Sentinel master (it follows failovers), on a cluster the master of slot 0, for RedLock the
  /// first master.
  redis_client& redis() const noexcept;
  /// Runs one command on the node that serves `key`: the server, the current Sentinel master,
  /// the cluster master owning `key`'s slot (MOVED and ASK followed), or RedLock's first master.
  /// For your own commands next to the locks, on any topology. Throws `dlock::error` with the
  /// server's text (errc::server_error, wrong_type, ...), errc::timeout or connection_lost;
  /// errc::invalid_argument when called on the client's I/O thread (inside a callback).
  reply command(std::string_view key, std::initializer_list<std::string_view> args) const;
  /// Every master: the server, the Sentinel master, each cluster master owning slots now, or
  /// each RedLock master
  /// (for commands that must visit them all, such as SCAN). The clients stay valid as long as
  /// this client.
  std::vector<redis_client*> masters() const;
  /// The client's counters (cheap: relaxed atomic reads).
  client_stats stats() const noexcept;
  /// The counters, and with client_options::collect_metrics the latency histograms and the
  /// per-kind, per-prefix figures; write_prometheus turns it into Prometheus's text format.
  /// Thread-safe; copies a few hundred numbers per kind and prefix.
  metrics_snapshot metrics() const;
  const client_options& options() const noexcept;

 private:
  friend struct detail::client_access;  // the fenced writes (fencing.cpp)
  std::shared_ptr<detail::lock_core> core_;
};

}  // namespace dlock
