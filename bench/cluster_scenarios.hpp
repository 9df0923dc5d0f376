// Lock scenarios on a Redis Cluster beside one standalone server, measured in the same run: lock
// throughput through one client on each (what routing over several masters costs a client, and
// how its commands spread over the masters), and the watchdog holding many leases on each
// (whether renewals stay batched per node). In every row `dlock` is the cluster's figure and
// `reference` the standalone server's, so `ratio` is cluster / standalone, except the ceiling
// rows, whose reference is redis-benchmark on the same cluster (ratio: cluster / its ceiling).
// Nothing here prints, starts servers or judges: run_bench (bench_run.hpp) does the first two, the
// reader the third.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "lock_scenarios.hpp"

namespace dlock::bench {

/// Where the two topologies are: `standalone.url` is the standalone server (its seconds, rounds
/// and progress apply to both); `cluster_seeds` are redis:// URLs of the cluster's nodes.
struct topology_settings {
  bench_settings standalone;
  std::vector<std::string> cluster_seeds;
};

/// Lock+unlock pairs/s of the simple lock, each thread on its own key ("dlock-bench:tp:I", the
/// same names on both), N threads through ONE dlock client per topology, the same loop as the
/// standalone throughput scenario's (acquire, then release_async, which leaves with the thread's
/// next attempt); then N chains of acquire_async + release_async from completion callbacks
/// (run_async_chains), rows "cluster.throughput.async=N". The topologies take turns in `rounds`
/// slices per load (the order alternating per round); each side's figure is the median of its
/// slices. Commands per master are the deltas of each master's
/// `redis_client::counters()` (client::masters()) over the timed slices.
///
/// With `ceiling`, a third slice per round measures the cluster's ceiling: `redis-benchmark
/// --cluster -c ceiling_clients -P ceiling_pipeline` on the simple lock's own acquire and release
/// scripts over all the masters (script_ceiling.hpp; bench_settings::redis_benchmark is the
/// program), and a row gives the cluster's pairs/s over it.
struct cluster_throughput_options {
  std::vector<int> threads{16, 64};
  std::vector<int> async_chains{16, 64};
  std::chrono::milliseconds lease{30'000};
  bool ceiling = true;
  int ceiling_clients = 50;
  int ceiling_pipeline = 16;
};
std::vector<scenario_result> run_cluster_throughput(const topology_settings& s,
                                                    const cluster_throughput_options& o = {});

/// Holds `leases` watchdog leases (reentrant locks "dlock-bench:wd:I") through one client on
/// each topology in turn (standalone first) and measures over `periods` whole renewal rounds
/// (at least 2, and at least bench_settings::seconds): leases renewed per socket write (a
/// write to one node is one round trip to it) = Δleases_renewed / ΣΔwrites over
/// client::masters(), renewal script calls and writes per round, and this process's CPU share.
/// Nothing else runs on the client meanwhile. The counts do not depend on timing, so the two
/// topologies are measured one after the other rather than in slices.
struct cluster_watchdog_options {
  std::size_t leases = 10'000;
  std::chrono::milliseconds lease{3'000};
  std::chrono::milliseconds period{1'000};
  std::size_t renewal_batch = 500;  ///< client_options::renewal_batch
  int periods = 2;
};
std::vector<scenario_result> run_cluster_watchdog(const topology_settings& s,
                                                  const cluster_watchdog_options& o = {});

}  // namespace dlock::bench
