// dlock bench: dlock's locks beside references measured in the same run. The work is the
// scenario library's run_bench (bench/bench_run.hpp), shared with dlock_lock_bench; this file
// maps the command's options and failures and draws the progress line.
#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>

#include "bench_run.hpp"
#include "cli.hpp"
#include "embedded/redis_server.hpp"
#include "progress_line.hpp"

namespace dlock::cli {
namespace {

struct bench_args {
  std::vector<std::string> scenarios;  // empty: all but observability
  std::string url;                     // empty: a private redis-server (DLOCK_URL is not read)
  double seconds = 3;                  // each measurement
  bool json = false;
  std::string plot_dir;      // empty: no charts
  std::string metrics_file;  // empty: none; else one measured client's Prometheus text
  // standalone; cluster: a private server and a private 3-master cluster side by side; redlock:
  // five private masters beside a private server.
  std::string topology = "standalone";
};

int bench(const bench_args& args) {
  bench::bench_run_options o;
  o.scenarios = args.scenarios;
  o.url = args.url;
  o.seconds = args.seconds;
  o.rounds = 0;  // from --seconds: one interleaved slice per 0.25 s, 1 to 6
  o.json = args.json;
  o.plot_dir = args.plot_dir;
  o.metrics_file = args.metrics_file;
  o.topology = args.topology;

  progress_line line("dlock bench");  // erased on the way out, whatever happens
  std::ostringstream results;
  try {
    bench::run_bench(
        o, results, [&](std::string_view m) { line.show(m); },
        [&](std::string_view m) { line.warn(m); });
  } catch (const bench::bench_usage_error& e) {
    throw failure(exit_usage, std::string("bench: ") + e.what());
  } catch (const bench::missing_program& e) {
    throw failure(exit_unavailable, std::string("bench: ") + e.what());
  } catch (const embedded::server_error& e) {
    throw failure(exit_unavailable, std::string("bench: ") + e.what());
  }
  line.clear();
  std::cout << results.str() << std::flush;
  return exit_ok;
}

class bench_command final : public subcommand {
 public:
  explicit bench_command(CLI::App& app)
      : subcommand(app.add_subcommand(
            "bench",
            "Benchmark the locks beside references measured in the same run (docs/cli.md)")) {
    app_->add_option("scenario", args_.scenarios,
                     "Scenarios to run (default: all but observability)")
        ->check(CLI::IsMember(dlock::bench::scenario_names()))
        ->type_name("SCENARIO");
    app_->add_option("--seconds", args_.seconds, "Each measurement's duration (default 3)")
        ->check([](const std::string& text) -> std::string {
          char* end = nullptr;
          const double v = std::strtod(text.c_str(), &end);
          if (end == text.c_str() || *end != '\0' || !(v > 0) || v > 3600) {
            return "expected a number of seconds above 0 and at most 3600, got '" + text + "'";
          }
          return "";
        })
        ->type_name("N");
    app_->add_flag("--json", args_.json, "Print JSON (schema: docs/cli.md)");
    app_->add_option("--plot", args_.plot_dir, "Also draw PNG charts (gnuplot) into DIR")
        ->type_name("DIR");
    app_->add_option("--metrics", args_.metrics_file,
                     "Also write one measured client's metrics (Prometheus text) to FILE: the "
                     "first scenario's that has one (uncontended's when it runs)")
        ->type_name("FILE");
    app_->add_option("--topology", args_.topology,
                     "standalone (default); cluster: a private 3-master cluster beside a private "
                     "server (throughput, watchdog); redlock: five private RedLock masters "
                     "beside a private server (uncontended, throughput, handoff)")
        ->check(CLI::IsMember(dlock::bench::topology_names()))
        ->type_name("TOPOLOGY");
    app_->footer(R"(
Scenarios: uncontended (lock+unlock pairs, one thread), throughput (pairs/s against threads,
beside redis-benchmark), handoff (8 workers contending for one key, beside a try_acquire spin),
watchdog (10,000 leases renewed in batches); and, only when named, observability (a client
with events, a debug logger and metrics on, beside one with all of them off: one thread, and 16
threads). Each row shows dlock, a reference measured in the same run and their ratio. The server
is a private redis-server unless --url is given explicitly ($DLOCK_URL is not used: the
benchmark loads the server and writes dlock-bench:* keys). --metrics FILE writes one measured
client's metrics as Prometheus text: the first scenario's that has one (docs/cli.md).
--topology cluster starts a private 3-master Redis Cluster and a private redis-server (never
--url) and runs throughput (16 and 64 threads) and watchdog on both: the cluster's figures
beside the standalone's, their ratio, and the commands each master received.
--topology redlock starts five private independent masters and a private redis-server (never
--url) and runs uncontended, throughput (16 threads) and handoff (8 clients) on both: RedLock's
figures beside the standalone's, and their ratio.

Examples:
  dlock bench --seconds 1
  dlock bench throughput handoff --plot /tmp/dlock-plots
  dlock bench observability --seconds 2
  dlock bench uncontended --metrics /tmp/dlock-bench.prom
  dlock --url redis://redis.test:6379 bench uncontended --json
  dlock bench --topology cluster --seconds 2
  dlock bench --topology redlock --seconds 2)");
  }
  int run(const invocation& in) override {
    // Only an explicit --url: DLOCK_URL must not send a benchmark to a shared server silently.
    if (!in.target.urls.empty()) args_.url = resolve_url(in.target.urls);
    return bench(args_);
  }

 private:
  bench_args args_;
};

}  // namespace

std::unique_ptr<subcommand> add_bench_command(CLI::App& app) {
  return std::make_unique<bench_command>(app);
}

}  // namespace dlock::cli
