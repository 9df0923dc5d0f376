// dlock/observe.hpp — what a client tells the service around it: events as they happen, log
// lines for operators, and metrics in Prometheus's text format. No library beyond the standard
// one is needed; docs/library.md (Observing a client) shows the wiring, docs/operating.md the
// metric names and what to alert on.
#pragma once

#include "dlock/export.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/lease.hpp"

namespace dlock {

/// What happened (client_options::on_event).
enum class event_type {
  /// A lock, or a semaphore's permits, granted to this client: `name`, `kind`, `owner`, `fence`
  /// and `waited` (from the call to the grant) are set.
  acquired,
  /// A hold released and confirmed by the server; `held` says for how long it was held.
  released,
  /// A release the server could not confirm (unreachable, timed out) or found no longer held;
  /// `detail` says which. The lock ends at its expiry at the latest.
  release_failed,
  /// A lease lost before its release (its on_lost ran): `lost_reason` and `detail` say why,
  /// `held` for how long it had been held.
  lost,
  /// A watchdog renewal failed while the lease was still valid: `valid_until` says until when
  /// it stays valid unless a later renewal succeeds, `detail` what failed. Not yet a loss.
  renewal_failed,
  /// A grant undone rather than handed out: `undone_because` says why (it arrived after its
  /// validity ran out, or too few replicas acknowledged it). The wait goes on.
  grant_undone,
  /// A connection to `node` dropped; `detail` says how. Commands wait for the reconnect.
  connection_lost,
  /// A connection to `node` is back after a drop.
  reconnected,
  /// Sentinel: the client follows a new master, `node`.
  master_switched,
  /// Cluster: a MOVED redirect sent a command about `name`'s slot to `node`.
  slot_moved,
  /// A waiter that heard no unlock message found the lock free on its bounded re-check
  /// (client_options::max_recheck): the message was lost, or the holder's lease ran out
  /// without a release. `name` and `kind` are set.
  woken_without_message,
};

/// "acquired", "released", ..., as the enumerator is spelled.
DLOCK_API std::string_view to_string(event_type t) noexcept;

/// Why a grant was undone (event_type::grant_undone).
enum class undo_cause {
  /// Its reply came after the grant's validity had run out (a stalled server or network).
  born_dead,
  /// Fewer replicas than client_options::min_replica_acks acknowledged it in time.
  not_replicated,
};

/// One event. Fields that do not apply to its type are left empty or zero.
struct event {
  event_type type = event_type::acquired;
  /// When the client saw it (the system clock).
  std::chrono::system_clock::time_point at{};
  /// The lock's name; empty for connection events.
  std::string name{};
  /// The lock's kind: "reentrant", "simple", "fair", "read", "write", "semaphore" or
  /// "leased_semaphore"; empty for connection events.
  std::string_view kind{};
  /// The hold's owner, as the server keeps it (a reentrant owner "<client-uuid>:<thread>", a
  /// simple lock's token, a permit id, a semaphore grant's id).
  std::string owner{};
  /// acquired: the grant's fencing token.
  std::uint64_t fence = 0;
  /// acquired: how long the caller waited for the grant.
  std::chrono::microseconds waited{0};
  /// released, release_failed, lost: how long the hold had been held.
  std::chrono::microseconds held{0};
  /// lost: why.
  std::optional<lease_lost_reason> lost_reason{};
  /// renewal_failed: how long the lease stays valid without a successful renewal.
  std::chrono::system_clock::time_point valid_until{};
  /// grant_undone: why.
  std::optional<undo_cause> undone_because{};
  /// Connection events, master_switched, slot_moved: the node, "host:port".
  std::string node{};
  /// The server's or the system's own words where there are some (a renewal's error, a loss's
  /// cause, a dropped connection's error).
  std::string detail{};
};

/// The event as one line of text, what the logger writes for it: "lock 'jobs:report' lost
/// (expired: no renewal succeeded in time) after 31.2 s".
DLOCK_API std::string describe(const event& e);

/// How much a log line matters (client_options::logger).
enum class log_level { debug, info, warning, error };

/// "debug", "info", "warning", "error".
DLOCK_API std::string_view to_string(log_level l) noexcept;

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
  /// Writes (grants, renewals) fewer replicas acknowledged than min_replica_acks asks.
  std::uint64_t not_replicated = 0;
  /// Cluster: MOVED and ASK redirects followed, and slot maps fetched.
  std::uint64_t moved_redirects = 0;
  std::uint64_t ask_redirects = 0;
  std::uint64_t slot_map_refreshes = 0;
  /// Sentinel: times the client moved to another master.
  std::uint64_t master_switches = 0;
  /// RedLock: attempts that no majority granted (each released on every master), answers
  /// that came after their round was decided, and fence write-backs sent (one per master that
  /// drew a lower token than its grant's; none when every master drew the same).
  std::uint64_t redlock_misses = 0;
  std::uint64_t redlock_late_answers = 0;
  std::uint64_t redlock_fence_raises = 0;
  /// Connections dropped, and connections back after a drop (every node's).
  std::uint64_t connection_losses = 0;
  std::uint64_t reconnects = 0;
  /// Waiters that found the lock free on their bounded re-check, not told by a message.
  std::uint64_t woken_without_message = 0;
  /// Events and log lines handed to their callbacks, and those dropped because the queue was
  /// full (client_options::event_queue_limit) or the client closed before their turn.
  std::uint64_t events_delivered = 0;
  std::uint64_t events_dropped = 0;
};

/// A latency histogram: how many observations fell at or below each upper bound.
struct histogram_snapshot {
  /// Upper bounds in seconds, ascending; observations above the last fall in the overflow
  /// bucket (Prometheus's "+Inf").
  std::vector<double> upper_bounds{};
  /// Observations per bucket, not cumulative: upper_bounds.size() + 1 entries.
  std::vector<std::uint64_t> counts{};
  /// Every observation, and their sum in seconds.
  std::uint64_t count = 0;
  double sum_seconds = 0;
};

/// The metrics of the locks of one kind whose names share a prefix
/// (client_options::metric_prefix).
struct lock_metrics {
  std::string_view kind{};  ///< as event::kind spells it
  std::string prefix{};     ///< the names' prefix; "other" beyond metric_prefix_limit
  /// How acquisitions ended: granted (re-entries included), not acquired (held by others
  /// until the wait ended), cancelled, failed with an error.
  std::uint64_t granted = 0, not_acquired = 0, cancelled = 0, failed = 0;
  /// How holds ended: released (confirmed or not), lost by expiry, lost to a renewal that
  /// found the lock no longer held.
  std::uint64_t released = 0, lost_expired = 0, lost_not_held = 0;
  /// From the call to the grant, for grants; from the grant to the release or loss, per hold.
  histogram_snapshot wait{}, hold{};
};

/// One command kind's round trips (metrics_snapshot::round_trips).
struct round_trip_metrics {
  std::string_view command{};  ///< "acquire", "release" or "renew"
  histogram_snapshot seconds{};
};

/// A client's metrics at one moment (client::metrics()).
struct metrics_snapshot {
  /// The client's counters (also in client::stats()).
  client_stats counters{};
  /// Per lock kind and name prefix, in the order first seen. Empty with
  /// client_options::collect_metrics off.
  std::vector<lock_metrics> locks{};
  /// Script round trips (send to reply) per command kind. Empty with collect_metrics off.
  std::vector<round_trip_metrics> round_trips{};
  /// How late each watchdog round started behind its schedule (a busy I/O thread, a paused
  /// process). Empty with collect_metrics off.
  histogram_snapshot renewal_lag{};
};

/// Writes `m` in Prometheus's text exposition format (version 0.0.4): `dlock_`-prefixed names,
/// seconds as the unit, counters ending in `_total`, `# HELP` and `# TYPE` before each family,
/// label values escaped and made valid UTF-8. Serve it from your own `/metrics` handler, with
/// content type `text/plain; version=0.0.4`. One snapshot per exposition: the text of two
/// clients' snapshots would repeat the families. docs/operating.md lists the names. Throws what
/// `out` throws, if it was told to.
DLOCK_API void write_prometheus(const metrics_snapshot& m, std::ostream& out);

}  // namespace dlock
