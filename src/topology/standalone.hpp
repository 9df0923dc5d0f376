// One Redis server: every key on node 0, no slots. Also the base of the Sentinel topology, whose
// one server is whichever node the sentinels name master.
//
// Lock names are spread over the server's command connections (client_options::
// command_connections) by their cluster hash slot: one name's calls always share a connection,
// so they run in the order sent, and with several connections the server can work on one
// connection's batch while the client handles another's replies.
#pragma once

#include <memory>

#include "net/redis_client_impl.hpp"
#include "topology/topology.hpp"

namespace dlock::detail {

class standalone_topology : public topology {
 public:
  /// Connects to the server on `io` (the client's I/O thread, which must be stopped before this
  /// object is destroyed). `ack`: what durability::replicas writes wait for. `settings`: whether
  /// every (re)connection checks ROLE, whether to connect in the background. Throws as
  /// redis_client's constructor does (never, when connecting in the background).
  standalone_topology(const connection_options& options, std::shared_ptr<net::io_thread> io,
                      write_ack ack, connect_settings settings = {});

  net::io_thread& io() noexcept override;
  std::span<const node_id> nodes_for(std::string_view key) override;
  route route_of(node_id node, std::string_view key) const override;
  void eval(node_id node, const script& s, std::span<const std::string_view> keys,
            std::span<const std::string_view> args, net::clock::time_point deadline, durability d,
            net::reply_callback done) override;
  void command(std::string_view key, std::span<const std::string_view> args,
               net::clock::time_point deadline, net::reply_callback done) override;
  std::uint64_t subscribe(node_id node, const std::string& channel, message_handler on_message,
                          std::function<void()> on_subscribed) override;
  void unsubscribe(std::uint64_t id) override;
  void close(std::error_code reason) override;
  redis_client& redis() noexcept override;

  /// The command connection that calls on `key` go to (the first key of an eval). Any thread.
  net::connection& connection_for(std::string_view key) noexcept;

 protected:
  redis_client::impl& server() noexcept { return impl_; }

 private:
  std::unique_ptr<redis_client> server_;
  redis_client::impl& impl_;
  const write_ack ack_;
  std::uint32_t lane_of(std::string_view key) const noexcept;
};

}  // namespace dlock::detail
