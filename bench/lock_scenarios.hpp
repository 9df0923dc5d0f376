// dlock's lock benchmarks, as a library: each scenario measures dlock and a reference in the same
// call, interleaved, against one server, and returns rows of {dlock, reference, ratio}. Nothing
// here prints or parses arguments: `dlock_lock_bench` and `dlock bench` do that. Nothing here
// judges either: the target docs/design.md sets is carried along as text for the reader.
//
// Every key a scenario writes starts with "dlock-bench:" (or is a key derived from such a lock
// name, dlock/keys.hpp); each scenario deletes them when it ends, so a shared server (--url) is
// left as it was found.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "dlock/client.hpp"

#include <nlohmann/json_fwd.hpp>

#include "allocation_count.hpp"

namespace dlock::bench {

/// A named value beside a result's main numbers (rates, latencies, counts, notes).
struct extra_field {
  std::string key;
  std::variant<double, std::string> value;
};

/// A latency distribution, summarized at the fixed percentiles of distribution_percentiles().
struct distribution {
  std::size_t samples = 0;
  std::vector<double> values;  ///< values[i] is the distribution_percentiles()[i]-th percentile
};

/// The percentiles a distribution is summarized at, ascending: dense enough to draw its CDF
/// (every 5 % through the body) and its tail (up to 99.99 %).
const std::vector<double>& distribution_percentiles();

/// Summarizes samples (nearest-rank percentiles). An empty input gives an empty distribution.
distribution summarize(std::vector<double> samples);

/// One measured quantity: dlock's value, the reference's value measured in the same run, and
/// their ratio (dlock / reference; whether higher is better depends on the metric).
struct scenario_result {
  std::string name;    ///< e.g. "uncontended.simple"
  std::string metric;  ///< e.g. "pairs/s"
  double dlock = 0;
  double reference = 0;
  std::string reference_name;  ///< what the reference is, e.g. "redis-benchmark -c 50 -P 16"
  double ratio = 0;            ///< dlock / reference (0 if the reference is 0)
  std::string target;          ///< docs/design.md's target for this row ("" if none); not judged
  std::vector<extra_field> extra;
  /// Appends an extra field: a number, or a string (a note, a name).
  void add_extra(std::string key, std::variant<double, std::string> value) {
    extra.push_back({std::move(key), std::move(value)});
  }
  /// Latency distributions behind this row, in microseconds, when it has them (dlock's and the
  /// reference's, measured in the same run): uncontended rows carry one lock+unlock pair's
  /// latency, handoff's "release->next p50" row the release->next-holder latency.
  std::optional<distribution> dlock_latency_us = std::nullopt;
  std::optional<distribution> reference_latency_us = std::nullopt;
};

/// Receives one-line progress messages (e.g. to print to stderr). May be empty.
using progress_callback = std::function<void(std::string_view)>;

/// Settings every scenario shares.
struct bench_settings {
  /// The server (redis://, rediss:// or unix://). Required.
  std::string url;
  /// Duration of each measurement (dlock's, and each reference's).
  double seconds = 3;
  /// Each measurement is split into this many slices, interleaved with the other side's slices
  /// in rotating order, so that drift on a noisy machine hits both sides alike.
  int rounds = 6;
  /// The redis-benchmark program (throughput scenario only).
  std::string redis_benchmark = "redis-benchmark";
  /// client_options::command_connections of the uncontended and throughput clients (and of the
  /// topology benches' clients, with_client_knobs); 0: the library's default.
  std::size_t command_connections = 0;
  /// client_options::busy_poll of those clients, in microseconds; -1: the library's default.
  int busy_poll_us = -1;
  /// client_options::busy_poll_under_load of those clients.
  dlock::load_polling busy_poll_under_load = dlock::load_polling::when_it_pays;
  /// Counts heap allocations where the program can (allocation_count.hpp); the uncontended
  /// scenario then reports allocations per pair.
  allocation_counter allocations;
  progress_callback progress;
  /// Receives the metrics of a scenario's measured dlock client (client::metrics()) just before
  /// the client goes away, with the scenario's name: the one client of uncontended, throughput
  /// and watchdog, handoff's shared client (when that variant runs) and observability's "on"
  /// client. May be empty.
  std::function<void(std::string_view scenario, const metrics_snapshot& metrics)> client_metrics;
};

/// `o` with the client knobs of `s` applied (command_connections when not 0, busy_poll when not
/// -1, busy_poll_under_load): what every scenario's measured clients use, on every topology.
client_options with_client_knobs(const bench_settings& s, client_options o);

/// Hands `line` to `s.progress`, when there is one.
void report(const bench_settings& s, const std::string& line);

/// The reference row of the topology scenarios (cluster, RedLock): the same scenario run on one
/// standalone server.
inline constexpr const char* standalone_name = "the same on one standalone redis-server";

// ---- 1. uncontended ----------------------------------------------------------------------------

/// Sequential lock+unlock pairs from one thread on one key, fixed 30 s lease (no watchdog):
/// dlock's reentrant and simple locks (`acquire()` + `release()`), against
///  (a) two PINGs per pair through dlock's own redis_client, and
///  (b) a raw loop of `SET key token NX PX 30000` + a compare-and-delete script (EVALSHA) through
///      the same redis_client.
/// Also measures the simple lock through `try_acquire()` (no waiting machinery). Every pair's
/// latency is recorded: the rows carry their distributions (dlock_latency_us and, for the raw and
/// PING references, reference_latency_us).
struct uncontended_options {
  std::chrono::milliseconds lease{30'000};
};
std::vector<scenario_result> run_uncontended(const bench_settings& s,
                                             const uncontended_options& o = {});

// ---- 2. throughput -----------------------------------------------------------------------------

/// Lock+unlock pairs/s of the simple lock, each thread on its own key, N threads through ONE
/// dlock client; against redis-benchmark running the simple lock's acquire and release scripts
/// (EVALSHA) with -c N -P 1, and with the "ceiling" -c 50 -P 16. A redis-benchmark pair is two
/// requests, so its pairs/s = 1 / (1/acquire rps + 1/release rps): its requests/s over both runs
/// divided by 2. The acquire run spreads keys with -r; the release run runs on keys pre-set with
/// the token it sends, so it takes the script's real release path (the fraction that did is
/// reported as "rb_release_hit_fraction").
struct throughput_options {
  std::vector<int> threads{1, 4, 16, 64};
  std::chrono::milliseconds lease{30'000};
  int ceiling_clients = 50;
  int ceiling_pipeline = 16;
  /// Diagnostic: take each lock with `try_acquire()` (one attempt, no waiting machinery) instead
  /// of `acquire()`. On private keys both always succeed at once; the difference is what the
  /// waiting path costs.
  bool try_acquire = false;
  /// Also measure N concurrent asynchronous acquire → release chains on the one client (no
  /// thread parked per lock: the event-driven way, as the Node peers work), against the same
  /// ceiling. Empty: skip.
  std::vector<int> async_chains{16, 64};
};
std::vector<scenario_result> run_throughput(const bench_settings& s,
                                            const throughput_options& o = {});

// ---- 3. handoff --------------------------------------------------------------------------------

/// `workers` threads contend for one key, each looping acquire → release at once. Variants:
/// one dlock client per worker (each its own connections, like separate processes), the same
/// with the fair lock (a release wakes only the next waiter in line) and, optionally, one client
/// shared by all workers. Reference: the same workers in a zero-sleep
/// spin loop of `try_acquire()` (one attempt each), one client per worker.
/// Reports acquisitions/s, hand-offs/s (acquisitions by a different worker than the previous
/// one), the release→next-holder latency (release() returning → a different worker's
/// acquisition returning) p50/p99, also in round trips (median PING latency through a dlock
/// client, measured in the same run), and client-issued commands per acquisition from
/// INFO commandstats (evalsha + eval + [p]subscribe + [p]unsubscribe). The "release->next p50"
/// row carries the whole release->next-holder distributions (dlock's variant and the spin's).
struct handoff_options {
  int workers = 8;
  bool shared_client_variant = true;
  bool fair_variant = true;  ///< also the fair lock, one client per worker
  bool reentrant = true;     ///< reentrant lock (default) or simple lock
  std::chrono::milliseconds lease{30'000};
};
std::vector<scenario_result> run_handoff(const bench_settings& s, const handoff_options& o = {});

// ---- 4. watchdog -------------------------------------------------------------------------------

/// Holds `leases` watchdog leases (reentrant locks, distinct keys) through one client and
/// measures, over `periods` watchdog periods (at least `bench_settings::seconds`): renewal
/// script calls per period (round trips), leases per call, and this process's CPU time
/// (getrusage(RUSAGE_SELF) user+sys) as a share of one core. Only meaningful when nothing else
/// in the process runs meanwhile; an embedded server is a separate process and is not counted.
/// References are docs/design.md's targets (≥ 100 leases per round trip, < 5 % of a core).
struct watchdog_options {
  std::size_t leases = 10'000;
  std::chrono::milliseconds lease{3'000};
  std::chrono::milliseconds period{1'000};
  std::size_t renewal_batch = 500;  ///< client_options::renewal_batch
  int periods = 3;
};
std::vector<scenario_result> run_watchdog(const bench_settings& s, const watchdog_options& o = {});

// ---- 5. observability --------------------------------------------------------------------------

/// What events, log lines and metrics cost a client: two clients of the same server, "off"
/// (collect_metrics off, no on_event, no logger) and "on" (collect_metrics, an on_event that
/// counts events and reads their names, a logger at log_level::debug that discards its lines, so
/// that every event is built, queued, delivered and described), both with the client knobs,
/// taking turns in `rounds` slices, the first side alternating per round; each side's figure is
/// the median of its slices. After each of the "on" client's slices the scenario waits (up to
/// 2 s, untimed) for its events to be delivered, so that its delivering thread does not run into
/// the "off" client's slice. Rows, dlock = "on" and reference = "off":
///  - "observability.uncontended": one thread, lock+unlock pairs of a reentrant lock on one key
///    (pairs/s, with each pair's latency distribution on both sides);
///  - "observability.threads=N": N threads through the one client, each looping acquire() +
///    release_async() of a simple lock on its own key, as the throughput scenario does.
/// Each row reports the "on" client's events delivered and dropped while it ran.
struct observability_options {
  int threads = 16;
  std::chrono::milliseconds lease{30'000};
};
std::vector<scenario_result> run_observability(const bench_settings& s,
                                               const observability_options& o = {});

// ---- reporting helpers (format, never print) ---------------------------------------------------

/// The results as a plain-text table (name, metric, dlock, reference, ratio, reference name,
/// target), followed by each row's extra fields and a few percentiles of its distributions.
std::string format_results_table(const std::vector<scenario_result>& results, bool with_extra);

/// {"name", "metric", "dlock", "reference", "reference_name", "ratio", "target", extra…}, in
/// that order: the extra fields are added at the top level of the object (nlohmann's to_json
/// hook; use nlohmann::ordered_json to keep the order). A row with distributions also gets
/// "latency_us": {"dlock": {"samples": N, "p1": …, …, "p99.99": …}, "reference": {…}}.
void to_json(nlohmann::ordered_json& j, const scenario_result& r);

}  // namespace dlock::bench
