// The worker processes of a torture run (worker.cpp), respawned whenever one exits, and the
// controller's wait that watches them and Ctrl-C together. The lock servers are the deployment's
// (deployment.hpp). Every worker is stopped by PID when the pool is destroyed, and dies with the
// controller (PR_SET_PDEATHSIG) if it is killed.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "embedded/process.hpp"

namespace dlock::torture {

struct worker_pool_options {
  std::string dir{};  ///< where the worker logs go
  std::string worker_program{};
  std::string topology = "standalone";
  /// What the workers connect to (deployment::lock_url()).
  std::string lock_url{};
  /// The resource server's port (0 with held writes).
  std::uint16_t resource_port = 0;
  int replicas = 0;  ///< client_options::min_replica_acks
  std::string kinds = "reentrant,simple";
  int permits = 2;  ///< each semaphore's permits
  int workers = 8;
  int names = 4;
  std::uint64_t seed = 1;
  std::chrono::milliseconds lease{1000};
  std::chrono::milliseconds recheck{200};
  std::chrono::milliseconds command_timeout{300};
  std::chrono::milliseconds connect_timeout{300};
  std::chrono::milliseconds wait{2000};
  std::chrono::milliseconds fair_waiter_lease{1000};
  int long_work_ppm = 100;
  /// "fenced": the resource on the resource server, fenced ops; "held": on the lock server, ops
  /// through lease::write_while_held (worker.cpp).
  std::string writes = "fenced";
};

/// Ctrl-C and SIGTERM: the controller's handlers write to a pipe so waits can watch it.
void install_interrupt_handlers();
bool interrupted() noexcept;

class worker_pool {
 public:
  explicit worker_pool(worker_pool_options o);
  ~worker_pool();
  worker_pool(const worker_pool&) = delete;
  worker_pool& operator=(const worker_pool&) = delete;

  void start_workers();
  /// Waits until `deadline`, respawning workers that exit meanwhile. False if interrupted.
  bool wait_until(std::chrono::steady_clock::time_point deadline);

  struct victim {
    int slot;
    std::string worker;  ///< the worker's id, as in its log
    bool holder;         ///< its log's last line said it was inside a grant, before the write
    std::string name;    ///< the name it holds, if a holder
    std::string kind;    ///< and its kind, as its grant's line gives it (G lines only)
  };
  /// A worker to fault, preferably one that holds a lock right now (its last logged event is
  /// its grant or its read): killing or pausing a holder is what tests the lock. Waits up to
  /// `patience` for one to appear, then takes anyone.
  victim pick_victim(std::mt19937_64& rng,
                     std::chrono::milliseconds patience = std::chrono::milliseconds(500));
  /// SIGKILL, reaped, and a new worker started in its place. Returns the last line the killed
  /// worker logged.
  std::string kill_and_respawn(int slot);
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

  worker_pool_options o_;
  std::vector<worker_slot> workers_;
  std::vector<std::string> logs_;
  int next_id_ = 1;
  int unexpected_exits_ = 0;
};

}  // namespace dlock::torture
