// The three ways Redis is deployed, as one interface for tests whose body is the same on each:
// a standalone server, a Sentinel set (a master, replicas, three sentinels) and a 3-master
// cluster, all real processes on loopback ports, stopped by PID when the deployment goes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/client.hpp"
#include "embedded/redis_cluster.hpp"
#include "embedded/redis_sentinel_set.hpp"
#include "embedded/redis_server.hpp"

namespace dlock::testing {

class deployment {
 public:
  virtual ~deployment() = default;
  /// Options for a client in the test's own process.
  virtual client_options options() const = 0;
  /// The test worker's URL argument (tests/worker/lock_worker.cpp).
  virtual std::string worker_target() const = 0;
  /// The dlock command line's options that reach it (before the subcommand).
  virtual std::vector<std::string> cli_target() const = 0;
  /// The port of the master that serves `key` now.
  virtual std::uint16_t port_for(std::string_view key) = 0;
  /// Every master's port.
  virtual std::vector<std::uint16_t> master_ports() = 0;
  /// The PUBSUB subcommand that counts an unlock channel's subscribers.
  virtual std::string numsub() const { return "NUMSUB"; }
};

/// "standalone", "sentinel" (one master, `replicas` replicas, three sentinels) or "cluster"
/// (three masters, `replicas` replicas each).
std::unique_ptr<deployment> start_deployment(const std::string& kind, int replicas = 0);

/// The deployments every topology-parametrised test runs on.
inline const std::vector<std::string> all_deployments = {"standalone", "sentinel", "cluster"};

}  // namespace dlock::testing
