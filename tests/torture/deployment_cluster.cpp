// A Redis Cluster: three masters with a replica each (--replicas picks how many acknowledge each
// grant), every node with its AOF and behind a fault proxy that it announces: clients and
// replicas reach it through the proxy, while the cluster bus (gossip, failure detection) does not,
// so the proxy's faults slow or cut the client and replication links without a failover. After
// every fault the cluster is made whole before the next: all slots served, every node agreeing,
// every replica linked (a killed or stopped master comes back as a replica of the one that took
// over).
#include <thread>

#include "deployment.hpp"
#include "embedded/redis_cluster.hpp"
#include "embedded/resp_client.hpp"

namespace dlock::torture {
namespace {

using namespace std::chrono_literals;
using std::to_string;

constexpr auto cluster_settle_timeout = 60s;

class cluster_deployment final : public deployment {
 public:
  cluster_deployment(const deployment_options& o, int min_replica_acks,
                     std::vector<std::string> names)
      : o_(o), acks_(min_replica_acks), names_(std::move(names)) {
    embedded::cluster_options co;
    co.masters = 3;
    co.replicas_per_master = o.replicas < 0 ? 1 : o.replicas;
    co.node_timeout = 1000ms;
    co.extra_args = {"--appendonly", "yes", "--appendfsync", o.appendfsync};
    co.announce_port = [this](std::uint16_t port) { return proxies_.front(port); };
    cluster_ = std::make_unique<embedded::redis_cluster>(co);
  }
  void heal() override { proxies_.heal(); }
  proxy_counters proxies() const override { return proxies_.counters(); }

  std::string lock_url() const override {
    std::string out;
    for (const auto& u : cluster_->seed_urls()) {
      if (!out.empty()) out.push_back(',');
      out.append(u);
    }
    return out;
  }
  bool may_grant_twice(const std::vector<fault_kind>& faults) const override {
    const auto has = [&](fault_kind k) {
      return std::find(faults.begin(), faults.end(), k) != faults.end();
    };
    // A failover after a crash or a stop can promote a replica that missed the last grants;
    // CLUSTER FAILOVER waits for the replica to catch up, and a migration moves keys whole.
    return acks_ == 0 && (has(fault_kind::failover) || has(fault_kind::node_stop));
  }
  bool may_lose_writes(fault_kind k) const override {
    return k == fault_kind::failover || k == fault_kind::node_stop;
  }
  std::string describe() const override {
    return "cluster, " + to_string(cluster_->master_indexes().size()) + " masters, " +
           to_string(cluster_->size()) + " nodes, grants acknowledged by " + to_string(acks_) +
           " replicas";
  }

  void inject(fault_kind k, fault_scope& s) override {
    // The master of a lock name's slot: the faults that matter are the ones under the locks.
    const auto& name =
        names_.at(std::uniform_int_distribution<std::size_t>(0, names_.size() - 1)(s.rng));
    const auto slot = embedded::redis_cluster::key_slot(name);
    const auto master = cluster_->master_of_slot(slot);
    s.detail.push_back("node=" + to_string(master));
    switch (k) {
      case fault_kind::failover:
        cluster_->kill_node(master);
        s.detail.push_back("new=" +
                           to_string(cluster_->wait_failover(master, cluster_settle_timeout)));
        cluster_->node(master).start();  // rejoins as a replica of the new master
        break;
      case fault_kind::node_stop:
        cluster_->pause_node(master);
        s.detail.push_back("new=" +
                           to_string(cluster_->wait_failover(master, cluster_settle_timeout)));
        cluster_->node(master).resume();
        break;
      case fault_kind::manual_failover: {
        const auto replica = replica_of(master);
        s.detail.push_back("new=" + to_string(replica));
        embedded::resp_client(cluster_->node(replica).port()).checked({"CLUSTER", "FAILOVER"});
        wait_role(replica, "master");
        break;
      }
      case fault_kind::slot_migration: {
        // Key by key, with pauses: acquisitions meet the slot migrating, keys half moved (ASK,
        // TRYAGAIN), and at the end the slot's new owner (MOVED).
        const auto masters = cluster_->master_indexes();
        std::size_t to = master;
        while (to == master)
          to = masters.at(std::uniform_int_distribution<std::size_t>(0, masters.size() - 1)(s.rng));
        s.detail.push_back("name=" + name);
        s.detail.push_back("slot=" + to_string(slot));
        s.detail.push_back("to=" + to_string(to));
        cluster_->begin_migration(slot, master, to);
        std::size_t moved = 0;
        for (;;) {
          if (!s.hold(uniform_ms(s.rng, 20ms, 200ms))) break;
          const auto n = cluster_->move_keys(slot, master, to, 1);
          if (n == 0) break;
          moved += n;
        }
        s.detail.push_back("keys=" + to_string(moved));
        cluster_->finish_migration(slot, master, to);
        break;
      }
      case fault_kind::client_kill:
        for (const auto m : cluster_->master_indexes()) {
          embedded::redis_command(cluster_->node(m).port(),
                                  {"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
        }
        break;
      case fault_kind::proxy_latency:
        inject_latency(s, proxies_.all());
        break;
      case fault_kind::proxy_stall:
      case fault_kind::proxy_half_open:
      case fault_kind::proxy_reset:
        inject_proxy_fault(k, s, proxies_.at(cluster_->node(master).port()), o_.lease);
        break;
      default:
        throw std::invalid_argument("not a cluster fault");
    }
    cluster_->wait_healthy(cluster_settle_timeout);
  }

 private:
  std::size_t replica_of(std::size_t master) {
    for (std::size_t i = 0; i < cluster_->size(); ++i) {
      if (i == master || !cluster_->node(i).answering()) continue;
      const auto role = embedded::resp_client(cluster_->node(i).port()).checked({"ROLE"});
      if (role.elements.size() > 2 && role.elements[0].text == "slave" &&
          role.elements[2].integer == cluster_->advertised_port(master)) {
        return i;
      }
    }
    throw std::runtime_error("node " + to_string(master) + " has no replica");
  }

  void wait_role(std::size_t node, const std::string& role) {
    const auto deadline = std::chrono::steady_clock::now() + cluster_settle_timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      const auto r = embedded::resp_client(cluster_->node(node).port()).checked({"ROLE"});
      if (!r.elements.empty() && r.elements[0].text == role) return;
      std::this_thread::sleep_for(50ms);  // a cluster's own pace: gossip, not an event we get
    }
    throw std::runtime_error("node " + to_string(node) + " never became " + role);
  }

  deployment_options o_;
  int acks_;
  std::vector<std::string> names_;
  proxy_group proxies_;  // declared first: the nodes go before the proxies in front of them
  std::unique_ptr<embedded::redis_cluster> cluster_;
};

}  // namespace

std::unique_ptr<deployment> make_cluster(const deployment_options& o, int min_replica_acks) {
  return std::make_unique<cluster_deployment>(o, min_replica_acks, o.lock_names);
}

}  // namespace dlock::torture
