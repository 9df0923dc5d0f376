#include "cluster_scenarios.hpp"

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>

#include <dlock/dlock.hpp>

#include "bench_support.hpp"
#include "script_ceiling.hpp"

namespace dlock::bench {

namespace {

using namespace std::chrono_literals;

void check(const topology_settings& s) {
  if (s.standalone.url.empty()) throw std::invalid_argument("topology_settings: no standalone url");
  if (s.cluster_seeds.empty()) throw std::invalid_argument("topology_settings: no cluster seeds");
  if (!(s.standalone.seconds > 0)) throw std::invalid_argument("seconds must be positive");
}

// ---- per-master counters ----

// "host:port" of a master: its label in the results.
std::string address_of(const redis_client& r) {
  return r.options().host + ":" + std::to_string(r.options().port);
}

struct node_delta {
  std::uint64_t commands = 0;
  std::uint64_t writes = 0;
};
using node_deltas = std::map<std::string, node_delta>;
using node_counters = std::map<std::string, client_counters>;

// Every master's command-connection counters (the one server on a standalone topology). Read
// on both sides of a window: the masters serving slots do not change while nothing fails.
node_counters master_counters(const client& c) {
  node_counters out;
  for (const auto* m : c.masters())
    out[address_of(*m)] = m->counters();
  return out;
}

void accumulate(node_deltas& into, const node_counters& before, const node_counters& after) {
  for (const auto& [address, a] : after) {
    const auto b = before.find(address);
    const client_counters zero{};
    const auto& from = b == before.end() ? zero : b->second;
    auto& d = into[address];
    d.commands += a.commands_sent - from.commands_sent;
    d.writes += a.writes - from.writes;
  }
}

node_delta total(const node_deltas& d) {
  node_delta t;
  for (const auto& [address, n] : d) {
    t.commands += n.commands;
    t.writes += n.writes;
  }
  return t;
}

// How many of `names` live on each master, as the cluster itself says (CLUSTER KEYSLOT and
// CLUSTER SLOTS): the commands' spread is only as even as the locks' spread.
std::map<std::string, std::size_t> names_per_master(const client& c,
                                                    const std::vector<std::string>& names) {
  const auto masters = c.masters();
  std::map<std::int64_t, std::string> label_of_port;  // ports are unique on one host
  for (const auto* m : masters)
    label_of_port[m->options().port] = address_of(*m);
  auto& any = *masters.front();
  const auto ranges = any.command({"CLUSTER", "SLOTS"});
  std::map<std::string, std::size_t> out;
  for (const auto& name : names) {
    const auto slot = any.command({"CLUSTER", "KEYSLOT", name}).integer();
    for (const auto& range : ranges.elements()) {
      const auto& e = range.elements();
      if (slot < e.at(0).integer() || slot > e.at(1).integer()) continue;
      const auto port = e.at(2).elements().at(1).integer();
      const auto label = label_of_port.find(port);
      ++out[label == label_of_port.end() ? "port " + std::to_string(port) : label->second];
    }
  }
  return out;
}

std::uint64_t redirects(const client_stats& s) {
  return s.moved_redirects + s.ask_redirects;
}

// ---- throughput ----

struct side {
  std::string name;
  std::unique_ptr<client> c;
  std::vector<simple_lock> locks;
  // Per thread count:
  std::vector<double> rates;  // one per slice
  std::uint64_t steps = 0;
  node_deltas nodes;
};

void measure_slice(const bench_settings& s, side& sd, const throughput_load& load, double slice,
                   const lease_options& lo) {
  node_counters before, after;
  const auto run = run_throughput_load(
      sd.locks, load, slice, lo, "cluster throughput", [&] { before = master_counters(*sd.c); },
      [&] { after = master_counters(*sd.c); });
  sd.rates.push_back(run.rate());
  sd.steps += run.steps;
  accumulate(sd.nodes, before, after);
  report(s, format("cluster throughput %s: %-10s %10.0f pairs/s", load.label().c_str(),
                   sd.name.c_str(), run.rate()));
}

}  // namespace

std::vector<scenario_result> run_cluster_throughput(const topology_settings& ts,
                                                    const cluster_throughput_options& o) {
  check(ts);
  const auto& s = ts.standalone;
  const auto loads = throughput_loads(o.threads, o.async_chains);
  if (loads.empty()) return {};
  side standalone, cluster;
  standalone.name = "standalone";
  standalone.c = std::make_unique<client>(with_client_knobs(s, client_options::from_url(s.url)));
  cluster.name = "cluster";
  cluster.c =
      std::make_unique<client>(with_client_knobs(s, client_options::cluster(ts.cluster_seeds)));
  int max_threads = 0;
  for (const auto& load : loads)
    max_threads = std::max(max_threads, load.count);
  std::vector<std::string> names;
  for (int i = 0; i < max_threads; ++i)
    names.push_back("dlock-bench:tp:" + std::to_string(i));
  for (auto* sd : {&standalone, &cluster}) {
    for (const auto& n : names)
      sd->locks.push_back(sd->c->simple(n));
  }
  lease_options lo;
  lo.lease_time = o.lease;

  const int rounds = std::max(1, s.rounds);
  const double slice = s.seconds / rounds;
  const std::size_t masters = cluster.c->masters().size();
  // The cluster's ceiling: redis-benchmark --cluster on the same scripts, over its own
  // connections to the masters (the dlock client's counters are not touched).
  std::optional<script_ceiling> ceiling;
  const std::string ceiling_name =
      format("redis-benchmark --cluster --threads 1 -c %d -P %d (ceiling)", o.ceiling_clients,
             o.ceiling_pipeline);
  if (o.ceiling) {
    std::vector<connection_options> master_options;
    for (const auto* m : cluster.c->masters())
      master_options.push_back(m->options());
    ceiling.emplace(script_ceiling::cluster(s.redis_benchmark, master_options, o.lease));
  }
  double ceiling_estimate = 0;  // requests/s; 0: redis-benchmark sizes its first run minimally
  std::vector<scenario_result> results;
  for (const auto& load : loads) {
    const int threads = load.count;
    for (auto* sd : {&standalone, &cluster}) {
      sd->rates.clear();
      sd->steps = 0;
      sd->nodes.clear();
    }
    std::vector<script_rates> ceiling_runs;
    const auto measure_ceiling = [&] {
      ceiling_runs.push_back(
          ceiling->measure(o.ceiling_clients, o.ceiling_pipeline, slice, ceiling_estimate).at(0));
      report(s, format("cluster throughput %s: %-10s %10.0f pairs/s", load.label().c_str(),
                       "ceiling", ceiling_runs.back().pairs()));
    };
    const auto stats_before = cluster.c->stats();
    for (int round = 0; round < rounds; ++round) {
      // Rotate which side goes first, so that drift on a noisy machine hits all alike. The
      // ceiling's slice never falls between the dlock client's counter readings.
      const std::size_t slots = ceiling ? 3 : 2;
      for (std::size_t k = 0; k < slots; ++k) {
        const auto slot = (static_cast<std::size_t>(round) + k) % slots;
        if (slot == 2) {
          measure_ceiling();
        } else {
          measure_slice(s, slot == 0 ? standalone : cluster, load, slice, lo);
        }
      }
    }
    const auto stats_after = cluster.c->stats();

    const double ours = median(cluster.rates);
    const double ref = median(standalone.rates);
    const auto c_total = total(cluster.nodes);
    const auto s_total = total(standalone.nodes);
    const std::string name = "cluster.throughput." + load.row_suffix();

    scenario_result pairs{name, "pairs/s", ours, ref, standalone_name, ratio_of(ours, ref), "", {}};
    pairs.add_extra(load.count_field(), static_cast<double>(threads));
    pairs.add_extra("cluster_masters", static_cast<double>(masters));
    pairs.add_extra("slices_per_topology", static_cast<double>(rounds));
    pairs.add_extra("cluster_commands_per_pair", ratio_of(c_total.commands, cluster.steps));
    pairs.add_extra("standalone_commands_per_pair", ratio_of(s_total.commands, standalone.steps));
    pairs.add_extra("cluster_commands_per_write", ratio_of(c_total.commands, c_total.writes));
    pairs.add_extra("standalone_commands_per_write", ratio_of(s_total.commands, s_total.writes));
    pairs.add_extra("cluster_redirects",
                    static_cast<double>(redirects(stats_after) - redirects(stats_before)));
    pairs.add_extra(
        "cluster_slot_map_refreshes",
        static_cast<double>(stats_after.slot_map_refreshes - stats_before.slot_map_refreshes));
    pairs.add_extra("note",
                    std::string("median of interleaved slices per topology; ") + load.how());
    results.push_back(std::move(pairs));

    if (ceiling) {
      std::vector<double> acquire, release, hits, pair_rates;
      for (const auto& c : ceiling_runs) {
        acquire.push_back(c.acquire_rps);
        release.push_back(c.release_rps);
        hits.push_back(c.release_hit_fraction);
        pair_rates.push_back(c.pairs());
      }
      const double top = median(pair_rates);
      scenario_result vs_ceiling{name,         "pairs/s",           ours, top,
                                 ceiling_name, ratio_of(ours, top), "",   {}};
      vs_ceiling.add_extra(load.count_field(), static_cast<double>(threads));
      vs_ceiling.add_extra("cluster_masters", static_cast<double>(masters));
      vs_ceiling.add_extra("rb_acquire_rps", median(acquire));
      vs_ceiling.add_extra("rb_release_rps", median(release));
      vs_ceiling.add_extra("rb_release_hit_fraction", median(hits));
      vs_ceiling.add_extra("rb_commands", ceiling->describe(o.ceiling_clients, o.ceiling_pipeline));
      vs_ceiling.add_extra(
          "rb_pairs_note",
          "redis-benchmark pairs/s = 1/(1/acquire rps + 1/release rps), median over the "
          "slices. --cluster deals its connections to the masters in turn and puts each "
          "master's keys in one slot of it ({tag}); the dlock run's keys hash where their "
          "names fall. Any error reply from a master fails the measurement");
      results.push_back(std::move(vs_ceiling));
    }

    // The spread: the busiest master's share of the commands, beside an even spread.
    const auto locks_on = names_per_master(
        *cluster.c, std::vector<std::string>(names.begin(), names.begin() + threads));
    std::uint64_t busiest = 0;
    for (const auto& [address, n] : cluster.nodes)
      busiest = std::max(busiest, n.commands);
    const double share = ratio_of(busiest, c_total.commands);
    const double even = masters > 0 ? 1.0 / static_cast<double>(masters) : 0;
    scenario_result spread{name,
                           "busiest master's share of commands",
                           share,
                           even,
                           format("an even spread over %zu masters", masters),
                           ratio_of(share, even),
                           "",
                           {}};
    // Masters are numbered in address order, the same in every row of the run: stable keys
    // for JSON readers, with each master's address beside them.
    std::size_t index = 0;
    for (const auto& [address, n] : cluster.nodes) {
      const auto locks = locks_on.find(address);
      const std::string m = "master_" + std::to_string(++index);
      spread.add_extra(m, address);
      spread.add_extra(m + "_commands", static_cast<double>(n.commands));
      spread.add_extra(m + "_share", ratio_of(n.commands, c_total.commands));
      spread.add_extra(m + "_locks",
                       static_cast<double>(locks == locks_on.end() ? 0 : locks->second));
    }
    spread.add_extra("standalone_commands", static_cast<double>(s_total.commands));
    spread.add_extra(
        "note",
        "commands per master: redis_client::counters().commands_sent of each of "
        "client::masters(), summed over the timed slices; each thread's lock lives on the "
        "master of its slot");
    results.push_back(std::move(spread));
  }
  if (ceiling) ceiling->cleanup();
  return results;
}

// =============================================================================================
// watchdog

namespace {

struct watchdog_figures {
  std::uint64_t rounds = 0;
  std::uint64_t calls = 0;
  std::uint64_t renewed = 0;
  std::uint64_t lost = 0;
  std::size_t valid_at_end = 0;
  node_deltas nodes;
  double window_s = 0;
  double cpu_share = 0;
  double acquire_s = 0;
  node_delta all() const { return total(nodes); }
  double per_write() const { return ratio_of(renewed, all().writes); }
  double per_round(std::uint64_t n) const { return ratio_of(n, rounds); }
};

watchdog_figures hold_and_measure(const bench_settings& s, client_options co,
                                  const cluster_watchdog_options& o, const std::string& label) {
  co.watchdog_lease = o.lease;
  co.watchdog_period = o.period;
  co.renewal_batch = o.renewal_batch;
  client c(co);
  watchdog_figures f;
  std::vector<lease> leases;
  leases.reserve(o.leases);

  // Single attempts (no waiting machinery), many in flight at once.
  const auto t_acquire = clock_type::now();
  constexpr std::size_t wave = 1000;
  for (std::size_t from = 0; from < o.leases; from += wave) {
    std::vector<std::future<lease>> pending;
    for (std::size_t i = from; i < std::min(o.leases, from + wave); ++i)
      pending.push_back(c.reentrant("dlock-bench:wd:" + std::to_string(i)).acquire_future(-1ms));
    for (auto& p : pending) {
      leases.push_back(p.get());
      if (!leases.back())
        throw std::runtime_error("cluster watchdog: a fresh lock was not granted");
    }
  }
  f.acquire_s = seconds_between(t_acquire, clock_type::now());
  report(s, format("cluster watchdog: %-10s %zu leases taken in %.2f s", label.c_str(),
                   leases.size(), f.acquire_s));

  // Counters are read at quiet moments (no renewal in flight), so that every call and write
  // counted has had its replies counted too: rounds and calls move when a round is sent,
  // leases_renewed as its replies arrive.
  const auto quiet_stats = [&](clock_type::time_point deadline) {
    auto a = c.stats();
    for (;;) {
      std::this_thread::sleep_for(30ms);
      auto b = c.stats();
      if ((b.renewal_rounds == a.renewal_rounds && b.renewal_calls == a.renewal_calls &&
           b.leases_renewed == a.leases_renewed) ||
          clock_type::now() >= deadline) {
        return b;
      }
      a = b;
    }
  };
  const auto wait_rounds = [&](std::uint64_t total_rounds, clock_type::time_point deadline) {
    while (c.stats().renewal_rounds < total_rounds && clock_type::now() < deadline)
      std::this_thread::sleep_for(10ms);
  };
  // Let one round pass first, so the window starts in the steady state.
  wait_rounds(c.stats().renewal_rounds + 1, clock_type::now() + 3 * o.period);
  const auto before = quiet_stats(clock_type::now() + o.period);
  const auto nodes_before = master_counters(c);

  const int periods = std::max(
      {2, o.periods,
       static_cast<int>(std::ceil(s.seconds * 1000.0 / static_cast<double>(o.period.count())))});
  const double cpu0 = process_cpu_seconds();
  const auto t0 = clock_type::now();
  std::this_thread::sleep_for(o.period * periods);
  f.cpu_share = (process_cpu_seconds() - cpu0) / seconds_between(t0, clock_type::now());
  wait_rounds(before.renewal_rounds + static_cast<std::uint64_t>(periods),
              clock_type::now() + 2 * o.period);
  const auto after = quiet_stats(clock_type::now() + o.period);
  accumulate(f.nodes, nodes_before, master_counters(c));
  f.window_s = seconds_between(t0, clock_type::now());

  f.rounds = after.renewal_rounds - before.renewal_rounds;
  f.calls = after.renewal_calls - before.renewal_calls;
  f.renewed = after.leases_renewed - before.leases_renewed;
  f.lost = after.leases_lost;
  for (const auto& l : leases)
    f.valid_at_end += l.valid() ? 1 : 0;
  report(s, format("cluster watchdog: %-10s %" PRIu64 " rounds, %" PRIu64 " calls, %" PRIu64
                   " writes, %" PRIu64 " renewals",
                   label.c_str(), f.rounds, f.calls, f.all().writes, f.renewed));
  leases.clear();  // released before the client goes
  return f;
}

}  // namespace

std::vector<scenario_result> run_cluster_watchdog(const topology_settings& ts,
                                                  const cluster_watchdog_options& o) {
  check(ts);
  if (o.leases == 0) throw std::invalid_argument("cluster watchdog needs at least one lease");
  const auto& s = ts.standalone;
  const auto st = hold_and_measure(s, client_options::from_url(s.url), o, "standalone");
  const auto cl = hold_and_measure(s, client_options::cluster(ts.cluster_seeds), o, "cluster");

  const std::string config = format(
      "%zu leases per topology, lease %lld ms, period %lld ms, "
      "batch %zu",
      o.leases, static_cast<long long>(o.lease.count()), static_cast<long long>(o.period.count()),
      o.renewal_batch);
  const auto add_common = [&](scenario_result& r) {
    r.add_extra("config", config);
    for (const auto& [prefix, f] : {std::pair{"standalone", &st}, std::pair{"cluster", &cl}}) {
      const std::string p = std::string(prefix) + "_";
      r.add_extra(p + "renewal_rounds", static_cast<double>(f->rounds));
      r.add_extra(p + "leases_renewed_per_round", f->per_round(f->renewed));
      r.add_extra(p + "renewal_calls_per_round", f->per_round(f->calls));
      r.add_extra(p + "writes_per_round", f->per_round(f->all().writes));
      r.add_extra(p + "leases_per_renewal_call", ratio_of(f->renewed, f->calls));
      r.add_extra(p + "leases_lost", static_cast<double>(f->lost));
      r.add_extra(p + "leases_valid_at_end", static_cast<double>(f->valid_at_end));
      r.add_extra(p + "window_s", f->window_s);
    }
  };
  const auto row = [&](const std::string& metric, double ours, double ref, std::string target) {
    scenario_result r{"cluster.watchdog", metric, ours, ref, standalone_name, ratio_of(ours, ref),
                      std::move(target),  {}};
    add_common(r);
    return r;
  };

  std::vector<scenario_result> results;
  auto per_write = row("leases renewed per round trip per node", cl.per_write(), st.per_write(),
                       ">= 100 leases per round trip per node");
  std::size_t index = 0;
  for (const auto& [address, n] : cl.nodes) {
    const std::string m = "master_" + std::to_string(++index);
    per_write.add_extra(m, address);
    per_write.add_extra(m + "_writes_per_round", cl.per_round(n.writes));
    per_write.add_extra(m + "_renewal_calls_per_round", cl.per_round(n.commands));
  }
  per_write.add_extra(
      "note",
      "leases_renewed delta / sum of the writes deltas of client::masters(), over whole "
      "renewal rounds; a write to one node is one round trip to it. A renewal call renews "
      "leases of one slot, so on a cluster calls are per slot, and each node's calls of a "
      "round leave pipelined");
  results.push_back(std::move(per_write));
  results.push_back(
      row("renewal calls per round", cl.per_round(cl.calls), st.per_round(st.calls), ""));
  auto cpu = row("client CPU % of a core", 100 * cl.cpu_share, 100 * st.cpu_share, "< 5 % (both)");
  cpu.add_extra("cluster_acquire_s", cl.acquire_s);
  cpu.add_extra("standalone_acquire_s", st.acquire_s);
  results.push_back(std::move(cpu));
  return results;
}

}  // namespace dlock::bench
