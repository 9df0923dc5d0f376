// The server side's ceiling for the topology benches: redis-benchmark running the simple lock's own
// scripts (EVALSHA) with many connections and deep pipelines, so that the client costs next to
// nothing and what is measured is what the servers serve. The standalone throughput scenario
// measures its ceiling the same way (lock_scenarios.cpp); this does it for
//
//  * a Redis Cluster: one `redis-benchmark --cluster --threads 1` over all its masters.
//    redis-benchmark binds each connection to one master (round robin: 17/17/16 of 50 over 3;
//    the requests, counted globally, go to whichever connections are served fastest) and
//    replaces `{tag}` in the keys with a hash tag of that master's first slot, so each master's
//    keys share one slot of it; `__rand_int__` still spreads them over many keys. The release
//    run's keys are set beforehand on each master under the tag it will use, learned from a probe
//    run. With `{tag}` in the command, error replies (MOVED and ASK, but also NOSCRIPT or
//    CROSSSLOT) do not stop redis-benchmark 7.0 and count as requests, so every master's INFO
//    total_error_replies is checked around each run;
//  * RedLock's independent masters: one redis-benchmark per master, all at once, each running
//    what one RedLock lock+unlock pair runs on every master once the name's fencing counters
//    are level (no fence write-back, docs/redlock.md): the acquire script and the release
//    script. Each master's pairs/s is 1 / (1/acquire + 1/release); a RedLock pair needs every
//    master (a majority to be granted, all of them for the release), so the ceiling is the
//    slowest master's.
//
// Every key written starts with "dlock-bench:rb:" or is its fencing counter
// (keys_of_lock("dlock-bench:rb..."); cleanup() deletes them.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <dlock/redis/connection_options.hpp>

namespace dlock::bench {

/// One redis-benchmark measurement on one target (a server, or a whole cluster).
struct script_rates {
  double acquire_rps = 0;
  double release_rps = 0;
  double release_hit_fraction = 0;  ///< releases that found their key (the real release path)
  /// Pairs/s with the runs' scripts done one after the other: 1 / (1/acquire + 1/release).
  double pairs() const;
};

class script_ceiling {
 public:
  /// A Redis Cluster whose masters are `masters` (any order; each must serve slots). Probes which
  /// hash tag redis-benchmark uses on each master (one short run). Throws std::runtime_error if
  /// redis-benchmark fails, dlock::error if a master does not answer.
  static script_ceiling cluster(std::string program, const std::vector<connection_options>& masters,
                                std::chrono::milliseconds lease);
  /// Independent masters (RedLock): one redis-benchmark per master, run at once.
  static script_ceiling redlock(std::string program, const std::vector<connection_options>& masters,
                                std::chrono::milliseconds lease);

  script_ceiling(script_ceiling&&) noexcept;
  script_ceiling& operator=(script_ceiling&&) noexcept;
  ~script_ceiling();

  /// One measurement: the acquire run on every target at once, then the release run, each about
  /// seconds / runs long at `estimate` requests/s per target (updated with what was measured; 0:
  /// redis-benchmark's smallest sensible run). -c clients -P pipeline per redis-benchmark. Returns
  /// one result per target: one for a cluster, one per master (in the order given) for RedLock.
  /// Throws std::runtime_error if a run fails or a server answered it with an error.
  std::vector<script_rates> measure(int clients, int pipeline, double seconds, double& estimate);

  /// The redis-benchmark command lines of one measurement, for the reader (placeholders kept).
  std::string describe(int clients, int pipeline) const;

  /// Deletes every key the measurements left on every master.
  void cleanup();

 private:
  struct impl;
  explicit script_ceiling(std::unique_ptr<impl> i);
  std::unique_ptr<impl> impl_;
};

}  // namespace dlock::bench
