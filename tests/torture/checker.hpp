// The torture run's checker: reads every worker log and the nemesis log (event_log.hpp) after the
// run and works out whether a safety promise broke. Definitions (same name, times are the
// workers' CLOCK_MONOTONIC readings):
//
//   Grant B is later than grant A if B's t_call > A's t_grant: B's acquisition began after A was
//   granted, so the server granted B after A.
//
//   A write W of grant A is a stale write accepted if W was accepted and some grant B later than
//   A has a resource op (accepted or rejected) with opseq < W's opseq: a newer holder had touched
//   the resource before W landed, so correct fencing would have rejected W.
//
//   A grant A was lost in fact if some grant B later than A got its GRANT before A's release
//   started, or A's release reported that A no longer held the lock.
//
//   A loss is signalled if on_lost ran before A's release started, or A's valid() check returned
//   false, or A's release did not report a clean release; not signalled otherwise (the library
//   let the holder believe all was well).
//
//   Critical sections overlap when two grants of a name have intersecting [t_grant, release
//   start] (a holder that never released, killed or cut off by the end of the run, ends at its
//   last logged event).
//
//   A hold is believed from its grant until the earliest of: its release starting, its lease's
//   last known validity (lease::valid_until() at the release: the holder's own clock said it
//   could count on the lock until then), its on_lost, its valid() check saying false, and (a
//   holder killed in it) its last logged event. Two holds in conflict: believed at the same time
//   where the kind allows no such thing (two holds of a lock, a write hold beside any other hold
//   of the same read-write lock, more holds of a semaphore than its permits). A conflict is
//   signalled if the newer holder, or every older one in it, was told (on_lost, valid() false,
//   or a release that was not clean): either side can be the one that lost, a stale master's
//   late grant being the newer. It lasts from the newer grant until the newer hold, or enough
//   of the older ones, stop being believed.
//
//   Where the deployment says two masters may follow a fault (check_input::two_master_faults),
//   untold conflicts and unsignalled losses whose grant falls in such a window are counted
//   apart from the others.
//
//   Countdown latches: latch_check.hpp. Where the report speaks of stretches without a grant
//   (during and after faults), a latch operation that completed counts as one.
//
//   Unavailability after a holder died: a worker SIGKILLed inside a grant (granted, and not yet
//   at its valid() check, after which it writes and releases) → the next GRANT of that name by
//   anyone.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "latch_check.hpp"

namespace dlock::torture {

struct check_input {
  std::vector<std::string> worker_logs{};
  std::string nemesis_log{};
  std::int64_t t_start = 0;  ///< the run's workload window, CLOCK_MONOTONIC ns
  std::int64_t t_end = 0;
  int permits = 1;  ///< each semaphore's permits
  /// The events around a failure are quoted from this far before it to half as far after.
  std::int64_t excerpt_ns = 1'000'000'000;
  /// The fault kinds that may lose acknowledged writes made without replica acks (a latch's).
  std::vector<std::string> write_losing_faults{};
  /// Faults after which two masters may each grant a lock with nobody told (Sentinel without
  /// acks): untold conflicts and unsignalled losses from such a fault's start to `two_master_ns`
  /// after its end are counted apart, as the deployment's documented limit.
  std::vector<std::string> two_master_faults{};
  std::int64_t two_master_ns = 0;
  /// A latch waiter hears of the 0 within this (latch_check.hpp).
  std::int64_t latch_release_bound_ns = 500'000'000;
};

struct check_report {
  double seconds = 0;
  std::uint64_t malformed_lines = 0;  ///< log lines the checker could not read (must be 0)
  std::uint64_t workers_started = 0;
  std::uint64_t grants = 0;
  std::uint64_t not_acquired = 0;                 ///< waits that ended without the lock
  std::map<std::string, std::uint64_t> releases;  ///< by outcome
  std::map<std::string, std::uint64_t> errors;    ///< "where code" → count
  std::map<std::string, std::uint64_t> faults;    ///< by kind, done
  std::map<std::string, std::uint64_t> faults_failed;

  std::uint64_t overlap_pairs = 0;
  std::uint64_t overlap_grants = 0;

  std::uint64_t ops = 0;
  std::uint64_t reads_rejected = 0;
  std::uint64_t writes_rejected = 0;  ///< stale writes rejected by the fence
  std::uint64_t writes_accepted = 0;
  std::uint64_t stale_writes_accepted = 0;  ///< must be 0
  std::uint64_t lost_updates =
      0;  ///< accepted writes that replaced a value their grant had not read

  std::uint64_t on_lost_calls = 0;
  std::uint64_t valid_false = 0;
  std::uint64_t lost_in_fact = 0;
  std::uint64_t signalled_on_lost = 0;          ///< on_lost before the release started
  std::uint64_t signalled_valid = 0;            ///< else valid() false at the check
  std::uint64_t signalled_release = 0;          ///< else only the release's outcome
  std::uint64_t not_signalled = 0;              ///< must be 0
  std::uint64_t not_signalled_two_masters = 0;  ///< else, in a two-masters window

  std::uint64_t holder_kills = 0;
  double max_unavailable_after_kill_ms = 0;
  double max_no_grant_ms = 0;      ///< the longest stretch of the run in which nobody got any lock
  double no_grant_over_1s_ms = 0;  ///< all stretches of more than 1 s without a grant, summed
  /// By fault kind: the longest time from a fault's end to the next grant of any lock.
  std::map<std::string, double> max_recovery_ms;
  /// Faults after whose end nobody got any lock again: (kind, ms from the fault's end to the
  /// run's end). One that ended well before the end means the service never came back.
  std::vector<std::pair<std::string, double>> never_recovered;

  /// client_stats summed over the workers that exited cleanly at the end.
  std::uint64_t stats_workers = 0, stats_born_dead = 0, stats_leases_lost = 0,
                stats_release_failures = 0;

  /// Conflicting holds (see above): how many, how many the older holder was never told of
  /// (must be 0), and the longest.
  std::uint64_t conflicts = 0;
  std::uint64_t conflicts_unsignalled = 0;
  std::uint64_t conflicts_untold_two_masters = 0;  ///< untold, in a two-masters window
  double max_conflict_ms = 0;

  /// Multi-locks: waits that ended without the lock but left a name held (must be 0).
  std::uint64_t multi_leftovers = 0;

  /// Fair locks: from a clean release to the next grant of the name while others waited,
  /// outside every server fault's window: the longest (a dead waiter at the head of the queue
  /// holds the others up until its place lapses).
  double max_fair_handoff_ms = 0;
  std::uint64_t fair_handoffs = 0;

  /// By fault kind: each fault's longest stretch without any grant that overlaps its window,
  /// sorted (for the median and the maximum).
  std::map<std::string, std::vector<double>> unavailable_ms;

  /// Countdown latches (latch_check.hpp).
  latch_report latch;

  std::vector<std::string> stale_write_examples;
  std::vector<std::string> unsignalled_examples;
  std::vector<std::string> conflict_examples;
  /// For the first failures: every log line around them, in time order.
  std::vector<std::string> excerpts;
};

check_report check(const check_input& in);

}  // namespace dlock::torture
