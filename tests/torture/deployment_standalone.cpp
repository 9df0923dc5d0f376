// One lock server (AOF on, so it can come back with or without its data; DEBUG enabled) behind
// the fault proxy, and the controller's direct admin connection to it.
#include <chrono>
#include <cstdio>

#include "deployment.hpp"
#include "dlock/redis_client.hpp"
#include "embedded/redis_server.hpp"

namespace dlock::torture {
namespace {

using namespace std::chrono_literals;
using std::to_string;

std::string seconds_text(std::chrono::milliseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(d.count()) / 1000.0);
  return buf;
}

class standalone final : public deployment {
 public:
  explicit standalone(const deployment_options& o) : o_(o) {
    embedded::server_options lock_options;
    lock_options.extra_args = {"--appendonly",           "yes", "--appendfsync", o_.appendfsync,
                               "--enable-debug-command", "yes"};
    server_ = std::make_unique<embedded::redis_server>(lock_options);
    proxy_ = std::make_unique<fault_proxy>(server_->port());
    connection_options admin;
    admin.port = server_->port();
    admin.client_name = "torture-admin";
    admin.connect_timeout = 5s;
    admin.command_timeout = 20s;
    admin_ = std::make_unique<redis_client>(admin);
  }
  ~standalone() override {
    admin_.reset();
    proxy_.reset();
    // A crash, not a shutdown: nothing of its data is needed, and a server in DEBUG SLEEP or
    // CLIENT PAUSE would only delay a SIGTERM.
    server_->kill();
  }

  std::string lock_url() const override { return "redis://127.0.0.1:" + to_string(proxy_->port()); }
  bool may_grant_twice(const std::vector<fault_kind>& faults) const override {
    // A server that comes back without its data has forgotten every grant.
    return std::find(faults.begin(), faults.end(), fault_kind::restart_empty) != faults.end();
  }
  bool may_lose_writes(fault_kind k) const override { return k == fault_kind::restart_empty; }
  std::string describe() const override {
    return "standalone, 1 server behind the fault proxy (appendfsync " + o_.appendfsync + ")";
  }
  void heal() override { proxy_->heal(); }
  proxy_counters proxies() const override { return proxy_->counters(); }

  void inject(fault_kind k, fault_scope& s) override {
    switch (k) {
      case fault_kind::restart_persistent:
      case fault_kind::restart_empty:
        server_->kill();
        if (k == fault_kind::restart_empty) server_->wipe_data();
        server_->start();  // returns once the server answers, its AOF loaded
        break;
      case fault_kind::debug_sleep: {
        const auto d = leases(s.rng, o_.lease, 0.5, 2.0);
        s.detail.push_back("ms=" + to_string(d.count()));
        // The reply comes when the server wakes: this call is the fault's window.
        admin_->command({"DEBUG", "SLEEP", seconds_text(d)}, d + 20s);
        break;
      }
      case fault_kind::client_kill: {
        const auto killed = admin_->command({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
        s.detail.push_back("killed=" + to_string(killed.integer()));
        break;
      }
      case fault_kind::client_pause: {
        const auto d = leases(s.rng, o_.lease, 0.5, 2.0);
        const bool all = std::uniform_int_distribution<int>(0, 1)(s.rng) == 1;
        s.detail.push_back(all ? "mode=ALL" : "mode=WRITE");
        admin_->command({"CLIENT", "PAUSE", to_string(d.count()), all ? "ALL" : "WRITE"});
        s.hold(d);  // the server ends the pause by itself
        break;
      }
      case fault_kind::proxy_latency:
        inject_latency(s, {proxy_.get()});
        break;
      case fault_kind::proxy_stall:
      case fault_kind::proxy_half_open:
      case fault_kind::proxy_reset:
        inject_proxy_fault(k, s, *proxy_, o_.lease);
        break;
      default:
        throw std::invalid_argument("not a standalone fault");
    }
  }

 private:
  deployment_options o_;
  std::unique_ptr<embedded::redis_server> server_;
  std::unique_ptr<fault_proxy> proxy_;
  std::unique_ptr<redis_client> admin_;
};

}  // namespace

std::unique_ptr<deployment> make_standalone(const deployment_options& o) {
  return std::make_unique<standalone>(o);
}

}  // namespace dlock::torture
