// Lock scenarios on RedLock's independent masters beside one standalone server, measured in the
// same run: what taking a majority of five masters costs against one server. In every row
// `dlock` is the RedLock figure and `reference` the standalone server's, so `ratio` is
// RedLock / standalone, except the throughput ceiling rows, whose reference is what the masters
// themselves serve (ratio: RedLock / ceiling). Nothing here prints, starts servers or judges:
// run_bench (bench_run.hpp) does the first two, the reader the third.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "lock_scenarios.hpp"

namespace dlock::bench {

/// `standalone.url` is the standalone server (its seconds, rounds and progress apply to both);
/// `masters` are redis:// URLs of RedLock's independent masters.
struct redlock_settings {
  bench_settings standalone;
  std::vector<std::string> masters;
};

/// What to measure. The two sides take turns in `rounds` slices (the order alternating per
/// round); each side's figure is the median of its slices.
struct redlock_options {
  /// Uncontended: one thread, sequential acquire() + release() on one key, simple and
  /// reentrant (pairs/s).
  bool uncontended = true;
  /// Throughput: N threads on distinct keys through ONE client (pairs/s), each looping
  /// acquire() + release_async() as the standalone throughput scenario does; empty: skip.
  std::vector<int> threads{16};
  /// Throughput without a thread per lock: N chains of acquire_async + release_async from
  /// completion callbacks on distinct keys through ONE client (run_async_chains; rows
  /// "redlock.throughput.async=N"); empty: skip.
  std::vector<int> async_chains{16};
  /// With either throughput: a third slice per round measures the masters' ceiling, one
  /// `redis-benchmark -c ceiling_clients -P ceiling_pipeline` per master, all at once, each on
  /// what a RedLock pair runs on every master once the name's fencing counters are level (the
  /// simple lock's acquire script and its release script; script_ceiling.hpp;
  /// bench_settings::redis_benchmark is the program). The ceiling is the slowest master's
  /// pairs/s, 1/(1/acquire + 1/release): every pair needs every master.
  bool ceiling = true;
  int ceiling_clients = 50;
  int ceiling_pipeline = 16;
  /// Hand-off: `handoff_clients` threads, each with its own client, contend for one key, each
  /// looping acquire() → release() (acquisitions/s, and hand-offs/s: acquisitions by another
  /// client than the previous one). 0: skip.
  int handoff_clients = 8;
  std::chrono::milliseconds lease{30'000};
};
std::vector<scenario_result> run_redlock(const redlock_settings& s, const redlock_options& o = {});

}  // namespace dlock::bench
