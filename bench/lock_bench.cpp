// dlock_lock_bench — dlock's locks next to references measured in the same invocation,
// interleaved, against the same server: uncontended lock+unlock, throughput on distinct keys,
// hand-off under contention, and the watchdog holding many leases. Prints ratios, never a
// verdict; DESIGN.md §6's targets are shown for the reader.

#include <cstdio>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <dlock/dlock.hpp>
#include <nlohmann/json.hpp>

#include "bench_support.hpp"
#include "embedded/redis_server.hpp"
#include "lock_scenarios.hpp"

namespace {

namespace bench = dlock::bench;

struct settings {
  double seconds = 3;
  int rounds = 6;
  std::string url;
  bool json = false;
  bool quick = false;
  bool no_extra = false;
  std::vector<std::string> only;
  std::vector<int> threads;
  int workers = 8;
  bool no_shared_client = false;
  bool simple_handoff = false;
  bool throughput_try_acquire = false;
  std::size_t leases = 0;
  int watchdog_lease_ms = 0;
  int watchdog_period_ms = 0;
  std::string redis_benchmark = "redis-benchmark";
};

int run(settings cfg) {
  namespace emb = dlock::embedded;
  const std::set<std::string> only(cfg.only.begin(), cfg.only.end());
  const auto wanted = [&](const char* name) { return only.empty() || only.count(name) > 0; };
  if (wanted("throughput") && !emb::server_available(cfg.redis_benchmark)) {
    std::fprintf(stderr, "%s not found (Debian: apt-get install redis-tools)\n",
                 cfg.redis_benchmark.c_str());
    return bench::exit_skip;
  }
  std::unique_ptr<emb::redis_server> embedded;
  std::string url = cfg.url;
  if (url.empty()) {
    if (!emb::server_available()) {
      std::fprintf(stderr, "redis-server not found; install it or pass --url\n");
      return bench::exit_skip;
    }
    embedded = std::make_unique<emb::redis_server>();  // stopped by its destructor
    url = embedded->url();
  }

  std::string where;
  {
    dlock::redis_client control(url);
    where = control.options().redacted_url() + " (" + (embedded ? "embedded " : "") +
            "redis-server " + bench::server_version(control) + ")";
  }
  std::fprintf(stderr, "%s, %g s per measurement in %d interleaved slice%s\n", where.c_str(),
               cfg.seconds, cfg.rounds, cfg.rounds == 1 ? "" : "s");

  bench::bench_settings s;
  s.url = url;
  s.seconds = cfg.seconds;
  s.rounds = cfg.rounds;
  s.redis_benchmark = cfg.redis_benchmark;
  s.progress = [](std::string_view m) {
    std::fprintf(stderr, "  %.*s\n", static_cast<int>(m.size()), m.data());
  };

  std::vector<bench::scenario_result> results;
  const auto append = [&](std::vector<bench::scenario_result> r) {
    results.insert(results.end(), std::make_move_iterator(r.begin()),
                   std::make_move_iterator(r.end()));
  };
  if (wanted("uncontended")) append(bench::run_uncontended(s));
  if (wanted("throughput")) {
    bench::throughput_options o;
    if (cfg.quick) o.threads = {1, 4};
    if (!cfg.threads.empty()) o.threads = cfg.threads;
    o.try_acquire = cfg.throughput_try_acquire;
    append(bench::run_throughput(s, o));
  }
  if (wanted("handoff")) {
    bench::handoff_options o;
    o.workers = cfg.workers;
    o.shared_client_variant = !cfg.no_shared_client && !cfg.quick;
    o.reentrant = !cfg.simple_handoff;
    append(bench::run_handoff(s, o));
  }
  if (wanted("watchdog")) {
    bench::watchdog_options o;
    if (cfg.quick) {
      o.leases = 1000;
      o.lease = std::chrono::milliseconds(600);
      o.period = std::chrono::milliseconds(200);
      o.periods = 2;
    }
    if (cfg.leases > 0) o.leases = cfg.leases;
    if (cfg.watchdog_lease_ms > 0) o.lease = std::chrono::milliseconds(cfg.watchdog_lease_ms);
    if (cfg.watchdog_period_ms > 0) o.period = std::chrono::milliseconds(cfg.watchdog_period_ms);
    append(bench::run_watchdog(s, o));
  }

  if (cfg.json) {
    std::cout << bench::scenarios_json(nlohmann::ordered_json(results)) << '\n';
  } else {
    std::printf("\n%s, %g s per measurement, %d interleaved slice%s\n\n", where.c_str(),
                cfg.seconds, cfg.rounds, cfg.rounds == 1 ? "" : "s");
    std::fputs(bench::format_results_table(results, !cfg.no_extra).c_str(), stdout);
    std::fputs(
        "\nratio = dlock / reference, both measured in this run, interleaved (for latencies,\n"
        "commands/acquisition and CPU, lower is better). Targets are shown, never judged.\n"
        "References:\n"
        "  raw SET NX PX + compare-and-delete: SET key token NX PX 30000, then EVALSHA of a\n"
        "    GET/DEL script, through the same dlock::redis_client as the lock.\n"
        "  2 x PING: two PINGs per pair through that redis_client (one round trip each).\n"
        "  redis-benchmark -c N -P P: the simple lock's acquire and release scripts (EVALSHA),\n"
        "    keys spread with -r. A pair is two requests, so its pairs/s =\n"
        "    1/(1/acquire rps + 1/release rps) = its requests/s over both runs / 2.\n"
        "  zero-sleep try_acquire() spin: the same workers, one client each, calling\n"
        "    try_acquire() (one attempt) in a tight loop.\n"
        "  DESIGN target: the number from DESIGN.md section 6 itself.\n"
        "Commands are client-issued ones from INFO commandstats (evalsha, eval, [p]subscribe,\n"
        "[p]unsubscribe; set and ping for the raw and PING references).\n",
        stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  settings cfg;
  CLI::App app{
      "dlock's locks next to references measured in the same run: uncontended lock+unlock, "
      "throughput on distinct keys, hand-off under contention, watchdog leases."};
  app.add_option("--seconds", cfg.seconds, "Duration of each measurement")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--rounds", cfg.rounds, "Interleaved slices per measurement")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("--url", cfg.url, "Use this server instead of starting an embedded one");
  app.add_flag("--json", cfg.json, "Print JSON instead of a table");
  app.add_flag("--quick", cfg.quick,
               "Smaller runs (threads 1,4; 1000 watchdog leases with short periods; no "
               "shared-client hand-off variant)");
  app.add_flag("--no-extra", cfg.no_extra, "Table only, without each row's extra fields");
  app.add_option("--only", cfg.only, "Scenarios to run (comma-separated)")
      ->delimiter(',')
      ->check(CLI::IsMember({"uncontended", "throughput", "handoff", "watchdog"}));
  app.add_option("--threads", cfg.threads, "Throughput thread counts (default 1,4,16,64)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1024));
  app.add_flag("--throughput-try-acquire", cfg.throughput_try_acquire,
               "Diagnostic: throughput with try_acquire() instead of acquire()");
  app.add_option("--workers", cfg.workers, "Hand-off workers")
      ->check(CLI::Range(2, 256))
      ->capture_default_str();
  app.add_flag("--no-shared-client", cfg.no_shared_client,
               "Skip the hand-off variant with one client shared by all workers");
  app.add_flag("--simple-handoff", cfg.simple_handoff,
               "Hand-off on the simple lock instead of the reentrant one");
  app.add_option("--leases", cfg.leases, "Watchdog leases to hold (default 10000)")
      ->check(CLI::Range(1, 10'000'000));
  app.add_option("--watchdog-lease", cfg.watchdog_lease_ms, "Watchdog lease in ms (default 3000)")
      ->check(CLI::Range(1, 3'600'000));
  app.add_option("--watchdog-period", cfg.watchdog_period_ms,
                 "Watchdog period in ms (default 1000)")
      ->check(CLI::Range(1, 3'600'000));
  app.add_option("--redis-benchmark", cfg.redis_benchmark, "The redis-benchmark program")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (cfg.quick && app.count("--rounds") == 0) cfg.rounds = 1;

  try {
    return run(cfg);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock_lock_bench: %s\n", e.what());
    return 1;
  }
}
