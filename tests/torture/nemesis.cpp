#include "nemesis.hpp"

#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "deployment.hpp"
#include "worker_pool.hpp"

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
    {fault_kind::failover, "failover"},
    {fault_kind::master_stop, "master-stop"},
    {fault_kind::replication_stall, "replication-stall"},
    {fault_kind::sentinel_kill, "sentinel-kill"},
    {fault_kind::node_stop, "node-stop"},
    {fault_kind::manual_failover, "manual-failover"},
    {fault_kind::slot_migration, "slot-migration"},
    {fault_kind::master_kill, "master-kill"},
    {fault_kind::partition_minority, "partition-minority"},
    {fault_kind::partition_majority, "partition-majority"},
};

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

std::vector<fault_kind> parse_faults(std::string_view list,
                                     const std::vector<fault_kind>& available) {
  if (list == "all") return available;
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
    if (std::find(available.begin(), available.end(), found->kind) == available.end()) {
      throw std::invalid_argument("fault '" + std::string(item) +
                                  "' does not apply to this topology");
    }
    if (std::find(out.begin(), out.end(), found->kind) == out.end()) out.push_back(found->kind);
  }
  return out;
}

nemesis::nemesis(worker_pool& pool, deployment& d, nemesis_options o)
    : pool_(pool), deployment_(d), o_(std::move(o)), rng_(o_.seed), log_(o_.log_path) {}

std::chrono::milliseconds uniform_ms(std::mt19937_64& rng, std::chrono::milliseconds from,
                                     std::chrono::milliseconds to) {
  return std::chrono::milliseconds(
      std::uniform_int_distribution<std::int64_t>(from.count(), to.count())(rng));
}

std::chrono::milliseconds leases(std::mt19937_64& rng, std::chrono::milliseconds lease, double from,
                                 double to) {
  const auto l = static_cast<double>(lease.count());
  return uniform_ms(rng, std::chrono::milliseconds(static_cast<std::int64_t>(from * l)),
                    std::chrono::milliseconds(static_cast<std::int64_t>(to * l)));
}

std::chrono::milliseconds nemesis::uniform(std::chrono::milliseconds from,
                                           std::chrono::milliseconds to) {
  return uniform_ms(rng_, from, to);
}

bool nemesis::run_until(steady::time_point deadline) {
  // A first pause lets the workers connect and get going before anything breaks.
  if (!pool_.wait_until(std::min(deadline, steady::now() + uniform(o_.gap_min, o_.gap_max)))) {
    return false;
  }
  // The first round always completes, past the deadline if need be: a short run on a slow machine
  // still injects every fault kind once, so a kind that never happened is a broken fault.
  bool first_round_done = false;
  while (!o_.kinds.empty() && (steady::now() < deadline || !first_round_done)) {
    if (round_.empty()) {
      round_ = o_.kinds;
      std::shuffle(round_.begin(), round_.end(), rng_);
    }
    const auto kind = round_.back();
    round_.pop_back();
    first_round_done = first_round_done || round_.empty();
    if (!inject(kind)) return false;
    if (steady::now() >= deadline && first_round_done) break;
    const auto gap_end = steady::now() + uniform(o_.gap_min, o_.gap_max);
    if (!pool_.wait_until(first_round_done ? std::min(deadline, gap_end) : gap_end)) return false;
  }
  return pool_.wait_until(deadline);
}

bool nemesis::inject(fault_kind k) {
  const auto t0 = now_ns();
  std::vector<std::string> detail;
  bool completed = true;
  fault_scope scope{.rng = rng_, .detail = detail, .hold = [&](std::chrono::milliseconds d) {
                      detail.push_back("ms=" + to_string(d.count()));
                      completed = pool_.wait_until(steady::now() + d);
                      return completed;
                    }};
  const auto victim = [&] {
    auto v = pool_.pick_victim(rng_);
    detail.push_back(v.worker);
    detail.push_back(v.holder ? "holder=1" : "holder=0");
    return v;
  };
  try {
    switch (k) {
      case fault_kind::kill: {
        const auto v = victim();
        const auto last_line = pool_.kill_and_respawn(v.slot);
        const auto last = split_fields(last_line);
        // A plain semaphore's permits have no owner and no expiry: a holder killed before its
        // release never gives them back. An operator would; so does the nemesis, but only if
        // the worker died with its grant as its last word: past it (the victim went on between
        // being picked and the kill), its release may have reached the server, and giving back
        // again would make a permit out of nothing.
        const bool before_release = !last.empty() && last[0] == "G";
        if (v.holder && v.kind == "semaphore" && before_release && o_.return_permits) {
          o_.return_permits(v.name);
        }
        break;
      }
      case fault_kind::stop: {
        const int slot = victim().slot;
        pool_.signal(slot, SIGSTOP);
        scope.hold(leases(rng_, o_.lease, 0.2, 2.0));
        pool_.signal(slot, SIGCONT);
        break;
      }
      default:
        deployment_.inject(k, scope);
    }
  } catch (const std::exception& e) {
    // The run goes on; the checker counts the fault as failed, not as done.
    detail.insert(detail.begin(), "failed");
    detail.push_back(e.what());
  }
  if (!completed) deployment_.heal();
  const auto t1 = to_string(now_ns());
  const auto t0_text = to_string(t0);
  std::vector<std::string_view> fields = {"F", fault_name(k), t0_text, t1};
  fields.insert(fields.end(), detail.begin(), detail.end());
  log_.write(fields);
  return completed;
}

}  // namespace dlock::torture
