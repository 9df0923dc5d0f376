// What the locks of a torture run live on, and the faults it can suffer: one standalone server
// behind the fault proxy, a Sentinel set, a Redis Cluster, or RedLock's independent masters, each
// of real processes on loopback ports, stopped by PID when the deployment is destroyed. The
// nemesis (nemesis.hpp) injects the faults of the workers (kill, stop) itself and asks the
// deployment for the rest.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "fault_proxy.hpp"
#include "nemesis.hpp"

namespace dlock::torture {

struct deployment_options {
  std::string topology = "standalone";  ///< standalone | sentinel | cluster | redlock
  /// Replicas each master has (sentinel: 2 by default; cluster: 1).
  int replicas = -1;
  std::string appendfsync = "always";
  std::chrono::milliseconds lease{1000};  ///< the workers' lease: fault durations scale with it
  /// The lock names the workers use: a cluster's faults go to the masters of their slots.
  std::vector<std::string> lock_names{};
};

/// What a fault needs from the run while it is injected: randomness, a way to wait that keeps
/// the workers respawned and notices Ctrl-C, and where to say what it did.
struct fault_scope {
  std::mt19937_64& rng;
  std::vector<std::string>& detail;
  /// Waits `d` (workers respawned meanwhile); false if the run was interrupted.
  std::function<bool(std::chrono::milliseconds d)> hold;
};

class deployment {
 public:
  virtual ~deployment() = default;
  /// What the workers connect to: a redis:// URL (standalone), a redis-sentinel:// URL, the
  /// nodes' URLs separated by commas (cluster: seeds; redlock: the masters).
  virtual std::string lock_url() const = 0;
  /// Injects one of its faults and waits for the deployment to be whole again (a killed master
  /// back as a replica, a migration finished). Throws on a fault it could not inject; the run
  /// goes on and the fault is counted as failed.
  virtual void inject(fault_kind k, fault_scope& s) = 0;
  /// Ends every fault window at once (an interrupted run).
  virtual void heal() {}
  /// The fault proxies' counters, summed (zero where there are none).
  virtual proxy_counters proxies() const { return {}; }
  /// Whether a lock granted and then lost to the deployment's own faults (data gone, a failover
  /// to a replica that missed it) may be granted to a second holder while the first still
  /// believes in it: what docs/topologies.md promises for these settings and `faults`.
  virtual bool may_grant_twice(const std::vector<fault_kind>& faults) const = 0;
  /// The faults after which, for a while, two masters can each grant the same lock to clients
  /// that are never told (the older holder released before it heard of the switch): what
  /// docs/topologies.md says of a Sentinel set with fewer acks than replicas.
  virtual std::vector<fault_kind> two_master_faults() const { return {}; }
  /// Whether fault `k` may lose writes the server acknowledged without replica acks (a latch's
  /// count): a restart without data, a failover to a replica that missed them.
  virtual bool may_lose_writes(fault_kind k) const = 0;
  /// A short description for the report: "sentinel, 1 master + 2 replicas, 3 sentinels".
  virtual std::string describe() const = 0;
};

/// The fault kinds a topology's deployment can suffer ("all"), the workers' kill and stop
/// included. Throws std::invalid_argument for an unknown topology.
std::vector<fault_kind> topology_faults(const std::string& topology);

/// Starts the deployment `o.topology` names. `min_replica_acks` (--replicas) only matters to
/// may_grant_twice. Throws std::invalid_argument for an unknown topology, embedded::server_error
/// if it does not come up.
std::unique_ptr<deployment> make_deployment(const deployment_options& o, int min_replica_acks);

// Each topology's own file.
std::unique_ptr<deployment> make_standalone(const deployment_options& o);
std::unique_ptr<deployment> make_sentinel(const deployment_options& o, int min_replica_acks);
std::unique_ptr<deployment> make_cluster(const deployment_options& o, int min_replica_acks);
std::unique_ptr<deployment> make_redlock(const deployment_options& o);

/// Fault proxies in front of a deployment's nodes, one per node, known by the node's own port.
/// Made as the nodes' ports are chosen (Sentinel and Cluster nodes announce the proxy's port, so
/// that clients, replicas and sentinels all reach them through it).
class proxy_group {
 public:
  /// Starts a proxy in front of the node listening on `node_port`; returns the proxy's port.
  std::uint16_t front(std::uint16_t node_port);
  /// The proxy in front of `node_port`. Throws std::out_of_range if there is none.
  fault_proxy& at(std::uint16_t node_port) const { return *by_node_port_.at(node_port); }
  std::vector<fault_proxy*> all() const;
  void heal();
  /// Every proxy's counters, summed.
  proxy_counters counters() const;

 private:
  std::map<std::uint16_t, std::unique_ptr<fault_proxy>> by_node_port_;
};

/// proxy-stall, proxy-half-open (0.5-2 leases each) or proxy-reset on `p`; throws
/// std::invalid_argument for any other kind.
void inject_proxy_fault(fault_kind k, fault_scope& s, fault_proxy& p,
                        std::chrono::milliseconds lease);

/// proxy-latency: 10-80 ms of latency and 0-40 ms of jitter on every one of `proxies` for 2-4 s.
/// Slow but alive: a round trip stays under the workers' command timeout, so this tests
/// slowness, while stall and half-open test silence.
void inject_latency(fault_scope& s, const std::vector<fault_proxy*>& proxies);

/// Uniform in [from, to].
std::chrono::milliseconds uniform_ms(std::mt19937_64& rng, std::chrono::milliseconds from,
                                     std::chrono::milliseconds to);
/// Uniform in [from, to] leases.
std::chrono::milliseconds leases(std::mt19937_64& rng, std::chrono::milliseconds lease, double from,
                                 double to);

}  // namespace dlock::torture
