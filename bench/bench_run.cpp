#include "bench_run.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <string_view>
#include <system_error>
#include <utility>

#include <dlock/dlock.hpp>
#include <nlohmann/json.hpp>

#include "bench_support.hpp"
#include "cluster_scenarios.hpp"
#include "embedded/redis_cluster.hpp"
#include "embedded/redis_server.hpp"
#include "redlock_scenarios.hpp"

namespace dlock::bench {

namespace {

const char* const references_text =
    "\nratio = dlock / reference, both measured in this run, interleaved (for latencies,\n"
    "commands/acquisition and CPU, lower is better). Targets are shown, never judged.\n"
    "References:\n"
    "  raw SET NX PX + compare-and-delete: SET key token NX PX 30000, then EVALSHA of a\n"
    "    GET/DEL script, through the same dlock::redis_client as the lock.\n"
    "  2 x PING: two PINGs per pair through that redis_client (one round trip each).\n"
    "  its scripts by hand: the simple lock's own acquire and release scripts (EVALSHA)\n"
    "    through that redis_client: the lock's server work without its client work.\n"
    "  redis-benchmark -c N -P P: the simple lock's acquire and release scripts (EVALSHA),\n"
    "    keys spread with -r. A pair is two requests, so its pairs/s =\n"
    "    1/(1/acquire rps + 1/release rps) = its requests/s over both runs / 2.\n"
    "  zero-sleep try_acquire() spin: the same workers, one client each, calling\n"
    "    try_acquire() (one attempt) in a tight loop.\n"
    "  the same client with events and metrics off: observability's \"off\" client\n"
    "    (collect_metrics off, no on_event, no logger) beside its \"on\" one (dlock: metrics,\n"
    "    an on_event counting events, a logger at debug discarding its lines).\n"
    "  design target: the number docs/design.md (Targets) sets.\n"
    "Commands are client-issued ones from INFO commandstats (evalsha, eval, [p]subscribe,\n"
    "[p]unsubscribe; set and ping for the raw and PING references).\n";

const char* const cluster_references_text =
    "\nratio = cluster / standalone: the same dlock code through one client on each, measured in\n"
    "this run; throughput in interleaved slices (medians), the watchdog one topology after the\n"
    "other (counts per round, and this process's CPU over each window). The cluster's masters\n"
    "share this machine's cores with the client and the standalone server: read the ratios as\n"
    "the cost of routing, not as what scaling out over machines gives (docs/benchmarks.md,\n"
    "Cluster).\n"
    "Commands and writes per master: each master's redis_client::counters(), reached through\n"
    "client::masters(). A write to a node is one round trip to it.\n"
    "(ceiling) rows: ratio = cluster / redis-benchmark --cluster --threads 1 -c 50 -P 16 on the\n"
    "simple lock's acquire and release scripts over the same masters, in a third interleaved\n"
    "slice; its pairs/s = 1/(1/acquire rps + 1/release rps). redis-benchmark deals its\n"
    "connections to the masters in turn and puts each master's keys in one slot of it (the\n"
    "{tag} hash tag); any error reply from a master fails the run.\n";

const char* const redlock_references_text =
    "\nratio = RedLock / standalone: the same dlock code on five private, independent masters\n"
    "(every acquisition asks all five and waits for three, and writes the fence back to those\n"
    "that drew less, if any) and on one private server, measured in this run in interleaved\n"
    "slices (medians). The five masters share this machine's cores with the client: read the\n"
    "ratios as what a majority costs in round trips and server work, not as a network figure\n"
    "(docs/redlock.md).\n"
    "(ceiling) rows: ratio = RedLock / what the masters serve: one redis-benchmark -c 50 -P 16\n"
    "per master, all five at once, on what a RedLock pair runs on every master once the name's\n"
    "fencing counters are level (acquire script, release script); per master pairs/s =\n"
    "1/(1/acquire + 1/release rps), and the ceiling is the slowest master's (every pair needs\n"
    "every master).\n";

int rounds_for(const bench_run_options& o) {
  if (o.rounds > 0) return o.rounds;
  return std::clamp(static_cast<int>(o.seconds / 0.25), 1, 6);
}

using say_fn = std::function<void(const std::string&)>;

// --topology cluster and redlock start deployments of their own, never a caller's (a shared
// server would mix someone else's load into per-node counts, and one topology bench must compare
// two deployments the run controls alike): `measures` are the scenarios each has, `starts` what
// it starts, for the messages.
void check_private_topology(const bench_run_options& o, const std::vector<std::string>& measures,
                            const std::string& starts) {
  std::string list;
  for (const auto& m : measures)
    list += (list.empty() ? "" : (&m == &measures.back() ? " and " : ", ")) + m;
  for (const auto& name : o.scenarios) {
    if (std::find(measures.begin(), measures.end(), name) == measures.end()) {
      throw bench_usage_error("--topology " + o.topology + " measures " + list + ", not '" + name +
                              "'");
    }
  }
  if (!o.url.empty()) {
    throw bench_usage_error("--topology " + o.topology + " starts its own " + starts +
                            "; --url is not accepted with it");
  }
  if (!o.plot_dir.empty()) {
    throw bench_usage_error(
        "--plot draws the standalone scenarios' charts; not available with --topology " +
        o.topology);
  }
  if (!o.metrics_file.empty()) {
    throw bench_usage_error(
        "--metrics writes a standalone scenario's client metrics; not available with --topology " +
        o.topology);
  }
}

bool wants(const bench_run_options& o, const char* scenario) {
  return o.scenarios.empty() ||
         std::find(o.scenarios.begin(), o.scenarios.end(), scenario) != o.scenarios.end();
}

std::vector<scenario_result> print_topology_results(const bench_run_options& o, std::ostream& out,
                                                    std::vector<scenario_result> results,
                                                    const std::string& where,
                                                    const std::string& settings_text,
                                                    const char* references) {
  if (o.json) {
    out << nlohmann::ordered_json{{"scenarios", results}}.dump(2) << '\n';
  } else {
    out << '\n' << where << '\n' << settings_text << "\n\n";
    out << format_results_table(results, o.with_extra);
    out << references;
  }
  out.flush();
  return results;
}

// --topology cluster: a 3-master cluster beside a standalone server.
std::vector<scenario_result> run_on_cluster(const bench_run_options& o, std::ostream& out,
                                            const say_fn& say) {
  namespace emb = dlock::embedded;
  check_private_topology(o, {"throughput", "watchdog"}, "standalone server and 3-master cluster");
  if (!emb::cluster_available()) {
    throw missing_program(
        "--topology cluster needs redis-server and redis-cli (Debian: apt-get install "
        "redis-server redis-tools)");
  }
  if (wants(o, "throughput") && !emb::server_available(o.redis_benchmark)) {
    throw missing_program(o.redis_benchmark +
                          " not found; the throughput scenario measures the cluster's ceiling "
                          "with it (Debian: apt-get install redis-tools)");
  }

  say("starting a private redis-server and a private 3-master Redis Cluster");
  emb::redis_server standalone;  // both stopped by their destructors, whatever happens
  emb::cluster_options co;
  // A node busy with the benchmark on a loaded machine must not be marked failed mid-run.
  co.node_timeout = std::chrono::milliseconds(5000);
  emb::redis_cluster cluster(co);

  std::string where;
  {
    redis_client control(standalone.url());
    where = "standalone: " + control.options().redacted_url() + " (private redis-server " +
            server_version(control) + ")\ncluster: " + std::to_string(cluster.size()) +
            " masters, no replicas (private):";
    for (const auto& url : cluster.seed_urls())
      where += " " + url;
  }
  const int rounds = rounds_for(o);
  const std::string settings_text = format("%g s per measurement in %d interleaved slice%s",
                                           o.seconds, rounds, rounds == 1 ? "" : "s");
  say(settings_text);

  topology_settings ts;
  ts.standalone.url = standalone.url();
  ts.standalone.seconds = o.seconds;
  ts.standalone.rounds = rounds;
  ts.standalone.redis_benchmark = o.redis_benchmark;
  ts.standalone.command_connections = o.command_connections;
  ts.standalone.busy_poll_us = o.busy_poll_us;
  ts.standalone.busy_poll_under_load = o.busy_poll_under_load;
  ts.standalone.progress = [&](std::string_view m) { say(std::string(m)); };
  ts.cluster_seeds = cluster.seed_urls();

  std::vector<scenario_result> results;
  if (wants(o, "throughput")) {
    cluster_throughput_options t;
    if (o.quick) {
      t.threads = {4, 16};
      t.async_chains = {16};
    }
    if (!o.threads.empty()) t.threads = o.threads;
    results = run_cluster_throughput(ts, t);
  }
  if (wants(o, "watchdog")) {
    cluster_watchdog_options w;
    if (o.quick) {
      w.leases = 1000;
      w.lease = std::chrono::milliseconds(600);
      w.period = std::chrono::milliseconds(200);
    }
    if (o.leases > 0) w.leases = o.leases;
    if (o.watchdog_lease_ms > 0) w.lease = std::chrono::milliseconds(o.watchdog_lease_ms);
    if (o.watchdog_period_ms > 0) w.period = std::chrono::milliseconds(o.watchdog_period_ms);
    auto r = run_cluster_watchdog(ts, w);
    results.insert(results.end(), std::make_move_iterator(r.begin()),
                   std::make_move_iterator(r.end()));
  }

  return print_topology_results(o, out, std::move(results), where, settings_text,
                                cluster_references_text);
}

// --topology redlock: five independent masters beside a standalone server.
std::vector<scenario_result> run_on_redlock(const bench_run_options& o, std::ostream& out,
                                            const say_fn& say) {
  namespace emb = dlock::embedded;
  check_private_topology(o, {"uncontended", "throughput", "handoff"},
                         "five masters and standalone server");
  if (!emb::server_available()) {
    throw missing_program(
        "--topology redlock needs redis-server (Debian: apt-get install "
        "redis-server)");
  }
  if (wants(o, "throughput") && !emb::server_available(o.redis_benchmark)) {
    throw missing_program(o.redis_benchmark +
                          " not found; the throughput scenario measures the masters' ceiling "
                          "with it (Debian: apt-get install redis-tools)");
  }
  say("starting a private redis-server and five private RedLock masters");
  emb::redis_server standalone;  // all stopped by their destructors, whatever happens
  std::vector<std::unique_ptr<emb::redis_server>> masters;
  redlock_settings rs;
  for (int i = 0; i < 5; ++i) {
    masters.push_back(std::make_unique<emb::redis_server>());
    rs.masters.push_back(masters.back()->url());
  }
  std::string where;
  {
    redis_client control(standalone.url());
    where = "standalone: " + control.options().redacted_url() + " (private redis-server " +
            server_version(control) + ")\nRedLock: 5 independent masters (private):";
    for (const auto& url : rs.masters)
      where += " " + url;
  }
  const int rounds = rounds_for(o);
  const std::string settings_text = format("%g s per measurement in %d interleaved slice%s",
                                           o.seconds, rounds, rounds == 1 ? "" : "s");
  say(settings_text);
  rs.standalone.url = standalone.url();
  rs.standalone.seconds = o.seconds;
  rs.standalone.rounds = rounds;
  rs.standalone.redis_benchmark = o.redis_benchmark;
  rs.standalone.command_connections = o.command_connections;
  rs.standalone.busy_poll_us = o.busy_poll_us;
  rs.standalone.busy_poll_under_load = o.busy_poll_under_load;
  rs.standalone.progress = [&](std::string_view m) { say(std::string(m)); };
  redlock_options ro;
  ro.uncontended = wants(o, "uncontended");
  if (!wants(o, "throughput")) {
    ro.threads.clear();
    ro.async_chains.clear();
  }
  if (!o.threads.empty() && wants(o, "throughput")) ro.threads = o.threads;
  if (o.quick) ro.handoff_clients = 4;
  if (!wants(o, "handoff")) ro.handoff_clients = 0;
  return print_topology_results(o, out, run_redlock(rs, ro), where, settings_text,
                                redlock_references_text);
}

}  // namespace

const std::vector<std::string>& scenario_names() {
  static const std::vector<std::string> names{"uncontended", "throughput", "handoff", "watchdog",
                                              "observability"};
  return names;
}

bool runs_by_default(std::string_view scenario) {
  return scenario != "observability";
}

const std::vector<std::string>& topology_names() {
  static const std::vector<std::string> names{"standalone", "cluster", "redlock"};
  return names;
}

std::vector<scenario_result> run_bench(const bench_run_options& o, std::ostream& out,
                                       const progress_callback& progress,
                                       const progress_callback& warn) {
  namespace emb = dlock::embedded;
  const auto say = [&](const std::string& m) {
    if (progress) progress(m);
  };
  const auto warning = [&](std::string_view m) {
    if (warn) {
      warn(m);
    } else if (progress) {
      progress(m);
    }
  };

  // ---- everything that can be checked before running ----
  for (const auto& name : o.scenarios) {
    const auto& known = scenario_names();
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      throw bench_usage_error(
          "unknown scenario '" + name +
          "' (expected uncontended, throughput, handoff, watchdog or observability)");
    }
  }
  std::vector<std::string> chosen;
  for (const auto& name : scenario_names()) {
    if (o.scenarios.empty()
            ? runs_by_default(name)
            : std::find(o.scenarios.begin(), o.scenarios.end(), name) != o.scenarios.end()) {
      chosen.push_back(name);
    }
  }
  if (!(o.seconds > 0) || !std::isfinite(o.seconds)) {
    throw bench_usage_error("the duration of a measurement must be a positive number of seconds");
  }
  const auto& topologies = topology_names();
  if (std::find(topologies.begin(), topologies.end(), o.topology) == topologies.end()) {
    throw bench_usage_error("unknown topology '" + o.topology +
                            "' (expected standalone, cluster or redlock)");
  }
  if (o.topology == "redlock") return run_on_redlock(o, out, say);
  if (o.topology == "cluster") return run_on_cluster(o, out, say);
  const bool wants_throughput =
      std::find(chosen.begin(), chosen.end(), "throughput") != chosen.end();
  if (wants_throughput && !emb::server_available(o.redis_benchmark)) {
    throw missing_program(o.redis_benchmark +
                          " not found; the throughput scenario needs it (Debian: apt-get install "
                          "redis-tools)");
  }
  if (o.url.empty() && !emb::server_available()) {
    throw missing_program(
        "redis-server not found; install it (Debian: apt-get install redis-server) or give a "
        "server's URL");
  }
  if (!o.plot_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.plot_dir, ec);
    if (ec || !std::filesystem::is_directory(o.plot_dir)) {
      throw bench_usage_error("cannot create the plot directory " + o.plot_dir + ": " +
                              (ec ? ec.message() : "not a directory"));
    }
  }
  // Opened now, so that a path that cannot be written fails the run before it starts, not after.
  std::ofstream metrics_out;
  if (!o.metrics_file.empty()) {
    metrics_out.open(o.metrics_file, std::ios::out | std::ios::trunc);
    if (!metrics_out) {
      throw bench_usage_error("cannot write the metrics file " + o.metrics_file + ": " +
                              std::strerror(errno));
    }
  }

  // ---- the server ----
  std::unique_ptr<emb::redis_server> embedded;
  std::string url = o.url;
  if (url.empty()) {
    say("starting a private redis-server");
    embedded = std::make_unique<emb::redis_server>();  // stopped by its destructor
    url = embedded->url();
  }
  std::string where;
  {
    redis_client control(url);
    where = control.options().redacted_url() + " (" + (embedded ? "private " : "") +
            "redis-server " + server_version(control) + ")";
  }
  const int rounds = rounds_for(o);
  const std::string settings_text = format("%g s per measurement in %d interleaved slice%s",
                                           o.seconds, rounds, rounds == 1 ? "" : "s");
  say(where + ", " + settings_text);

  // ---- the scenarios ----
  bench_settings s;
  s.url = url;
  s.seconds = o.seconds;
  s.rounds = rounds;
  s.redis_benchmark = o.redis_benchmark;
  s.command_connections = o.command_connections;
  s.busy_poll_us = o.busy_poll_us;
  s.busy_poll_under_load = o.busy_poll_under_load;
  s.allocations = o.allocations;
  // The file takes one client's text (two would repeat its families): the first reported.
  std::optional<metrics_snapshot> kept_metrics;
  std::string kept_from;
  if (metrics_out.is_open()) {
    s.client_metrics = [&](std::string_view scenario, const metrics_snapshot& m) {
      if (kept_metrics) return;
      kept_metrics = m;
      kept_from = scenario;
    };
  }
  std::size_t current = 0;
  s.progress = [&](std::string_view m) {
    say(format("[%zu/%zu] %.*s", current, chosen.size(), static_cast<int>(m.size()), m.data()));
  };

  std::vector<scenario_result> results;
  const auto append = [&](std::vector<scenario_result> r) {
    results.insert(results.end(), std::make_move_iterator(r.begin()),
                   std::make_move_iterator(r.end()));
  };
  for (const auto& name : chosen) {
    ++current;
    s.progress(name + ": starting");
    if (name == "uncontended") {
      append(run_uncontended(s));
    } else if (name == "throughput") {
      throughput_options t;
      if (o.quick) t.threads = {1, 4};
      if (!o.threads.empty()) t.threads = o.threads;
      t.try_acquire = o.throughput_try_acquire;
      append(run_throughput(s, t));
    } else if (name == "handoff") {
      handoff_options h;
      h.workers = o.workers;
      h.shared_client_variant = o.shared_client_variant && !o.quick;
      h.reentrant = !o.simple_handoff;
      append(run_handoff(s, h));
    } else if (name == "watchdog") {
      watchdog_options w;
      if (o.quick) {
        w.leases = 1000;
        w.lease = std::chrono::milliseconds(600);
        w.period = std::chrono::milliseconds(200);
        w.periods = 2;
      }
      if (o.leases > 0) w.leases = o.leases;
      if (o.watchdog_lease_ms > 0) w.lease = std::chrono::milliseconds(o.watchdog_lease_ms);
      if (o.watchdog_period_ms > 0) w.period = std::chrono::milliseconds(o.watchdog_period_ms);
      append(run_watchdog(s, w));
    } else if (name == "observability") {
      append(run_observability(s));
    }
  }
  embedded.reset();  // the private server is no longer needed

  if (metrics_out.is_open()) {
    if (kept_metrics) {
      metrics_out << "# dlock bench: client::metrics() of the " << kept_from
                  << " scenario's measured client, when the scenario ended\n";
      write_prometheus(*kept_metrics, metrics_out);
    } else {
      metrics_out << "# dlock bench: no scenario of this run measured a client of its own\n";
      warning("no scenario of this run measured a client of its own: " + o.metrics_file +
              " holds no metrics");
    }
    metrics_out.close();
    if (!metrics_out) {
      throw bench_usage_error("cannot write the metrics file " + o.metrics_file + ": " +
                              std::strerror(errno));
    }
    if (kept_metrics)
      say("wrote the " + kept_from + " scenario's client metrics to " + o.metrics_file);
  }

  // ---- charts, then the results ----
  std::vector<std::string> plots;
  if (!o.plot_dir.empty()) {
    say("drawing charts in " + o.plot_dir);
    plots = write_plots(results, {o.plot_dir, o.gnuplot, where + ", " + settings_text}, warning);
  }
  if (o.json) {
    nlohmann::ordered_json j{{"scenarios", results}};
    if (!o.plot_dir.empty()) j["plots"] = plots;
    out << j.dump(2) << '\n';
  } else {
    out << '\n' << where << ", " << settings_text << "\n\n";
    out << format_results_table(results, o.with_extra);
    out << references_text;
    if (!plots.empty()) {
      out << "\nCharts:\n";
      for (const auto& p : plots)
        out << "  " << p << '\n';
    }
  }
  out.flush();
  return results;
}

}  // namespace dlock::bench
