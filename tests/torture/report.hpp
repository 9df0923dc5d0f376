// The torture run's report, as text or JSON, and its verdict.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "checker.hpp"
#include "fault_proxy.hpp"
#include "nemesis.hpp"

namespace dlock::torture {

/// A fault that ended this many leases before the run did and was never followed by a grant fails
/// the run: recovery takes a lease or two (a dead holder's lease running out, a reconnect).
inline constexpr int never_recovered_leases = 10;

/// How the run was set up, for the report's header.
struct run_info {
  std::string topology = "standalone";
  std::string deployment{};  ///< deployment::describe()
  std::string kinds{};
  int replicas = 0;  ///< --replicas: min_replica_acks
  /// What the docs promise here: false, no hold is ever granted while a conflicting one is
  /// believed; true, it can happen (grants lost with data or in a failover) but the older holder
  /// is told, within `conflict_bound_ms`.
  bool may_grant_twice = false;
  double conflict_bound_ms = 0;
  /// Faults after which two masters may grant with nobody told (deployment::two_master_faults).
  std::vector<fault_kind> two_master_faults{};
  /// A fair lock's hand-off while others wait, dead waiters at the head included, within this.
  double fair_handoff_bound_ms = 0;
  std::uint64_t seed = 0;
  int workers = 0;
  int names = 0;
  std::vector<fault_kind> faults{};
  std::string writes = "fenced";  ///< --writes
  std::uint64_t min_grants = 0;
  std::int64_t lease_ms = 1000;  ///< --lease-ms
  std::string dir{};
  int unexpected_worker_exits = 0;
  proxy_counters proxy{};
};

/// Why the run failed; empty if it passed. A run fails if a stale write was accepted, an update
/// was lost, a lost lease went unsignalled, two holds conflicted where the deployment promises
/// they never do (or where it allows it, the older holder was not told, or not within
/// `conflict_bound_ms`), a failed multi-lock wait left a name held, a fair lock's hand-off took
/// longer than `fair_handoff_bound_ms`, a latch waiter was released before 0 or missed a 0
/// that lasted, it made fewer than `min_grants` grants, an enabled
/// fault kind never happened, nobody got a lock again after a fault that ended more than
/// `never_recovered_leases` leases before the run did, or the checker could not read every log
/// line.
std::vector<std::string> verdict(const check_report& r, const run_info& info);

std::string text_report(const check_report& r, const run_info& info,
                        const std::vector<std::string>& failures);
std::string json_report(const check_report& r, const run_info& info,
                        const std::vector<std::string>& failures);

}  // namespace dlock::torture
