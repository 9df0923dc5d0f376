// One Redis server: every key on node 0, no slots.
#pragma once

#include <memory>

#include "topology/topology.hpp"

namespace dlock::detail {

class standalone_topology final : public topology {
 public:
  /// Connects to the server on `io` (the client's I/O thread, which must be stopped before this
  /// object is destroyed). Throws as redis_client's constructor does.
  standalone_topology(const connection_options& options, std::shared_ptr<net::io_thread> io);

  net::io_thread& io() noexcept override;
  std::span<const node_id> nodes_for(std::string_view key) override;
  route route_of(node_id node, std::string_view key) const override;
  void eval(node_id node, const script& s, std::span<const std::string_view> keys,
            std::span<const std::string_view> args, net::clock::time_point deadline,
            net::reply_callback done) override;
  std::uint64_t subscribe(node_id node, const std::string& channel, message_handler on_message,
                          std::function<void()> on_subscribed) override;
  void unsubscribe(std::uint64_t id) override;
  void close(std::error_code reason) override;
  redis_client& redis() noexcept override;

 private:
  std::unique_ptr<redis_client> server_;
  redis_client::impl& impl_;
};

}  // namespace dlock::detail
