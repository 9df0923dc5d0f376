// The lock benchmark as one call, shared by `dlock_lock_bench` and the CLI's `dlock bench`:
// picks the server (a private redis-server unless a URL is given; with topology "cluster" a
// private server and a private 3-master cluster side by side), runs the chosen scenarios,
// prints their results as a table or JSON, and optionally draws charts with gnuplot. The callers
// only parse their flags and decide where progress and warnings go.
#pragma once

#include <cstddef>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "lock_scenarios.hpp"

namespace dlock::bench {

/// The scenarios run_bench knows, in the order it runs them: "uncontended", "throughput",
/// "handoff", "watchdog", "observability".
const std::vector<std::string>& scenario_names();

/// Whether run_bench runs `scenario` when none is named: all but "observability", which measures
/// dlock against itself (an option's cost) rather than against a reference, and whose rows would
/// lengthen every default run and change its row set.
bool runs_by_default(std::string_view scenario);

/// The topologies bench_run_options::topology accepts: "standalone", "cluster" and "redlock".
const std::vector<std::string>& topology_names();

struct bench_run_options {
  /// Scenarios to run (names from scenario_names(), in any order; duplicates are ignored). They
  /// always run in scenario_names()'s order. Empty: those that run by default (runs_by_default).
  std::vector<std::string> scenarios;
  /// The server (redis://, rediss:// or unix://). Empty: a private redis-server on a free
  /// loopback port, started for the run and stopped at its end. Must be empty with
  /// topology "cluster".
  std::string url;
  /// "standalone": the scenarios on one server. "cluster": a private standalone redis-server
  /// and a private 3-master Redis Cluster, both started for the run and stopped at its end,
  /// and the throughput (16 and 64 threads, then 16 and 64 async chains) and watchdog scenarios
  /// on both, the cluster's figures beside the standalone's (cluster_scenarios.hpp); only those
  /// two scenarios can be chosen, and neither `url` nor `plot_dir` is accepted; the throughput
  /// rows also give the cluster's redis-benchmark ceiling. "redlock": five private masters beside a
  /// private server, uncontended, throughput (with the masters' redis-benchmark ceiling) and
  /// handoff (redlock_scenarios.hpp), with the same restrictions.
  std::string topology = "standalone";
  /// Duration of each measurement (dlock's and each reference's); bench_settings::seconds.
  double seconds = 3;
  /// Interleaved slices per measurement (bench_settings::rounds). 0: from `seconds`, one slice
  /// per 0.25 s, between 1 and 6.
  int rounds = 6;
  bool json = false;       ///< JSON ({"scenarios": [...]}) instead of the table
  bool with_extra = true;  ///< the table is followed by each row's extra fields
  /// Smaller runs: throughput at 1 and 4 threads, 1000 watchdog leases with short periods, no
  /// shared-client hand-off variant.
  bool quick = false;
  /// When not empty: write the charts' data, gnuplot scripts and PNGs into this directory
  /// (created if needed); see write_plots().
  std::string plot_dir;
  std::string gnuplot = "gnuplot";
  std::string redis_benchmark = "redis-benchmark";
  /// When not empty: at the end of the run, write to this file (created or truncated before
  /// anything runs) the Prometheus text (write_prometheus) of ONE measured client: the first the
  /// chosen scenarios report through bench_settings::client_metrics, in scenario_names()'s order
  /// (uncontended's client when it runs), after a comment line naming it. One client, because
  /// the text of two would repeat its families. Standalone topology only.
  std::string metrics_file;

  // Scenario knobs (0 or empty: the scenario's default).
  std::vector<int> threads;  ///< throughput thread counts
  /// client_options::command_connections of the uncontended and throughput clients (with
  /// --topology cluster or redlock: of both sides' clients; masters keep one connection each)
  std::size_t command_connections = 0;
  /// client_options::busy_poll of those clients, in microseconds; -1: the library's default
  int busy_poll_us = -1;
  /// client_options::busy_poll_under_load of those clients
  dlock::load_polling busy_poll_under_load = dlock::load_polling::when_it_pays;
  /// bench_settings::allocations: set by a program that counts them (dlock_lock_bench).
  allocation_counter allocations;
  bool throughput_try_acquire = false;
  int workers = 8;  ///< hand-off workers
  bool shared_client_variant = true;
  bool simple_handoff = false;
  std::size_t leases = 0;  ///< watchdog
  int watchdog_lease_ms = 0;
  int watchdog_period_ms = 0;
};

/// Options that cannot work: an unknown scenario or topology, a non-positive duration, a plot
/// directory that cannot be created, a metrics file that cannot be written, a combination the
/// topology does not support. Thrown before anything runs (a metrics file whose writing fails at
/// the end of the run throws it too).
class bench_usage_error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// A program the run needs is not installed: redis-server (no URL given), redis-benchmark
/// (the throughput scenario, on every topology) or redis-cli (topology "cluster" creates the
/// cluster with it). Thrown before anything runs; the message says what to install.
class missing_program : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Runs the benchmark and writes its results to `out`: the table (preceded by the server and the
/// settings, followed by the references' descriptions and, with plot_dir, the charts' paths), or
/// `{"scenarios": [scenario_result, ...]}` (plus "plots": [path, ...] with plot_dir). Progress
/// goes to `progress` one line at a time as the run advances; warnings (gnuplot missing or
/// failing: the results are still written) to `warn`, or to `progress` when `warn` is empty.
/// Either may be empty. Returns the results.
/// Throws bench_usage_error, missing_program, embedded::server_error (the private server failed
/// to start), dlock::error (talking to the server) and std::runtime_error (a scenario failed).
std::vector<scenario_result> run_bench(const bench_run_options& options, std::ostream& out,
                                       const progress_callback& progress,
                                       const progress_callback& warn = {});

// ---- charts ------------------------------------------------------------------------------------

struct plot_settings {
  std::string dir;                  ///< must exist
  std::string gnuplot = "gnuplot";  ///< the program
  std::string caption;              ///< a line under each chart's title (server, settings)
};

/// Writes, for each chart the results allow, DIR/NAME.dat (the data), DIR/NAME.gp (a gnuplot
/// script that reads it; `cd DIR && gnuplot NAME.gp` redraws it) and runs gnuplot to draw
/// DIR/NAME.png:
///  - throughput: pairs/s against threads (throughput rows): dlock, redis-benchmark -c N -P 1
///    and the redis-benchmark ceiling;
///  - latency_uncontended: the lock+unlock pair latency distributions of dlock's variants and the
///    raw and PING references (uncontended rows), as a CDF and as tail percentiles;
///  - latency_handoff: the release->next-holder distributions of dlock's variants and the spin
///    reference (handoff rows), likewise.
/// Returns the PNGs drawn. gnuplot missing, or failing on a chart, is reported through `warn` (one
/// line) and leaves the .dat and .gp files in place.
std::vector<std::string> write_plots(const std::vector<scenario_result>& results,
                                     const plot_settings& settings, const progress_callback& warn);

}  // namespace dlock::bench
