// dlock/deployment_options.hpp — where the masters are when Redis runs under Sentinel or as
// RedLock's independent masters: parts of client_options (dlock/client.hpp), in a header of their
// own so that the layers that reach those deployments need nothing above them.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "dlock/redis/connection_options.hpp"

namespace dlock {

/// Where the master is when Redis runs under Sentinel.
struct sentinel_options {
  /// The name the sentinels monitor the master under (`sentinel monitor NAME ...`).
  std::string master_name;
  /// The sentinels, each with its own credentials and TLS settings (a sentinel's ACL is its
  /// own, separate from the data nodes'). Asked in parallel; the master a majority of them names
  /// wins (a sentinel that was down or cut off can name a master already replaced), else the
  /// one most of those that answered name.
  std::vector<connection_options> sentinels;
  /// How often the sentinels are asked where the master is, besides their +switch-master
  /// announcements and every failed connection: a client that missed an announcement (it
  /// reconnected to the old master while it was being replaced, which still says it is a master
  /// until Sentinel demotes it) moves within this period. 0: only on announcements and failures.
  std::chrono::milliseconds master_check_period{1000};
};

/// RedLock: the same lock on several independent masters, held while a majority holds it
/// (docs/redlock.md says when that is worth it, and what it assumes).
struct redlock_options {
  /// The masters, each with its own credentials and TLS settings: at least 3 (5 is usual),
  /// none a replica of another. Empty: not RedLock.
  std::vector<connection_options> masters;
  /// A master's answer to an acquisition counts only within this share of the lease (0.05:
  /// 1.5 s of a 30 s lease); a slower master counts as not granting, so a stalled master
  /// cannot hold acquisitions up. Between 0 and 0.5.
  double node_timeout_factor = 0.05;
};

}  // namespace dlock
