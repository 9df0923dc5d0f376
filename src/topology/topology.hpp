// The seam between the locks and the Redis deployment they run on. The lock layer never holds a
// connection: it asks the topology which node serves a key, sends script calls to that node,
// subscribes channels there, and runs its timers on the topology's I/O thread, which belongs to
// the dlock::client. Standalone is the first implementation; Sentinel (the node follows the
// master), Cluster (nodes by slot, MOVED/ASK followed inside eval) and RedLock's independent
// masters (every key on every node) fit the same shape.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

#include <vector>

#include "dlock/redis/client.hpp"
#include "dlock/redis/script.hpp"
#include "net/connection.hpp"
#include "net/io_thread.hpp"
#include "topology/replica_ack.hpp"

namespace dlock::detail {

/// A node of a topology, by index.
using node_id = std::uint32_t;

/// Where a key's commands go. Keys with equal routes share a connection, so calls about them
/// run in the order sent (what a renewal batch needs: renewals sent before a release never run
/// after it). Keys with an equal node and slot may share one script call (`one_script_reaches`).
struct route {
  node_id node = 0;
  std::uint32_t slot = 0;  // 0 where the deployment is not sharded
  std::uint32_t lane = 0;  // which of the node's command connections, where it has several
  friend bool operator==(const route&, const route&) = default;
  friend auto operator<=>(const route&, const route&) = default;
};

/// True if one script call may touch keys at `a` and at `b` (one node, one cluster slot).
inline bool one_script_reaches(const route& a, const route& b) noexcept {
  return a.node == b.node && a.slot == b.slot;
}

/// Whether a write's reply counts on the master's word alone, or only once the replicas the
/// client asks for (client_options::min_replica_acks) have it too (WAIT).
enum class durability { master, replicas };

/// What a topology did beyond passing commands on, for client_stats.
struct topology_counters {
  std::atomic<std::uint64_t> moved{0};            // MOVED redirects followed
  std::atomic<std::uint64_t> asked{0};            // ASK redirects followed
  std::atomic<std::uint64_t> map_refreshes{0};    // cluster slot maps fetched
  std::atomic<std::uint64_t> master_switches{0};  // Sentinel: the master moved
  std::atomic<std::uint64_t> not_replicated{0};   // writes fewer replicas acknowledged than asked
};

class topology {
 public:
  virtual ~topology() = default;

  /// The thread every lock timer, subscription handler and reply callback runs on.
  virtual net::io_thread& io() noexcept = 0;

  /// The nodes that serve `key`: one for a standalone server, a Sentinel master or a cluster
  /// slot; every master for RedLock. Any thread.
  virtual std::span<const node_id> nodes_for(std::string_view key) = 0;
  /// The route of `key` on `node`. Any thread.
  virtual route route_of(node_id node, std::string_view key) const = 0;

  /// Sends one script call to `node` (its keys in one slot); `done` runs once, on the I/O thread
  /// (or inline with errc::client_closed once closed). Redirects and failovers are the
  /// topology's business, not the caller's. Any thread.
  /// The call goes on the connection of `keys[0]`'s route: calls whose first keys share a route
  /// run in the order sent. Every call about a lock therefore puts the lock's own key first, and
  /// a call that undoes another puts the same key first as the call it undoes.
  /// With durability::replicas and min_replica_acks set, the reply comes with
  /// errc::not_replicated when too few replicas acknowledged the write (see replica_ack.hpp).
  virtual void eval(node_id node, const script& s, std::span<const std::string_view> keys,
                    std::span<const std::string_view> args, net::clock::time_point deadline,
                    durability d, net::reply_callback done) = 0;
  /// One plain command about `key` (its first argument after the command name need not be the
  /// key), sent where `key` lives. Same threading as eval.
  virtual void command(std::string_view key, std::span<const std::string_view> args,
                       net::clock::time_point deadline, net::reply_callback done) = 0;

  /// The command lock scripts publish unlock messages with: PUBLISH, or SPUBLISH on a cluster,
  /// where the message then stays on the slot's node (and Redisson on Redis 7 listens there).
  virtual std::string_view publish_command() const noexcept { return "publish"; }
  /// The command that counts a channel's subscribers (PUBSUB NUMSUB or SHARDNUMSUB).
  virtual std::string_view numsub_command() const noexcept { return "NUMSUB"; }

  /// Subscribes `channel` on `node` (RedLock: on every master, since a release publishes on
  /// each). `on_subscribed` runs each time a server confirms it (at first and after every
  /// reconnect). Returns an id for `unsubscribe`. I/O thread only.
  virtual std::uint64_t subscribe(node_id node, const std::string& channel,
                                  message_handler on_message,
                                  std::function<void()> on_subscribed) = 0;
  virtual void unsubscribe(std::uint64_t id) = 0;

  /// Fails every command in flight with `reason` and stops reconnecting. I/O thread only.
  virtual void close(std::error_code reason) = 0;

  /// A plain client for commands of the user's own (the standalone server itself, the current
  /// Sentinel master, a cluster's first master).
  virtual redis_client& redis() noexcept = 0;
  /// Every master, for work that must visit them all (ls scans each). I/O thread excepted.
  virtual std::vector<redis_client*> masters() { return {&redis()}; }

  /// Where cleanup goes that a node could not take because its connection was down (RedLock: the
  /// release of a hold an attempt may have left on a master that dropped off with it on the
  /// wire). A view of this topology whose eval queues a call to a node whose connection is down
  /// for the node's return, ahead of anything sent to it later, until the call's deadline; and,
  /// for a node that is up again, answers errc::connection_lost at once without sending (what
  /// else went to it since could be newer than the cleanup). I/O thread only. Null where calls to
  /// a node that is down wait for it anyway (a single server, Sentinel, a cluster).
  virtual topology* when_back() noexcept { return nullptr; }

  const topology_counters& counters() const noexcept { return counters_; }

 protected:
  /// Sends `s` on `c`, with WAIT behind it when `d` asks for replicas and `ack` has some; counts
  /// writes too few replicas acknowledged. `asking`: ASKING right before the script (a cluster's
  /// ASK redirect). For implementations' eval.
  void eval_on(net::connection& c, const script& s, std::span<const std::string_view> keys,
               std::span<const std::string_view> args, net::clock::time_point deadline,
               durability d, write_ack ack, net::reply_callback done, bool asking = false);

  topology_counters counters_;
};

}  // namespace dlock::detail
