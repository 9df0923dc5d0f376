#include "redlock_scenarios.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <utility>

#include <dlock/dlock.hpp>

#include "bench_support.hpp"
#include "script_ceiling.hpp"

namespace dlock::bench {

namespace {

// One side of a comparison: how to make a client for it, and the rates of its slices.
struct compared_client {
  std::string name;
  client_options options;
  std::vector<double> rates;
};

// Runs `slice_of(side)` for each side in `rounds` interleaved slices, rotating which goes
// first, and returns {RedLock's median, standalone's median}. `third`, when given, is a third
// slice of each round, in the rotation.
std::pair<double, double> interleaved(int rounds, std::array<compared_client, 2>& sides,
                                      const std::function<double(compared_client&)>& slice_of,
                                      const std::function<void()>& third = {}) {
  for (auto& sd : sides)
    sd.rates.clear();
  const int slots = third ? 3 : 2;
  for (int round = 0; round < rounds; ++round) {
    for (int k = 0; k < slots; ++k) {
      const int slot = (round + k) % slots;
      if (slot == 2) {
        third();
        continue;
      }
      auto& sd = sides[static_cast<std::size_t>(slot)];
      sd.rates.push_back(slice_of(sd));
    }
  }
  return {median(sides[0].rates), median(sides[1].rates)};
}

scenario_result row(std::string name, std::string metric, std::pair<double, double> medians,
                    std::size_t masters, int rounds) {
  scenario_result r{std::move(name),
                    std::move(metric),
                    medians.first,
                    medians.second,
                    standalone_name,
                    ratio_of(medians.first, medians.second),
                    "",
                    {}};
  r.add_extra("redlock_masters", static_cast<double>(masters));
  r.add_extra("slices_per_topology", static_cast<double>(rounds));
  return r;
}

double slowest_pairs(const std::vector<script_rates>& masters) {
  double slowest = 0;
  for (std::size_t m = 0; m < masters.size(); ++m) {
    const double p = masters[m].pairs();
    if (m == 0 || p < slowest) slowest = p;
  }
  return slowest;
}

// RedLock's throughput beside the masters' ceiling: the median over the slices of the slowest
// master's pairs/s, with each master's own median.
scenario_result ceiling_row(const std::string& name, double ours,
                            const std::vector<std::vector<script_rates>>& runs,
                            const script_ceiling& ceiling, const redlock_settings& s,
                            const redlock_options& o) {
  std::vector<double> slowest;
  std::size_t masters = 0;
  for (const auto& run : runs) {
    slowest.push_back(slowest_pairs(run));
    masters = std::max(masters, run.size());
  }
  const double top = median(slowest);
  scenario_result r{name,
                    "pairs/s",
                    ours,
                    top,
                    format("redis-benchmark -c %d -P %d on each master at once (ceiling: the "
                           "slowest master)",
                           o.ceiling_clients, o.ceiling_pipeline),
                    ratio_of(ours, top),
                    "",
                    {}};
  r.add_extra("redlock_masters", static_cast<double>(masters));
  for (std::size_t m = 0; m < masters; ++m) {
    std::vector<double> pairs, acquire, release;
    for (const auto& run : runs) {
      if (m >= run.size()) continue;
      pairs.push_back(run[m].pairs());
      acquire.push_back(run[m].acquire_rps);
      release.push_back(run[m].release_rps);
    }
    const std::string p = "master_" + std::to_string(m + 1);
    if (m < s.masters.size()) {
      r.add_extra(p, connection_options::from_url(s.masters[m]).redacted_url());
    }
    r.add_extra(p + "_pairs", median(pairs));
    r.add_extra(p + "_acquire_rps", median(acquire));
    r.add_extra(p + "_release_rps", median(release));
  }
  r.add_extra("rb_commands", ceiling.describe(o.ceiling_clients, o.ceiling_pipeline));
  r.add_extra(
      "rb_pairs_note",
      std::string("per master, pairs/s = 1/(1/acquire + 1/release rps): what one RedLock pair "
                  "runs on every master once the name's fencing counters are level (no fence "
                  "write-back); all five run at once, and the ceiling is the slowest master's, "
                  "median over the slices"));
  return r;
}

}  // namespace

std::vector<scenario_result> run_redlock(const redlock_settings& s, const redlock_options& o) {
  if (s.standalone.url.empty()) throw std::invalid_argument("redlock_settings: no standalone url");
  if (s.masters.size() < 3) throw std::invalid_argument("redlock_settings: fewer than 3 masters");
  if (!(s.standalone.seconds > 0)) throw std::invalid_argument("seconds must be positive");
  const auto& st = s.standalone;
  const int rounds = std::max(1, st.rounds);
  const double slice = st.seconds / rounds;
  auto say = [&](const std::string& m) {
    if (st.progress) st.progress(m);
  };
  std::array<compared_client, 2> sides{
      compared_client{
          "redlock", with_client_knobs(st, client_options::redlock_masters(s.masters)), {}},
      compared_client{"standalone", with_client_knobs(st, client_options::from_url(st.url)), {}}};
  lease_options lo;
  lo.lease_time = o.lease;
  std::vector<scenario_result> results;

  if (o.uncontended) {
    for (const bool reentrant : {false, true}) {
      const std::string kind = reentrant ? "reentrant" : "simple";
      std::array<std::unique_ptr<client>, 2> clients;
      for (std::size_t k = 0; k < 2; ++k)
        clients[k] = std::make_unique<client>(sides[k].options);
      const auto medians = interleaved(rounds, sides, [&](compared_client& sd) {
        auto& c = *clients[&sd == &sides[0] ? 0 : 1];
        const std::string name = "dlock-bench:rl:uncontended:" + kind;
        const auto run = run_timed(1, slice, [&](int) {
          auto l = reentrant ? c.reentrant(name).acquire(lo) : c.simple(name).acquire(lo);
          if (!l || !l.release()) throw std::runtime_error("redlock uncontended: not granted");
        });
        say(format("redlock uncontended %-9s %-10s %8.0f pairs/s", kind.c_str(), sd.name.c_str(),
                   run.rate()));
        return run.rate();
      });
      results.push_back(
          row("redlock.uncontended." + kind, "pairs/s", medians, s.masters.size(), rounds));
    }
  }

  // The masters' ceiling: redis-benchmark on each master at once, over its own connections.
  std::optional<script_ceiling> ceiling;
  if (o.ceiling && (!o.threads.empty() || !o.async_chains.empty())) {
    std::vector<connection_options> masters;
    for (const auto& url : s.masters)
      masters.push_back(connection_options::from_url(url));
    ceiling.emplace(script_ceiling::redlock(st.redis_benchmark, masters, o.lease));
  }
  double ceiling_estimate = 0;  // requests/s per master; 0: redis-benchmark's smallest run
  for (const auto& load : throughput_loads(o.threads, o.async_chains)) {
    const std::string label = load.label();
    std::array<std::unique_ptr<client>, 2> clients;
    std::array<std::vector<simple_lock>, 2> locks;
    for (std::size_t k = 0; k < 2; ++k) {
      clients[k] = std::make_unique<client>(sides[k].options);
      for (int i = 0; i < load.count; ++i)
        locks[k].push_back(clients[k]->simple("dlock-bench:rl:tp:" + std::to_string(i)));
    }
    std::vector<std::vector<script_rates>> ceiling_runs;  // per slice, per master
    std::function<void()> measure_ceiling;
    if (ceiling) {
      measure_ceiling = [&] {
        ceiling_runs.push_back(
            ceiling->measure(o.ceiling_clients, o.ceiling_pipeline, slice, ceiling_estimate));
        say(format("redlock throughput %s %-10s %8.0f pairs/s (slowest master)", label.c_str(),
                   "ceiling", slowest_pairs(ceiling_runs.back())));
      };
    }
    const auto medians = interleaved(
        rounds, sides,
        [&](compared_client& sd) {
          const auto run = run_throughput_load(locks[&sd == &sides[0] ? 0 : 1], load, slice, lo,
                                               "redlock throughput");
          say(format("redlock throughput %s %-10s %8.0f pairs/s", label.c_str(), sd.name.c_str(),
                     run.rate()));
          return run.rate();
        },
        measure_ceiling);
    const std::string name = "redlock.throughput." + load.row_suffix();
    auto r = row(name, "pairs/s", medians, s.masters.size(), rounds);
    r.add_extra("note", std::string(load.how()));
    results.push_back(std::move(r));
    if (ceiling) results.push_back(ceiling_row(name, medians.first, ceiling_runs, *ceiling, s, o));
  }
  if (ceiling) ceiling->cleanup();

  if (o.handoff_clients > 0) {
    const int n = o.handoff_clients;
    std::array<std::vector<std::unique_ptr<client>>, 2> clients;
    for (std::size_t k = 0; k < 2; ++k) {
      for (int i = 0; i < n; ++i)
        clients[k].push_back(std::make_unique<client>(sides[k].options));
    }
    std::array<std::vector<double>, 2> handoffs;
    const auto medians = interleaved(rounds, sides, [&](compared_client& sd) {
      const std::size_t k = &sd == &sides[0] ? 0 : 1;
      std::atomic<int> last{-1};
      std::atomic<std::uint64_t> changes{0};
      const auto run = run_timed(
          n, slice,
          [&](int i) {
            auto l = clients[k][static_cast<std::size_t>(i)]
                         ->reentrant("dlock-bench:rl:handoff")
                         .acquire(lo);
            if (!l) throw std::runtime_error("redlock handoff: not granted");
            if (last.exchange(i) != i) changes.fetch_add(1, std::memory_order_relaxed);
            l.release();
          },
          [&] { changes = 0; });
      handoffs[k].push_back(run.steps > 0 ? run.rate() * static_cast<double>(changes.load()) /
                                                static_cast<double>(run.steps)
                                          : 0);
      say(format("redlock handoff %d clients %-10s %8.0f acquisitions/s", n, sd.name.c_str(),
                 run.rate()));
      return run.rate();
    });
    results.push_back(row("redlock.handoff.clients=" + std::to_string(n), "acquisitions/s", medians,
                          s.masters.size(), rounds));
    results.push_back(row("redlock.handoff.clients=" + std::to_string(n), "hand-offs/s",
                          {median(handoffs[0]), median(handoffs[1])}, s.masters.size(), rounds));
  }
  return results;
}

}  // namespace dlock::bench
