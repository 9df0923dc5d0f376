// RedLock: five independent masters, each with its AOF (appendfsync as the run says) and each
// behind a fault proxy of its own, so that a partition cuts some masters off from every client.
#include <algorithm>
#include <numeric>

#include "deployment.hpp"
#include "embedded/redis_server.hpp"

namespace dlock::torture {
namespace {

using namespace std::chrono_literals;
using std::to_string;

constexpr std::size_t redlock_masters = 5;

class redlock_deployment final : public deployment {
 public:
  explicit redlock_deployment(const deployment_options& o) : o_(o) {
    embedded::server_options so;
    so.extra_args = {"--appendonly", "yes", "--appendfsync", o.appendfsync};
    for (std::size_t i = 0; i < redlock_masters; ++i) {
      servers_.push_back(std::make_unique<embedded::redis_server>(so));
      proxy_ports_.push_back(proxies_.front(servers_.back()->port()));
    }
  }
  ~redlock_deployment() override {
    for (auto& s : servers_)
      s->kill();
  }

  std::string lock_url() const override {
    std::string out;
    for (const auto port : proxy_ports_) {
      if (!out.empty()) out.push_back(',');
      out.append("redis://127.0.0.1:").append(to_string(port));
    }
    return out;
  }
  // A master back without its data waits out a lease first (docs/redlock.md): no fault here
  // loses an acknowledged grant while it matters.
  bool may_grant_twice(const std::vector<fault_kind>&) const override { return false; }
  bool may_lose_writes(fault_kind k) const override { return k == fault_kind::master_kill; }
  std::string describe() const override {
    return "redlock, 5 masters, each behind a fault proxy (appendfsync " + o_.appendfsync + ")";
  }
  void heal() override { proxies_.heal(); }
  proxy_counters proxies() const override { return proxies_.counters(); }

  void inject(fault_kind k, fault_scope& s) override {
    switch (k) {
      case fault_kind::master_kill: {
        const auto i = pick(s, 1).at(0);
        const bool keep = std::uniform_int_distribution<int>(0, 1)(s.rng) == 1;
        s.detail.push_back("master=" + to_string(i));
        s.detail.push_back(keep ? "data=kept" : "data=lost");
        servers_[i]->kill();
        if (!keep) {
          // antirez's delayed restart: back only after every lease it granted has ended.
          servers_[i]->wipe_data();
          s.hold(o_.lease + leases(s.rng, o_.lease, 0.1, 1.0));
        }
        servers_[i]->start();
        break;
      }
      case fault_kind::master_stop: {
        const auto i = pick(s, 1).at(0);
        s.detail.push_back("master=" + to_string(i));
        servers_[i]->pause();
        s.hold(leases(s.rng, o_.lease, 1.2, 2.0));
        servers_[i]->resume();
        break;
      }
      case fault_kind::partition_minority:
      case fault_kind::partition_majority: {
        const auto cut = pick(s, k == fault_kind::partition_minority ? 2 : 3);
        const bool black_hole = std::uniform_int_distribution<int>(0, 1)(s.rng) == 1;
        const auto d = leases(s.rng, o_.lease, 0.5, 2.0);
        std::string who;
        for (const auto i : cut) {
          if (!who.empty()) who.push_back(',');
          who.append(to_string(i));
          auto& proxy = proxies_.at(servers_[i]->port());
          if (black_hole) {
            proxy.half_open_for(d);
          } else {
            proxy.stall_for(d);
          }
        }
        s.detail.push_back("masters=" + who);
        s.detail.push_back(black_hole ? "how=half-open" : "how=stall");
        s.hold(d);
        break;
      }
      case fault_kind::proxy_latency:
        inject_latency(s, proxies_.all());
        break;
      default:
        throw std::invalid_argument("not a redlock fault");
    }
  }

 private:
  std::vector<std::size_t> pick(fault_scope& s, std::size_t n) {
    std::vector<std::size_t> all(redlock_masters);
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), s.rng);
    all.resize(n);
    return all;
  }

  deployment_options o_;
  proxy_group proxies_;
  std::vector<std::unique_ptr<embedded::redis_server>> servers_;
  std::vector<std::uint16_t> proxy_ports_;  // the masters' proxies, in the masters' order
};

}  // namespace

std::unique_ptr<deployment> make_redlock(const deployment_options& o) {
  return std::make_unique<redlock_deployment>(o);
}

}  // namespace dlock::torture
