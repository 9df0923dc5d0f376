// The nemesis: injects one fault at a time into a torture run, at random intervals, and logs
// each with its start and end (event_log.hpp, "F" lines). Kinds come in shuffled rounds (every
// enabled kind once per round, in a random order), so even a short run sees each of them. It
// kills and stops workers itself; the deployment (deployment.hpp) injects the rest.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "event_log.hpp"

namespace dlock::torture {

class deployment;
class worker_pool;

/// Every fault a torture run knows; each deployment says which of them it can suffer.
enum class fault_kind {
  // The workers, on every topology.
  kill,  ///< SIGKILL of a worker (preferably a holder), respawned
  stop,  ///< SIGSTOP of a worker for 0.2–2 leases, then SIGCONT
  // A standalone server.
  restart_persistent,  ///< lock server SIGKILLed and started again with its AOF
  restart_empty,       ///< lock server SIGKILLed and started again with its data gone
  debug_sleep,         ///< DEBUG SLEEP 0.5–2 leases
  client_kill,         ///< CLIENT KILL TYPE normal SKIPME yes (every master)
  client_pause,        ///< CLIENT PAUSE WRITE or ALL for 0.5–2 leases (the master)
  // The fault proxy, in front of a standalone server, or a Sentinel or Cluster master (latency:
  // in front of every node).
  proxy_latency,    ///< 10–80 ms latency and 0–40 ms jitter for 2–4 s
  proxy_stall,      ///< all bytes held for 0.5–2 leases
  proxy_half_open,  ///< connections become black holes; new ones too, for 0.5–2 leases
  proxy_reset,      ///< every proxied connection reset
  // Sentinel and Cluster.
  failover,           ///< the master SIGKILLed, a replica promoted; it returns as a replica
  master_stop,        ///< the master SIGSTOPped past the failover time; it returns demoted
  replication_stall,  ///< replicas held behind, then a failover to one of them
  sentinel_kill,      ///< a sentinel SIGKILLed and restarted
  node_stop,          ///< a cluster master SIGSTOPped past the node timeout
  manual_failover,    ///< CLUSTER FAILOVER on a replica (no write lost)
  slot_migration,     ///< the slot of a held lock moved to another master, key by key
  // RedLock.
  master_kill,  ///< one master SIGKILLed and restarted, with its AOF or, after a lease, empty
  partition_minority,  ///< two of five masters cut off (stalled or black-holed) for 0.5–2 leases
  partition_majority,  ///< three of five cut off: acquisitions refused, nobody granted twice
};

/// Every kind, in declaration order.
const std::vector<fault_kind>& all_faults();
/// "kill", "restart-persistent", ...
std::string_view fault_name(fault_kind k);
/// Parses a comma-separated list of names ("all" for every kind of `available`, "none" or ""
/// for none). Throws std::invalid_argument naming an unknown kind or one not in `available`.
std::vector<fault_kind> parse_faults(std::string_view list,
                                     const std::vector<fault_kind>& available);

struct nemesis_options {
  std::vector<fault_kind> kinds{};
  std::chrono::milliseconds lease{1000};  ///< fault durations scale with the workers' lease
  std::chrono::milliseconds gap_min{1000}, gap_max{3000};
  std::uint64_t seed = 1;
  std::string log_path{};
  /// Gives one permit back to the plain semaphore `name` (a kill fault's victim held it).
  std::function<void(const std::string& name)> return_permits{};
};

class nemesis {
 public:
  nemesis(worker_pool& pool, deployment& d, nemesis_options o);
  /// Injects faults until `deadline` (a fault under way is finished first), and past it until
  /// every fault kind was injected once. Between faults the pool respawns workers that exit.
  /// False if the run was interrupted.
  bool run_until(std::chrono::steady_clock::time_point deadline);

 private:
  /// Injects one fault and logs it; false if interrupted (the fault is still undone).
  bool inject(fault_kind k);
  std::chrono::milliseconds uniform(std::chrono::milliseconds from, std::chrono::milliseconds to);

  worker_pool& pool_;
  deployment& deployment_;
  nemesis_options o_;
  std::mt19937_64 rng_;
  event_writer log_;
  std::vector<fault_kind> round_;
};

}  // namespace dlock::torture
