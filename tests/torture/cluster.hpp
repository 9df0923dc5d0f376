// What a torture run stands on: the lock server (AOF on, so it can come back with or without its
// data), the resource server (healthy, never faulted; fenced writes only), the fault proxy in front
// of the lock server, the controller's direct admin connection to it, and the worker processes,
// respawned whenever one exits. Everything is stopped by PID when the cluster is destroyed, and
// dies with the controller (PR_SET_PDEATHSIG) if it is killed.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "dlock/dlock.hpp"
#include "embedded/process.hpp"
#include "embedded/redis_server.hpp"
#include "fault_proxy.hpp"

namespace dlock::torture {

struct cluster_options {
  std::string dir{};  ///< where the worker logs go
  std::string worker_program{};
  int workers = 8;
  int names = 4;
  std::uint64_t seed = 1;
  std::chrono::milliseconds lease{1000};
  std::chrono::milliseconds recheck{200};
  std::chrono::milliseconds command_timeout{300};
  std::chrono::milliseconds connect_timeout{300};
  std::chrono::milliseconds wait{2000};
  int long_work_ppm = 100;
  std::string appendfsync = "always";
  /// "fenced": the resource on the resource server, fenced ops; "held": on the lock server, ops
  /// through lease::write_while_held (worker.cpp), and no resource server is started.
  std::string writes = "fenced";
};

/// Ctrl-C and SIGTERM: the controller's handlers write to a pipe so waits can watch it.
void install_interrupt_handlers();
bool interrupted() noexcept;

class cluster {
 public:
  explicit cluster(cluster_options o);
  ~cluster();
  cluster(const cluster&) = delete;
  cluster& operator=(const cluster&) = delete;

  embedded::redis_server& lock_server() { return *lock_; }
  fault_proxy& proxy() { return *proxy_; }
  /// A direct connection to the lock server (not through the proxy), for DEBUG, CLIENT KILL and
  /// CLIENT PAUSE. It reconnects by itself after a restart.
  redis_client& admin() { return *admin_; }

  void start_workers();
  /// Waits until `deadline`, respawning workers that exit meanwhile. False if interrupted.
  bool wait_until(std::chrono::steady_clock::time_point deadline);

  struct victim {
    int slot;
    std::string worker;  ///< the worker's id, as in its log
    bool holder;         ///< its log's last line said it was inside a grant, before the write
  };
  /// A worker to fault, preferably one that holds a lock right now (its last logged event is
  /// its grant or its read): killing or pausing a holder is what tests the lock. Waits up to
  /// `patience` for one to appear, then takes anyone.
  victim pick_victim(std::mt19937_64& rng,
                     std::chrono::milliseconds patience = std::chrono::milliseconds(500));
  /// SIGKILL, reaped, and a new worker started in its place.
  void kill_and_respawn(int slot);
  void signal(int slot, int sig);

  /// SIGTERM to every worker, up to `grace` for them to exit (each logs its stats), then SIGKILL.
  void stop_workers(std::chrono::milliseconds grace);
  /// Every worker log this run wrote, respawned workers' included.
  const std::vector<std::string>& worker_logs() const { return logs_; }
  /// Workers that exited without being told to (a crash in the library or the worker).
  int unexpected_exits() const { return unexpected_exits_; }

 private:
  struct worker_slot {
    std::unique_ptr<embedded::child_process> process;
    int pidfd = -1;
    std::string id;
    std::string log;
  };
  void spawn(int slot);
  void reap(worker_slot& w);

  cluster_options o_;
  std::unique_ptr<embedded::redis_server> resource_;
  std::unique_ptr<embedded::redis_server> lock_;
  std::unique_ptr<fault_proxy> proxy_;
  std::unique_ptr<redis_client> admin_;
  std::vector<worker_slot> workers_;
  std::vector<std::string> logs_;
  int next_id_ = 1;
  int unexpected_exits_ = 0;
};

}  // namespace dlock::torture
