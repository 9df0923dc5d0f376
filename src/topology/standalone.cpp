#include "topology/standalone.hpp"

#include "topology/cluster_map.hpp"

namespace dlock::detail {

namespace {
constexpr node_id only_node[] = {0};
}

standalone_topology::standalone_topology(const connection_options& options,
                                         std::shared_ptr<net::io_thread> io, write_ack ack,
                                         connect_settings settings)
    : server_(redis_client_access::on_shared_io(options, std::move(io), std::move(settings))),
      impl_(redis_client_access::get(*server_)),
      ack_(ack) {}

net::io_thread& standalone_topology::io() noexcept {
  return impl_.io;
}

std::span<const node_id> standalone_topology::nodes_for(std::string_view) {
  return only_node;
}

route standalone_topology::route_of(node_id, std::string_view key) const {
  return {.node = 0, .slot = 0, .lane = lane_of(key)};
}

std::uint32_t standalone_topology::lane_of(std::string_view key) const noexcept {
  const auto lanes = impl_.lanes();
  return lanes == 1 ? 0 : static_cast<std::uint32_t>(key_slot(key) % lanes);
}

net::connection& standalone_topology::connection_for(std::string_view key) noexcept {
  return impl_.lane(lane_of(key));
}

void standalone_topology::eval(node_id, const script& s, std::span<const std::string_view> keys,
                               std::span<const std::string_view> args,
                               net::clock::time_point deadline, durability d,
                               net::reply_callback done) {
  eval_on(connection_for(keys.empty() ? std::string_view() : keys.front()), s, keys, args, deadline,
          d, ack_, std::move(done));
}

void standalone_topology::command(std::string_view key, std::span<const std::string_view> args,
                                  net::clock::time_point deadline, net::reply_callback done) {
  connection_for(key).submit(args, deadline, std::move(done));
}

std::uint64_t standalone_topology::subscribe(node_id, const std::string& channel,
                                             message_handler on_message,
                                             std::function<void()> on_subscribed) {
  return impl_.subscriber().add(net::subscriber::kind::channel, channel, std::move(on_message),
                                std::move(on_subscribed));
}

void standalone_topology::unsubscribe(std::uint64_t id) {
  impl_.subscriber().remove(id);
}

void standalone_topology::close(std::error_code reason) {
  impl_.close_lanes(reason);
}

redis_client& standalone_topology::redis() noexcept {
  return *server_;
}

}  // namespace dlock::detail
