// A Redis Cluster: commands go to the master that owns their key's slot, over one pipelined
// connection per master (more per master measured slower: docs/benchmarks.md). MOVED updates
// the slot map and resends; ASK resends once to the importing node after ASKING; TRYAGAIN and
// CLUSTERDOWN are retried while the caller's deadline allows. The whole map is fetched again
// (CLUSTER SLOTS) after a MOVED, after a node becomes unreachable and after a subscription is
// displaced, which is how a failover is followed. Unlock channels use sharded pub/sub on the slot's
// node (SSUBSCRIBE/SPUBLISH), as Redisson does on Redis 7.
#pragma once

#include <array>
#include <asio/steady_timer.hpp>
#include <atomic>
#include <memory>
#include <unordered_map>
#include <vector>

#include "core/sync.hpp"
#include "topology/cluster_map.hpp"
#include "topology/topology.hpp"

namespace dlock::detail {

class cluster_topology final : public topology {
 public:
  /// Reads the slot map from the first seed that answers and connects to the masters (in the
  /// background). `node_options` holds credentials, TLS and timeouts for every node. Throws
  /// errc::connect_failed when no seed answers CLUSTER SLOTS (the message has each seed's
  /// reason), errc::invalid_argument when a seed is not in cluster mode.
  cluster_topology(const std::vector<connection_options>& seeds, std::shared_ptr<net::io_thread> io,
                   write_ack ack);
  ~cluster_topology() override;

  net::io_thread& io() noexcept override { return *io_; }
  std::span<const node_id> nodes_for(std::string_view key) override;
  route route_of(node_id node, std::string_view key) const override;
  void eval(node_id node, const script& s, std::span<const std::string_view> keys,
            std::span<const std::string_view> args, net::clock::time_point deadline, durability d,
            net::reply_callback done) override;
  void command(std::string_view key, std::span<const std::string_view> args,
               net::clock::time_point deadline, net::reply_callback done) override;
  std::string_view publish_command() const noexcept override { return "spublish"; }
  std::string_view numsub_command() const noexcept override { return "SHARDNUMSUB"; }
  std::uint64_t subscribe(node_id node, const std::string& channel, message_handler on_message,
                          std::function<void()> on_subscribed) override;
  void unsubscribe(std::uint64_t id) override;
  void close(std::error_code reason) override;
  redis_client& redis() noexcept override;
  std::vector<redis_client*> masters() override;

 private:
  struct node;
  struct call;
  struct subscription_record {
    std::string channel;
    message_handler on_message;
    std::function<void()> on_subscribed;
    node_id where = 0;
    std::uint64_t inner = 0;
  };

  std::shared_ptr<node> node_at(node_id id) const;
  void release_on_io(std::unique_ptr<redis_client> c);
  void discard_nodes();
  node_id node_for(const node_address& address);
  void send(const std::shared_ptr<call>& c, node_id target, bool asking);
  void on_reply(const std::shared_ptr<call>& c, node_id from, std::error_code ec, reply r);
  void refresh_map();
  void refresh_later();
  void apply(const slot_ranges& map);
  void rehome_subscriptions();
  void place(subscription_record& s);

  const std::shared_ptr<net::io_thread> io_;
  const connection_options node_options_;
  const write_ack ack_;
  std::array<std::atomic<node_id>, cluster_slots> owner_{};

  mutable mutex nodes_mutex_;
  std::vector<std::shared_ptr<node>> nodes_ DLOCK_GUARDED_BY(nodes_mutex_);

  // I/O thread only.
  std::unordered_map<std::uint64_t, subscription_record> subscriptions_;
  std::uint64_t next_subscription_ = 1;
  bool refreshing_ = false;
  bool refresh_wanted_ = false;
  bool closed_ = false;
  std::chrono::milliseconds refresh_backoff_{0};
  asio::steady_timer refresh_timer_;
};

}  // namespace dlock::detail
