// The nemesis: injects one fault at a time into a torture run, at random intervals, and logs
// each with its start and end (event_log.hpp, "F" lines). Kinds come in shuffled rounds (every
// enabled kind once per round, in a random order), so even a short run sees each of them.
#pragma once

#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "event_log.hpp"

namespace dlock::torture {

class cluster;

enum class fault_kind {
  kill,                ///< SIGKILL of a worker (preferably a holder), respawned
  stop,                ///< SIGSTOP of a worker for 0.2–2 leases, then SIGCONT
  restart_persistent,  ///< lock server SIGKILLed and started again with its AOF
  restart_empty,       ///< lock server SIGKILLed and started again with its data gone
  debug_sleep,         ///< DEBUG SLEEP 0.5–2 leases
  client_kill,         ///< CLIENT KILL TYPE normal SKIPME yes
  client_pause,        ///< CLIENT PAUSE WRITE or ALL for 0.5–2 leases
  proxy_latency,       ///< 10–80 ms latency and 0–40 ms jitter for 2–4 s
  proxy_stall,         ///< all bytes held for 0.5–2 leases
  proxy_half_open,     ///< connections become black holes; new ones too, for 0.5–2 leases
  proxy_reset,         ///< every proxied connection reset
};

/// Every kind, in declaration order.
const std::vector<fault_kind>& all_faults();
/// "kill", "restart-persistent", ...
std::string_view fault_name(fault_kind k);
/// Parses a comma-separated list of names ("all" for every kind, "none" or "" for none). Throws
/// std::invalid_argument naming an unknown kind.
std::vector<fault_kind> parse_faults(std::string_view list);

struct nemesis_options {
  std::vector<fault_kind> kinds{};
  std::chrono::milliseconds lease{1000};  ///< fault durations scale with the workers' lease
  std::chrono::milliseconds gap_min{1000}, gap_max{3000};
  std::uint64_t seed = 1;
  std::string log_path{};
};

class nemesis {
 public:
  nemesis(cluster& c, nemesis_options o);
  /// Injects faults until `deadline` (a fault under way is finished first). Between faults the
  /// cluster respawns workers that exit. False if the run was interrupted.
  bool run_until(std::chrono::steady_clock::time_point deadline);

 private:
  /// Injects one fault and logs it; false if interrupted (the fault is still undone).
  bool inject(fault_kind k);
  std::chrono::milliseconds scaled(double from, double to);
  std::chrono::milliseconds uniform(std::chrono::milliseconds from, std::chrono::milliseconds to);
  void restart_lock_server(bool keep_data);

  cluster& c_;
  nemesis_options o_;
  std::mt19937_64 rng_;
  event_writer log_;
  std::vector<fault_kind> round_;
};

}  // namespace dlock::torture
