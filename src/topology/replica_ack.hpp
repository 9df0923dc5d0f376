// Replica-acknowledged writes: a script call followed on the same connection by
// `WAIT replicas timeout`, so the reply counts only once enough replicas have the write.
// Redisson checks the same after its lock scripts (checkLockSyncedSlaves); here it is an option
// of every topology with replicas (a standalone master, Sentinel, a cluster's masters).
#pragma once

#include <chrono>
#include <span>
#include <string_view>

#include "net/connection.hpp"

namespace dlock::detail {

/// How many replicas must have a write before its reply counts, and how long to wait for them.
struct write_ack {
  int replicas = 0;  // 0: the master's reply is enough (no WAIT)
  std::chrono::milliseconds timeout{1000};
};

/// Sends EVALSHA `s` and then WAIT on `c`. `done` gets the script's reply with: no error when
/// `ack.replicas` acknowledged it; errc::not_replicated when fewer did in time (the write was
/// made on the master: the caller decides whether to undo it); or the script's or the
/// connection's own error. A NOSCRIPT retry lands after the first WAIT, so a second WAIT covers
/// it. WAIT blocks the connection for up to `ack.timeout` when replicas lag: every command
/// behind it waits as long. `asking`: ASKING right before the script (connection::submit_eval).
void eval_acknowledged(net::connection& c, const script& s, std::span<const std::string_view> keys,
                       std::span<const std::string_view> args, net::clock::time_point deadline,
                       write_ack ack, net::reply_callback done, bool asking = false);

}  // namespace dlock::detail
