// dlock_client_bench — throughput of dlock's multiplexed, auto-pipelined client next to
// redis-benchmark, against the same server at the same concurrency, in one invocation.
//
// A scenario with N callers runs N threads that share ONE dlock::redis_client and issue
// synchronous commands in a loop, so each caller has exactly one command outstanding. The
// reference is `redis-benchmark -c N -P 1`: N connections, one command outstanding on each.
// Both runs of a pair go back to back because a shared machine is noisy; with --repeat R the
// pairs repeat (alternating which side goes first) and medians are reported.

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <iostream>
#include <latch>
#include <memory>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <dlock/dlock.hpp>
#include <nlohmann/json.hpp>

#include "bench_support.hpp"
#include "embedded/redis_server.hpp"

namespace {

namespace bench = dlock::bench;
using bench::exit_skip;
using bench::median;
using clock_type = std::chrono::steady_clock;

// INCR makes the script do a real key write rather than only crossing into Lua. Both sides run
// this exact script on this one key (redis-benchmark cannot vary the key per connection).
constexpr std::string_view bench_script = "return redis.call('INCR', KEYS[1])";
constexpr std::string_view bench_key = "dlock-bench:counter";

enum class scenario_kind { ping, evalsha };

struct scenario {
  scenario_kind kind;
  std::string name;
};

struct settings {
  double seconds = 3;
  std::string url;
  int repeat = 3;
  bool json = false;
  std::vector<int> callers{1, 16, 64};
  std::string only;
  std::string redis_benchmark = "redis-benchmark";
};

// ---------------------------------------------------------------------------------------------
// Our side

struct dlock_sample {
  double ops_per_sec = 0;
  double commands_per_write = 0;
};

dlock_sample run_dlock(const std::string& url, const scenario& sc, const dlock::script& s,
                       int callers, double seconds) {
  // A fresh client per run, so no connection state or counters carry over between runs.
  dlock::redis_client client(url);
  const std::array<std::string_view, 1> keys{bench_key};
  dlock::client_counters before{}, after{};
  const auto run = bench::run_timed(
      callers, seconds,
      [&](int) {
        if (sc.kind == scenario_kind::ping) {
          client.command({"PING"});
        } else {
          client.eval(s, keys, std::span<const std::string_view>());
        }
      },
      [&] { before = client.counters(); }, [&] { after = client.counters(); });
  const auto writes = after.writes - before.writes;
  return {run.rate(), writes == 0
                          ? 0.0
                          : static_cast<double>(after.commands_sent - before.commands_sent) /
                                static_cast<double>(writes)};
}

// ---------------------------------------------------------------------------------------------
// redis-benchmark

double run_reference(const settings& cfg, const std::vector<std::string>& server,
                     const scenario& sc, const std::string& sha, int callers,
                     std::int64_t requests) {
  bench::redis_benchmark_run run;
  run.program = cfg.redis_benchmark;
  run.server = server;
  run.clients = callers;
  run.pipeline = 1;
  run.requests = requests;
  if (sc.kind == scenario_kind::ping) {
    run.tests = "ping_mbulk";  // PING sent as a multi-bulk array, exactly as our client sends it
  } else {
    run.command = {"evalsha", sha, "1", std::string(bench_key)};
  }
  // Generous: a run that takes 20x longer than planned means something is wrong.
  run.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::duration<double>(60 + cfg.seconds * 20));
  return bench::run_redis_benchmark(run);
}

// ---------------------------------------------------------------------------------------------
// Driver

struct result {
  std::string scenario;
  int callers = 0;
  double dlock = 0;
  double reference = 0;
  double ratio = 0;
  double commands_per_write = 0;
};

result measure(const settings& cfg, const std::string& url, const std::vector<std::string>& server,
               const scenario& sc, const dlock::script& s, int callers) {
  std::vector<double> ours, theirs, ratios, per_write;
  // redis-benchmark takes a request count, not a duration: size it from the last rate seen for
  // this pair so both sides run about `seconds`.
  double reference_estimate = 0;
  for (int rep = 0; rep < cfg.repeat; ++rep) {
    dlock_sample d;
    double ref = 0;
    const auto run_ours = [&] { d = run_dlock(url, sc, s, callers, cfg.seconds); };
    const auto run_theirs = [&] {
      const double rate = reference_estimate > 0 ? reference_estimate : d.ops_per_sec;
      const auto requests = std::max<std::int64_t>(std::max(1000, callers * 10),
                                                   static_cast<std::int64_t>(rate * cfg.seconds));
      ref = run_reference(cfg, server, sc, s.sha1(), callers, requests);
      reference_estimate = ref;
    };
    // Alternate which side goes first, so neither always gets the "fresher" machine. The first
    // pair runs ours first because its rate sizes redis-benchmark's first run.
    if (rep % 2 == 0) {
      run_ours();
      run_theirs();
    } else {
      run_theirs();
      run_ours();
    }
    std::fprintf(stderr,
                 "  %-8s %3d callers  #%d: dlock %10.0f ops/s  redis-benchmark %10.0f ops/s\n",
                 sc.name.c_str(), callers, rep + 1, d.ops_per_sec, ref);
    ours.push_back(d.ops_per_sec);
    theirs.push_back(ref);
    ratios.push_back(d.ops_per_sec / ref);
    per_write.push_back(d.commands_per_write);
  }
  // The ratio is the median of per-pair ratios: each pair shares the machine's momentary state.
  return {sc.name, callers, median(ours), median(theirs), median(ratios), median(per_write)};
}

void print_table(const std::vector<result>& results, const std::string& where,
                 const settings& cfg) {
  std::printf("\n%s, %g s per run, median of %d pair%s\n\n", where.c_str(), cfg.seconds, cfg.repeat,
              cfg.repeat == 1 ? "" : "s");
  bench::text_table table;
  table.header = {"scenario", "callers",   "dlock ops/s", "redis-benchmark ops/s",
                  "ratio",    "cmds/write"};
  for (const auto& r : results) {
    table.rows.push_back({r.scenario, std::to_string(r.callers), bench::format("%.0f", r.dlock),
                          bench::format("%.0f", r.reference), bench::format("%.2f", r.ratio),
                          bench::format("%.2f", r.commands_per_write)});
  }
  std::fputs(table.render().c_str(), stdout);
  std::printf(
      "\nratio = dlock / redis-benchmark (-c callers -P 1), median over pairs.\n"
      "cmds/write = commands per socket write on dlock's one connection (> 1: auto-pipelining).\n");
}

void print_json(const std::vector<result>& results) {
  nlohmann::json scenarios = nlohmann::json::array();
  for (const auto& r : results) {
    scenarios.push_back(
        {{"name", r.scenario},
         {"callers", r.callers},
         {"dlock", r.dlock},
         {"reference", r.reference},
         {"reference_name", "redis-benchmark -c " + std::to_string(r.callers) + " -P 1"},
         {"ratio", r.ratio},
         {"commands_per_write", r.commands_per_write}});
  }
  std::cout << bench::scenarios_json(scenarios) << '\n';
}

int run(const settings& cfg) {
  namespace emb = dlock::embedded;
  if (!emb::server_available(cfg.redis_benchmark)) {
    std::fprintf(stderr, "%s not found (Debian: apt-get install redis-tools)\n",
                 cfg.redis_benchmark.c_str());
    return exit_skip;
  }
  std::unique_ptr<emb::redis_server> embedded;
  std::string url = cfg.url;
  if (url.empty()) {
    if (!emb::server_available()) {
      std::fprintf(stderr, "redis-server not found; install it or pass --url\n");
      return exit_skip;
    }
    embedded = std::make_unique<emb::redis_server>();  // stopped by its destructor
    url = embedded->url();
  }
  const auto options = dlock::connection_options::from_url(url);
  const auto server = bench::server_flags(options);

  // Declared after the server, so destroyed before it.
  dlock::redis_client control(url);
  const dlock::script s{std::string(bench_script)};
  // Loaded up front so both sides run pure EVALSHA (never NOSCRIPT + EVAL).
  const auto loaded = control.command({"SCRIPT", "LOAD", bench_script}).str();
  if (loaded != s.sha1()) throw std::runtime_error("SCRIPT LOAD returned " + loaded);
  const std::string where = options.redacted_url() + " (" + (embedded ? "embedded " : "") +
                            "redis-server " + bench::server_version(control) + ")";
  std::fprintf(stderr, "%s\n", where.c_str());

  std::vector<scenario> scenarios;
  if (cfg.only.empty() || cfg.only == "ping") scenarios.push_back({scenario_kind::ping, "ping"});
  if (cfg.only.empty() || cfg.only == "evalsha") {
    scenarios.push_back({scenario_kind::evalsha, "evalsha"});
  }

  std::vector<result> results;
  for (const auto& sc : scenarios) {
    for (const int callers : cfg.callers) {
      results.push_back(measure(cfg, url, server, sc, s, callers));
    }
  }
  control.command({"DEL", bench_key});  // leave a shared (--url) server as we found it

  if (cfg.json) {
    print_json(results);
  } else {
    print_table(results, where, cfg);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  settings cfg;
  CLI::App app{
      "Throughput of dlock's multiplexed client (N caller threads, one connection) next to "
      "redis-benchmark -c N -P 1, against the same server."};
  app.add_option("--seconds", cfg.seconds, "Duration of each measurement")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--url", cfg.url, "Use this server instead of starting an embedded one");
  app.add_option("--repeat", cfg.repeat, "Pairs per scenario; medians are reported")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_flag("--json", cfg.json, "Print JSON instead of a table");
  app.add_option("--callers", cfg.callers, "Comma-separated caller-thread counts")
      ->delimiter(',')
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--only", cfg.only, "Run one scenario only")
      ->check(CLI::IsMember({"ping", "evalsha"}));
  app.add_option("--redis-benchmark", cfg.redis_benchmark, "The redis-benchmark program")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  try {
    return run(cfg);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock_client_bench: %s\n", e.what());
    return 1;
  }
}
