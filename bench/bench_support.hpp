// Helpers shared by dlock's benchmarks: running redis-benchmark and reading its CSV, server
// facts (version, INFO commandstats), small statistics, and plain-text tables.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <dlock/client.hpp>
#include <dlock/lease.hpp>
#include <dlock/redis/connection_options.hpp>
#include <nlohmann/json_fwd.hpp>

namespace dlock {
class redis_client;
}

namespace dlock::bench {

/// ctest's SKIP_RETURN_CODE for the benchmarks: redis-server or redis-benchmark is missing.
inline constexpr int exit_skip = 77;

/// client_options::busy_poll_under_load's values as the benchmarks' --busy-poll-under-load
/// spells them, in the enum's order.
inline constexpr std::array<std::pair<std::string_view, load_polling>, 3> load_polling_names{{
    {"never", load_polling::never},
    {"when-it-pays", load_polling::when_it_pays},
    {"always", load_polling::always},
}};

// ---- child processes ----

struct process_output {
  int status = 0;    ///< as waitpid reports it
  std::string text;  ///< stdout and stderr, interleaved
};

/// Runs `argv` (PATH lookup for argv[0]) and captures its output. fork/exec rather than popen:
/// no shell quoting, and the child gets PR_SET_PDEATHSIG so it cannot outlive us. A child that
/// overruns `timeout` is killed; either way it is reaped before this returns (or throws).
process_output run_and_capture(const std::vector<std::string>& argv,
                               std::chrono::milliseconds timeout);

// ---- redis-benchmark ----

/// Splits one CSV line; fields may be quoted, with "" standing for a quote.
std::vector<std::string> split_csv(std::string_view line);

/// Reads the requests/second from `redis-benchmark --csv` output: the "rps" column named by the
/// header row (Redis ≥ 7), else the second field (older versions print no header). Anything else
/// (warnings, progress lines ending in \r) is skipped. Throws std::runtime_error if none is found.
double parse_rps(const std::string& output);

/// redis-benchmark's connection flags (-h/-p or -s, -a, --user, --dbnum, TLS) for a server.
std::vector<std::string> server_flags(const connection_options& co);

/// One redis-benchmark invocation.
struct redis_benchmark_run {
  std::string program = "redis-benchmark";
  std::vector<std::string> server;  ///< from server_flags()
  int clients = 1;                  ///< -c
  int pipeline = 1;                 ///< -P
  std::int64_t requests = 10000;    ///< -n
  /// -r: when positive, every `__rand_int__` in the command's arguments is replaced, separately
  /// for each occurrence and each request, by a 12-digit zero-padded number in [0, keyspace).
  std::int64_t keyspace = 0;
  /// A custom command and its arguments; empty means `tests` below.
  std::vector<std::string> command;
  std::string tests;  ///< -t, for built-in tests such as "ping_mbulk"
  std::chrono::milliseconds timeout{60000};
};

/// Runs redis-benchmark and returns its requests/second. Throws std::runtime_error if it fails
/// or overruns its timeout.
double run_redis_benchmark(const redis_benchmark_run& run);

/// A request count for redis-benchmark that lasts about `seconds` at `rate` requests/s, and is
/// large enough that its millisecond timer gives a meaningful rate.
std::int64_t requests_for(double rate, double seconds, int clients, int pipeline);

// ---- the server ----

/// `redis_version` from INFO server, or "?".
std::string server_version(redis_client& r);

/// Calls per command since the server started (or CONFIG RESETSTAT), from INFO commandstats:
/// lower-case command name → calls. Script-internal calls count too, under their own names.
std::map<std::string, std::uint64_t> command_calls(redis_client& r);

/// Deletes every key matching one of `patterns` (SCAN + UNLINK). Returns how many it deleted.
std::uint64_t delete_matching(redis_client& r, const std::vector<std::string>& patterns);

// ---- statistics ----

double median(std::vector<double> v);
/// a / b, or 0 when b is 0 (a reference that measured nothing gives no ratio).
double ratio_of(double a, double b);
/// This process's user plus system CPU time so far, in seconds (getrusage(RUSAGE_SELF)).
double process_cpu_seconds();
/// The p-th percentile (0 ≤ p ≤ 100, nearest rank) of `v`, sorting it; 0 for an empty vector.
double percentile(std::vector<double>& v, double p);

// ---- output ----

/// A plain-text table: a header row, then rows. Columns are as wide as their widest cell.
/// `align` holds 'l' or 'r' per column; columns it does not cover are right-aligned, except the
/// first, which is left-aligned.
struct text_table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::string align;
  std::string render() const;
};

/// `{"scenarios": scenarios}`, indented, as every benchmark prints with --json.
std::string scenarios_json(const nlohmann::json& scenarios);
/// The same, keeping each object's fields in insertion order.
std::string scenarios_json(const nlohmann::ordered_json& scenarios);

/// printf-style formatting into a std::string.
std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// ---- timed multi-threaded loops ----

using clock_type = std::chrono::steady_clock;

double seconds_between(clock_type::time_point a, clock_type::time_point b);

struct timed_run {
  std::uint64_t steps = 0;         // steps completed after the start (the wind-down included)
  clock_type::time_point started;  // the timed window: [started, stopped]
  clock_type::time_point stopped;
  clock_type::time_point joined;  // every thread finished its last step
  double window() const { return seconds_between(started, stopped); }
  // Every counted step completed inside [started, joined].
  double rate() const { return static_cast<double>(steps) / seconds_between(started, joined); }
};

/// Runs `threads` threads. Thread i calls step(i) once to warm up (connections, scripts, code
/// paths), then, once every thread has, in a loop until `seconds` have passed. `at_start` runs on
/// this thread after the warm-ups and before the window opens (threads are parked then);
/// `at_end` after every thread has been joined. The first exception thrown by a step stops
/// everything and is rethrown here, after every thread has been joined.
timed_run run_timed(int threads, double seconds, const std::function<void(int)>& step,
                    const std::function<void()>& at_start = {},
                    const std::function<void()>& at_end = {});

/// What keeps the throughput scenarios' locks busy: `count` threads, each looping acquire() and
/// then release_async() (sent without waiting, so it leaves with the thread's next attempt), or
/// `count` chains of asynchronous calls (run_async_chains). Each thread or chain on its own lock.
struct throughput_load {
  int count = 0;
  bool async = false;
  bool try_acquire = false;  ///< threads call try_acquire() instead of acquire()
  /// " 16 threads", " 64 async chains": for progress lines.
  std::string label() const;
  /// "threads=16", "async=64": the tail of a row's name.
  std::string row_suffix() const;
  /// "threads" or "async_chains": the extra field that carries `count`.
  const char* count_field() const;
  /// What the load does, for a row's note: one client, its threads or chains, distinct keys.
  const char* how() const;
};

/// The loads `threads` then `async_chains` name, in that order.
std::vector<throughput_load> throughput_loads(const std::vector<int>& threads,
                                              const std::vector<int>& async_chains);

/// Runs `load` on locks[0 .. load.count) for `seconds` (`load.count` <= locks.size()): with
/// threads, run_timed (at_start and at_end as there); with chains, run_async_chains, at_start
/// just before it and at_end just after. A thread's acquisition that is not granted throws
/// std::runtime_error naming `what`. A failed release is counted in
/// client_stats::release_failures.
timed_run run_throughput_load(std::vector<simple_lock>& locks, const throughput_load& load,
                              double seconds, const lease_options& lo, const char* what,
                              const std::function<void()>& at_start = {},
                              const std::function<void()>& at_end = {});

/// Keeps `chains` acquire -> release chains going from completion callbacks for `seconds`, chain
/// i on locks[i] (`chains` <= locks.size()): lock+unlock pairs with no thread parked per lock.
/// Each release is sent without waiting for its answer, pipelined with the chain's next attempt,
/// as the threaded throughput loops do (a failed release is counted in
/// client_stats::release_failures). `steps` counts the pairs granted after the window opened;
/// `joined` is when the last chain stopped. Throws std::runtime_error when an acquisition fails
/// or is not granted within 10 s, once every chain has stopped.
timed_run run_async_chains(std::vector<simple_lock>& locks, int chains, double seconds,
                           const lease_options& lo);

}  // namespace dlock::bench
