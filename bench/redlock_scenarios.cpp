#include "redlock_scenarios.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <memory>
#include <stdexcept>
#include <utility>

#include <dlock/dlock.hpp>

#include "bench_support.hpp"

namespace dlock::bench {

namespace {

const char* const standalone_name = "the same on one standalone redis-server";

double ratio_of(double a, double b) {
  return b != 0 ? a / b : 0;
}

// One side of a comparison: how to make a client for it, and the rates of its slices.
struct side {
  std::string name;
  client_options options;
  std::vector<double> rates;
};

// Runs `slice_of(side)` for each side in `rounds` interleaved slices, alternating which goes
// first, and returns {RedLock's median, standalone's median}.
std::pair<double, double> interleaved(int rounds, std::array<side, 2>& sides,
                                      const std::function<double(side&)>& slice_of) {
  for (auto& sd : sides)
    sd.rates.clear();
  for (int round = 0; round < rounds; ++round) {
    for (int k = 0; k < 2; ++k) {
      auto& sd = sides[static_cast<std::size_t>((round + k) % 2)];
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
  r.extra.push_back({"redlock_masters", static_cast<double>(masters)});
  r.extra.push_back({"slices_per_topology", static_cast<double>(rounds)});
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
  std::array<side, 2> sides{side{"redlock", client_options::redlock_masters(s.masters), {}},
                            side{"standalone", client_options::from_url(st.url), {}}};
  lease_options lo;
  lo.lease_time = o.lease;
  std::vector<scenario_result> results;

  if (o.uncontended) {
    for (const bool reentrant : {false, true}) {
      const std::string kind = reentrant ? "reentrant" : "simple";
      std::array<std::unique_ptr<client>, 2> clients;
      for (std::size_t k = 0; k < 2; ++k)
        clients[k] = std::make_unique<client>(sides[k].options);
      const auto medians = interleaved(rounds, sides, [&](side& sd) {
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

  for (const int threads : o.threads) {
    std::array<std::unique_ptr<client>, 2> clients;
    for (std::size_t k = 0; k < 2; ++k)
      clients[k] = std::make_unique<client>(sides[k].options);
    const auto medians = interleaved(rounds, sides, [&](side& sd) {
      auto& c = *clients[&sd == &sides[0] ? 0 : 1];
      const auto run = run_timed(threads, slice, [&](int i) {
        auto l = c.simple("dlock-bench:rl:tp:" + std::to_string(i)).acquire(lo);
        if (!l || !l.release()) throw std::runtime_error("redlock throughput: not granted");
      });
      say(format("redlock throughput %3d threads %-10s %8.0f pairs/s", threads, sd.name.c_str(),
                 run.rate()));
      return run.rate();
    });
    auto r = row("redlock.throughput.threads=" + std::to_string(threads), "pairs/s", medians,
                 s.masters.size(), rounds);
    r.extra.push_back({"note", std::string("one client, N threads, distinct keys")});
    results.push_back(std::move(r));
  }

  if (o.handoff_clients > 0) {
    const int n = o.handoff_clients;
    std::array<std::vector<std::unique_ptr<client>>, 2> clients;
    for (std::size_t k = 0; k < 2; ++k) {
      for (int i = 0; i < n; ++i)
        clients[k].push_back(std::make_unique<client>(sides[k].options));
    }
    std::array<std::vector<double>, 2> handoffs;
    const auto medians = interleaved(rounds, sides, [&](side& sd) {
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
