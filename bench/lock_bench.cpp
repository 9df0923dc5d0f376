// dlock_lock_bench — dlock's locks next to references measured in the same invocation,
// interleaved, against the same server: uncontended lock+unlock, throughput on distinct keys,
// hand-off under contention, and the watchdog holding many leases. Prints ratios, never a
// verdict; the targets of docs/design.md are shown for the reader.

#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "allocation_count.hpp"
#include "bench_run.hpp"
#include "bench_support.hpp"

int main(int argc, char** argv) {
  // The driver lives in the scenario library (bench_run.hpp), shared with `dlock bench`; this
  // program only maps its flags onto it.
  namespace bench = dlock::bench;
  bench::bench_run_options o;
  bool no_extra = false;
  bool no_shared_client = false;
  CLI::App app{
      "dlock's locks next to references measured in the same run: uncontended lock+unlock, "
      "throughput on distinct keys, hand-off under contention, watchdog leases."};
  app.add_option("--seconds", o.seconds, "Duration of each measurement")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--rounds", o.rounds, "Interleaved slices per measurement")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("--url", o.url, "Use this server instead of starting an embedded one");
  app.add_option("--topology", o.topology,
                 "standalone, or cluster: throughput and watchdog on an embedded 3-master cluster "
                 "beside an embedded server (redlock: uncontended, throughput and handoff on five "
                 "embedded masters beside an embedded server)")
      ->check(CLI::IsMember(bench::topology_names()))
      ->capture_default_str();
  app.add_flag("--json", o.json, "Print JSON instead of a table");
  app.add_flag("--quick", o.quick,
               "Smaller runs (threads 1,4; 1000 watchdog leases with short periods; no "
               "shared-client hand-off variant)");
  app.add_flag("--no-extra", no_extra, "Table only, without each row's extra fields");
  app.add_option("--only", o.scenarios, "Scenarios to run (comma-separated)")
      ->delimiter(',')
      ->check(CLI::IsMember(bench::scenario_names()));
  app.add_option("--plot", o.plot_dir,
                 "Also write charts (gnuplot data, scripts and PNGs) into this directory");
  app.add_option("--threads", o.threads, "Throughput thread counts (default 1,4,16,64)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1024));
  app.add_option("--command-connections", o.command_connections,
                 "Command connections of the uncontended and throughput clients (default: the "
                 "library's, client_options::command_connections)")
      ->check(CLI::Range(1, 64));
  app.add_option("--busy-poll", o.busy_poll_us,
                 "client_options::busy_poll of the uncontended and throughput clients, in "
                 "microseconds (default: the library's; 0 turns it off)")
      ->check(CLI::Range(0, 10000));
  std::map<std::string, dlock::load_polling> load_polling_names;
  for (const auto& [name, mode] : dlock::bench::load_polling_names)
    load_polling_names.emplace(name, mode);
  app.add_option("--busy-poll-under-load", o.busy_poll_under_load,
                 "client_options::busy_poll_under_load of the uncontended and throughput clients: "
                 "never, when-it-pays (the default) or always")
      ->transform(CLI::CheckedTransformer(load_polling_names));
  app.add_flag("--throughput-try-acquire", o.throughput_try_acquire,
               "Diagnostic: throughput with try_acquire() instead of acquire()");
  app.add_option("--workers", o.workers, "Hand-off workers")
      ->check(CLI::Range(2, 256))
      ->capture_default_str();
  app.add_flag("--no-shared-client", no_shared_client,
               "Skip the hand-off variant with one client shared by all workers");
  app.add_flag("--simple-handoff", o.simple_handoff,
               "Hand-off on the simple lock instead of the reentrant one");
  app.add_option("--leases", o.leases, "Watchdog leases to hold (default 10000)")
      ->check(CLI::Range(1, 10'000'000));
  app.add_option("--watchdog-lease", o.watchdog_lease_ms, "Watchdog lease in ms (default 3000)")
      ->check(CLI::Range(1, 3'600'000));
  app.add_option("--watchdog-period", o.watchdog_period_ms, "Watchdog period in ms (default 1000)")
      ->check(CLI::Range(1, 3'600'000));
  app.add_option("--redis-benchmark", o.redis_benchmark, "The redis-benchmark program")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (o.quick && app.count("--rounds") == 0) o.rounds = 1;
  o.with_extra = !no_extra;
  o.shared_client_variant = !no_shared_client;
  o.allocations = bench::counting_allocations();

  try {
    bench::run_bench(
        o, std::cout,
        [](std::string_view m) {
          std::fprintf(stderr, "  %.*s\n", static_cast<int>(m.size()), m.data());
        },
        [](std::string_view m) {
          std::fprintf(stderr, "dlock_lock_bench: warning: %.*s\n", static_cast<int>(m.size()),
                       m.data());
        });
    return 0;
  } catch (const bench::missing_program& e) {
    std::fprintf(stderr, "dlock_lock_bench: %s\n", e.what());
    return bench::exit_skip;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock_lock_bench: %s\n", e.what());
    return 1;
  }
}
