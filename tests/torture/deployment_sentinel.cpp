// A Sentinel set: one master, two replicas (--replicas picks how many acknowledge each grant, not
// how many exist), three sentinels, every data node with its AOF and behind a fault proxy that
// it announces: clients, replicas and sentinels all reach it through the proxy, so the proxy's
// faults on the master are the network's, a stall past down-after a partition. After every fault
// the deployment is made whole before the next: one master all sentinels agree on, every other
// data node replicating from it (a killed or stopped master comes back and Sentinel demotes it).
#include <sys/socket.h>

#include <netinet/in.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "deployment.hpp"
#include "embedded/redis_sentinel_set.hpp"
#include "embedded/resp_client.hpp"

namespace dlock::torture {
namespace {

using namespace std::chrono_literals;
using std::to_string;

constexpr auto sentinel_settle_timeout = 60s;

// A loopback port nobody listens on: a replica pointed there is cut off from its master while
// it keeps answering the sentinels, which is what a replication link stalled by the network looks
// like to them.
std::uint16_t closed_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                     ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  const int error = errno;
  ::close(fd);
  if (!bound) throw std::system_error(error, std::generic_category(), "bind");
  return ntohs(a.sin_port);
}

class sentinel_deployment final : public deployment {
 public:
  sentinel_deployment(const deployment_options& o, int min_replica_acks)
      : o_(o), acks_(min_replica_acks) {
    embedded::sentinel_set_options so;
    so.replicas = o.replicas < 0 ? 2 : o.replicas;
    so.sentinels = 3;
    so.down_after = 1000ms;
    so.failover_timeout = 3000ms;
    so.server_args = {"--appendonly", "yes", "--appendfsync", o.appendfsync};
    so.announce_port = [this](std::uint16_t port) { return proxies_.front(port); };
    set_ = std::make_unique<embedded::redis_sentinel_set>(so);
  }

  std::string lock_url() const override { return set_->url(); }
  void heal() override { proxies_.heal(); }
  proxy_counters proxies() const override { return proxies_.counters(); }
  // Acknowledged by fewer replicas than there are, a grant can be missing on the one promoted
  // (docs/topologies.md, "Where it ends"); acknowledged by all of them, it cannot.
  bool may_grant_twice(const std::vector<fault_kind>&) const override { return acks_ < replicas(); }
  // A failover that leaves the old master running and reachable (stopped and resumed, cut off
  // from its replicas, or partitioned and back) gives some clients a master of their own until
  // they hear of the switch or their next master check; a replica not yet moved to the new
  // master can acknowledge there. With every replica's acknowledgement it cannot: the promoted
  // one has left.
  std::vector<fault_kind> two_master_faults() const override {
    using enum fault_kind;
    if (acks_ >= replicas()) return {};
    return {master_stop, replication_stall, proxy_stall, proxy_half_open};
  }
  // Any failover may promote a replica that missed the last writes; a stall or a half-open
  // link past down-after is one (CLIENT PAUSE is shorter than down-after).
  bool may_lose_writes(fault_kind k) const override {
    using enum fault_kind;
    return k == failover || k == master_stop || k == replication_stall || k == proxy_stall ||
           k == proxy_half_open;
  }
  std::string describe() const override {
    return "sentinel, 1 master + " + to_string(set_->data_nodes() - 1) + " replicas, " +
           to_string(set_->sentinels()) + " sentinels, grants acknowledged by " + to_string(acks_) +
           " replicas";
  }

  void inject(fault_kind k, fault_scope& s) override {
    const auto master = set_->master_index();
    s.detail.push_back("master=" + to_string(master));
    switch (k) {
      case fault_kind::failover:
        set_->data_node(master).kill();
        s.detail.push_back("new=" +
                           to_string(set_->wait_failover(master, sentinel_settle_timeout)));
        set_->data_node(master).start();  // with its AOF: Sentinel demotes it
        break;
      case fault_kind::master_stop:
        set_->data_node(master).pause();
        s.detail.push_back("new=" +
                           to_string(set_->wait_failover(master, sentinel_settle_timeout)));
        set_->data_node(master).resume();
        break;
      case fault_kind::replication_stall: {
        // Every replica cut off from the master while the master goes on granting; then a
        // failover (the master left running: Sentinel demotes it afterwards) to one of them.
        const auto nowhere = closed_port();
        for (std::size_t i = 0; i < set_->data_nodes(); ++i) {
          if (i == master || !set_->data_node(i).running()) continue;
          embedded::resp_client(set_->data_node(i).port())
              .checked({"REPLICAOF", "127.0.0.1", to_string(nowhere)});
        }
        s.hold(leases(s.rng, o_.lease, 0.3, 1.0));
        sentinel_command({"SENTINEL", "FAILOVER", set_->master_name()});
        s.detail.push_back("new=" +
                           to_string(set_->wait_failover(master, sentinel_settle_timeout)));
        break;
      }
      case fault_kind::sentinel_kill: {
        const auto i = std::uniform_int_distribution<std::size_t>(0, set_->sentinels() - 1)(s.rng);
        s.detail.push_back("sentinel=" + to_string(i));
        set_->sentinel(i).kill();
        s.hold(leases(s.rng, o_.lease, 0.5, 3.0));
        set_->sentinel(i).start();
        break;
      }
      case fault_kind::client_kill: {
        const auto killed = embedded::redis_command(
            set_->data_node(master).port(), {"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
        s.detail.push_back("killed=" + to_string(killed.integer));
        break;
      }
      case fault_kind::client_pause: {
        // WRITE only: a pause of everything past down-after is master-stop by another name.
        const auto d = leases(s.rng, o_.lease, 0.5, 2.0);
        embedded::resp_client(set_->data_node(master).port())
            .checked({"CLIENT", "PAUSE", to_string(d.count()), "WRITE"});
        s.hold(d);
        break;
      }
      case fault_kind::proxy_latency:
        inject_latency(s, proxies_.all());
        break;
      case fault_kind::proxy_stall:
      case fault_kind::proxy_half_open:
      case fault_kind::proxy_reset:
        inject_proxy_fault(k, s, proxies_.at(set_->data_node(master).port()), o_.lease);
        break;
      default:
        throw std::invalid_argument("not a sentinel fault");
    }
    settle(s);
  }

 private:
  // Sentinel demotes a returning master by itself, but not always: a failover it gave up on
  // (slower than failover-timeout on a loaded machine) can leave a promoted replica as a second
  // master. After a while the deployment is repaired as an operator would, pointing every other
  // data node at the master the sentinels name, so that each fault starts from a whole set.
  void settle(fault_scope& s) {
    try {
      // A stall past down-after may have started a failover that ends after the stall did.
      set_->wait_settled(sentinel_settle_timeout / 3);
      set_->wait_replicas_synced(sentinel_settle_timeout / 3);
      return;
    } catch (const embedded::server_error&) {
    }
    const auto master = set_->master_index();
    for (std::size_t i = 0; i < set_->data_nodes(); ++i) {
      if (i == master || !set_->data_node(i).answering()) continue;
      embedded::redis_command(
          set_->data_node(i).port(),
          {"REPLICAOF", "127.0.0.1", to_string(set_->data_node(master).port())});
    }
    s.detail.push_back("repaired");
    set_->wait_replicas_synced(sentinel_settle_timeout);
  }

  int replicas() const { return static_cast<int>(set_->data_nodes()) - 1; }

  // The first running sentinel that accepts it.
  void sentinel_command(const std::vector<std::string>& args) {
    std::string last;
    for (std::size_t i = 0; i < set_->sentinels(); ++i) {
      if (!set_->sentinel(i).running()) continue;
      const auto r = embedded::redis_command(set_->sentinel(i).port(), args);
      if (!r.is_error()) return;
      last = r.text;
    }
    throw std::runtime_error("no sentinel accepted " + args.at(1) + ": " + last);
  }

  deployment_options o_;
  int acks_;
  proxy_group proxies_;  // declared first: the nodes go before the proxies in front of them
  std::unique_ptr<embedded::redis_sentinel_set> set_;
};

}  // namespace

std::unique_ptr<deployment> make_sentinel(const deployment_options& o, int min_replica_acks) {
  return std::make_unique<sentinel_deployment>(o, min_replica_acks);
}

}  // namespace dlock::torture
