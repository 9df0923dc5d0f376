#include "nemesis.hpp"

#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "cluster.hpp"
#include "dlock/error.hpp"

namespace dlock::torture {
namespace {

using namespace std::chrono_literals;
using std::to_string;
using steady = std::chrono::steady_clock;

struct named_kind {
  fault_kind kind;
  std::string_view name;
};

constexpr named_kind kind_names[] = {
    {fault_kind::kill, "kill"},
    {fault_kind::stop, "stop"},
    {fault_kind::restart_persistent, "restart-persistent"},
    {fault_kind::restart_empty, "restart-empty"},
    {fault_kind::debug_sleep, "debug-sleep"},
    {fault_kind::client_kill, "client-kill"},
    {fault_kind::client_pause, "client-pause"},
    {fault_kind::proxy_latency, "proxy-latency"},
    {fault_kind::proxy_stall, "proxy-stall"},
    {fault_kind::proxy_half_open, "proxy-half-open"},
    {fault_kind::proxy_reset, "proxy-reset"},
};

std::string seconds_text(std::chrono::milliseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(d.count()) / 1000.0);
  return buf;
}

}  // namespace

const std::vector<fault_kind>& all_faults() {
  static const std::vector<fault_kind> all = [] {
    std::vector<fault_kind> v;
    for (const auto& k : kind_names)
      v.push_back(k.kind);
    return v;
  }();
  return all;
}

std::string_view fault_name(fault_kind k) {
  for (const auto& n : kind_names) {
    if (n.kind == k) return n.name;
  }
  return "?";
}

std::vector<fault_kind> parse_faults(std::string_view list) {
  if (list == "all") return all_faults();
  std::vector<fault_kind> out;
  if (list == "none") return out;
  while (!list.empty()) {
    const auto comma = list.find(',');
    const auto item = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    if (item.empty()) continue;
    const auto* found = std::find_if(std::begin(kind_names), std::end(kind_names),
                                     [&](const named_kind& n) { return n.name == item; });
    if (found == std::end(kind_names)) {
      throw std::invalid_argument("unknown fault kind '" + std::string(item) + "'");
    }
    if (std::find(out.begin(), out.end(), found->kind) == out.end()) out.push_back(found->kind);
  }
  return out;
}

nemesis::nemesis(cluster& c, nemesis_options o)
    : c_(c), o_(std::move(o)), rng_(o_.seed), log_(o_.log_path) {}

std::chrono::milliseconds nemesis::uniform(std::chrono::milliseconds from,
                                           std::chrono::milliseconds to) {
  return std::chrono::milliseconds(
      std::uniform_int_distribution<std::int64_t>(from.count(), to.count())(rng_));
}

std::chrono::milliseconds nemesis::scaled(double from, double to) {
  const auto lease = static_cast<double>(o_.lease.count());
  return uniform(std::chrono::milliseconds(static_cast<std::int64_t>(from * lease)),
                 std::chrono::milliseconds(static_cast<std::int64_t>(to * lease)));
}

bool nemesis::run_until(steady::time_point deadline) {
  // A first pause lets the workers connect and get going before anything breaks.
  if (!c_.wait_until(std::min(deadline, steady::now() + uniform(o_.gap_min, o_.gap_max)))) {
    return false;
  }
  while (!o_.kinds.empty() && steady::now() < deadline) {
    if (round_.empty()) {
      round_ = o_.kinds;
      std::shuffle(round_.begin(), round_.end(), rng_);
    }
    const auto kind = round_.back();
    round_.pop_back();
    if (!inject(kind)) return false;
    const auto gap = uniform(o_.gap_min, o_.gap_max);
    if (!c_.wait_until(std::min(deadline, steady::now() + gap))) return false;
  }
  return c_.wait_until(deadline);
}

void nemesis::restart_lock_server(bool keep_data) {
  auto& server = c_.lock_server();
  server.kill();
  if (!keep_data) server.wipe_data();
  server.start();  // returns once the server answers, its AOF loaded
}

bool nemesis::inject(fault_kind k) {
  const auto t0 = now_ns();
  std::vector<std::string> detail;
  bool completed = true;
  auto hold = [&](std::chrono::milliseconds d) {
    detail.push_back("ms=" + to_string(d.count()));
    completed = c_.wait_until(steady::now() + d);
  };
  auto victim = [&] {
    const auto v = c_.pick_victim(rng_);
    detail.push_back(v.worker);
    detail.push_back(v.holder ? "holder=1" : "holder=0");
    return v.slot;
  };
  try {
    switch (k) {
      case fault_kind::kill:
        c_.kill_and_respawn(victim());
        break;
      case fault_kind::stop: {
        const int slot = victim();
        c_.signal(slot, SIGSTOP);
        hold(scaled(0.2, 2.0));
        c_.signal(slot, SIGCONT);
        break;
      }
      case fault_kind::restart_persistent:
        restart_lock_server(true);
        break;
      case fault_kind::restart_empty:
        restart_lock_server(false);
        break;
      case fault_kind::debug_sleep: {
        const auto d = scaled(0.5, 2.0);
        detail.push_back("ms=" + to_string(d.count()));
        // The reply comes when the server wakes: this call is the fault's window.
        c_.admin().command({"DEBUG", "SLEEP", seconds_text(d)}, d + 20s);
        break;
      }
      case fault_kind::client_kill: {
        const auto killed =
            c_.admin().command({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
        detail.push_back("killed=" + to_string(killed.integer()));
        break;
      }
      case fault_kind::client_pause: {
        const auto d = scaled(0.5, 2.0);
        const bool all = std::uniform_int_distribution<int>(0, 1)(rng_) == 1;
        detail.push_back(all ? "mode=ALL" : "mode=WRITE");
        c_.admin().command({"CLIENT", "PAUSE", to_string(d.count()), all ? "ALL" : "WRITE"});
        hold(d);  // the server ends the pause by itself
        break;
      }
      case fault_kind::proxy_latency: {
        // Slow but alive: a round trip stays under the workers' 300 ms command timeout, so this
        // tests slowness, while stall and half-open test silence.
        const auto latency = uniform(10ms, 80ms);
        const auto jitter = uniform(0ms, 40ms);
        detail.push_back("latency=" + to_string(latency.count()));
        detail.push_back("jitter=" + to_string(jitter.count()));
        c_.proxy().set_latency(latency, jitter);
        hold(uniform(2000ms, 4000ms));
        c_.proxy().set_latency(0ms, 0ms);
        break;
      }
      case fault_kind::proxy_stall: {
        const auto d = scaled(0.5, 2.0);
        c_.proxy().stall_for(d);
        hold(d);
        break;
      }
      case fault_kind::proxy_half_open: {
        const auto d = scaled(0.5, 2.0);
        c_.proxy().half_open_for(d);
        hold(d);
        break;
      }
      case fault_kind::proxy_reset:
        c_.proxy().reset_all();
        break;
    }
  } catch (const std::exception& e) {
    // The run goes on; the checker counts the fault as failed, not as done.
    detail.insert(detail.begin(), "failed");
    detail.push_back(e.what());
  }
  if (!completed) c_.proxy().heal();
  const auto t1 = to_string(now_ns());
  const auto t0_text = to_string(t0);
  std::vector<std::string_view> fields = {"F", fault_name(k), t0_text, t1};
  fields.insert(fields.end(), detail.begin(), detail.end());
  log_.write(fields);
  return completed;
}

}  // namespace dlock::torture
