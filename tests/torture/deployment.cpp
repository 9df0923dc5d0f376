#include "deployment.hpp"

#include <stdexcept>
#include <string>

namespace dlock::torture {

std::vector<fault_kind> topology_faults(const std::string& topology) {
  using enum fault_kind;
  if (topology == "standalone") {
    return {kill,        stop,         restart_persistent, restart_empty, debug_sleep,
            client_kill, client_pause, proxy_latency,      proxy_stall,   proxy_half_open,
            proxy_reset};
  }
  if (topology == "sentinel") {
    return {kill,        stop,         failover,      master_stop, replication_stall, sentinel_kill,
            client_kill, client_pause, proxy_latency, proxy_stall, proxy_half_open,   proxy_reset};
  }
  if (topology == "cluster") {
    return {kill,           stop,        failover,      node_stop,   manual_failover,
            slot_migration, client_kill, proxy_latency, proxy_stall, proxy_half_open,
            proxy_reset};
  }
  if (topology == "redlock") {
    return {kill,         stop, master_kill, master_stop, partition_minority, partition_majority,
            proxy_latency};
  }
  throw std::invalid_argument("unknown topology '" + topology + "'");
}

std::uint16_t proxy_group::front(std::uint16_t node_port) {
  auto& p = by_node_port_[node_port];
  p = std::make_unique<fault_proxy>(node_port);
  return p->port();
}

std::vector<fault_proxy*> proxy_group::all() const {
  std::vector<fault_proxy*> out;
  for (const auto& [port, p] : by_node_port_)
    out.push_back(p.get());
  return out;
}

void proxy_group::heal() {
  for (const auto& [port, p] : by_node_port_)
    p->heal();
}

proxy_counters proxy_group::counters() const {
  proxy_counters sum;
  for (const auto& [port, p] : by_node_port_) {
    const auto c = p->counters();
    sum.accepted += c.accepted;
    sum.active += c.active;
    sum.black_holed += c.black_holed;
    sum.reset += c.reset;
    sum.upstream_failures += c.upstream_failures;
    sum.refuse_windows += c.refuse_windows;
    sum.bytes_up += c.bytes_up;
    sum.bytes_down += c.bytes_down;
    sum.bytes_dropped += c.bytes_dropped;
  }
  return sum;
}

void inject_proxy_fault(fault_kind k, fault_scope& s, fault_proxy& p,
                        std::chrono::milliseconds lease) {
  switch (k) {
    case fault_kind::proxy_stall: {
      const auto d = leases(s.rng, lease, 0.5, 2.0);
      p.stall_for(d);
      s.hold(d);
      break;
    }
    case fault_kind::proxy_half_open: {
      const auto d = leases(s.rng, lease, 0.5, 2.0);
      p.half_open_for(d);
      s.hold(d);
      break;
    }
    case fault_kind::proxy_reset:
      p.reset_all();
      break;
    default:
      throw std::invalid_argument("not a proxy fault");
  }
}

void inject_latency(fault_scope& s, const std::vector<fault_proxy*>& proxies) {
  using namespace std::chrono_literals;
  const auto latency = uniform_ms(s.rng, 10ms, 80ms);
  const auto jitter = uniform_ms(s.rng, 0ms, 40ms);
  s.detail.push_back("latency=" + std::to_string(latency.count()));
  s.detail.push_back("jitter=" + std::to_string(jitter.count()));
  for (auto* p : proxies)
    p->set_latency(latency, jitter);
  s.hold(uniform_ms(s.rng, 2000ms, 4000ms));
  for (auto* p : proxies)
    p->set_latency(0ms, 0ms);
}

std::unique_ptr<deployment> make_deployment(const deployment_options& o, int min_replica_acks) {
  if (o.topology == "standalone") return make_standalone(o);
  if (o.topology == "sentinel") return make_sentinel(o, min_replica_acks);
  if (o.topology == "cluster") return make_cluster(o, min_replica_acks);
  if (o.topology == "redlock") return make_redlock(o);
  throw std::invalid_argument("unknown topology '" + o.topology + "'");
}

}  // namespace dlock::torture
