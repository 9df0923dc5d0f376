// RedLock's independent masters: every key lives on every master (node i is master i), and no
// master knows of the others. The topology only reaches them; deciding by majority is the lock
// kinds' business (locks/kinds/redlock.cpp), because what counts as a yes depends on the call.
//
// The masters connect in the background: a master that is down when the client starts, or
// goes down later, is retried with backoff while the others serve, so a minority of masters
// down never stops the client.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "dlock/deployment_options.hpp"
#include "topology/standalone.hpp"

namespace dlock::detail {

class redlock_topology final : public topology {
 public:
  /// Connects to every master in `masters` (at least 3) on `io`, waiting until a majority is up
  /// or every master's first attempt has ended. Throws errc::auth_failed or tls_failed when any
  /// master refuses our credentials or TLS (a misconfiguration, not an outage),
  /// errc::connect_failed when none is reachable, errc::invalid_argument for fewer than 3 masters.
  redlock_topology(const std::vector<connection_options>& masters,
                   std::shared_ptr<net::io_thread> io);
  ~redlock_topology() override;

  net::io_thread& io() noexcept override;
  /// Every master, for every key.
  std::span<const node_id> nodes_for(std::string_view key) override;
  /// One route for all keys: the kinds' quorum wrapper sends each batch to every master.
  route route_of(node_id node, std::string_view key) const override;
  void eval(node_id node, const script& s, std::span<const std::string_view> keys,
            std::span<const std::string_view> args, net::clock::time_point deadline, durability d,
            net::reply_callback done) override;
  /// Commands of the user's own go to the first master that is up (the first, if none is).
  void command(std::string_view key, std::span<const std::string_view> args,
               net::clock::time_point deadline, net::reply_callback done) override;
  /// Subscribes `channel` on every master (a release publishes on each); `node` is ignored.
  /// `on_subscribed` runs whenever any master confirms.
  std::uint64_t subscribe(node_id node, const std::string& channel, message_handler on_message,
                          std::function<void()> on_subscribed) override;
  void unsubscribe(std::uint64_t id) override;
  void close(std::error_code reason) override;
  redis_client& redis() noexcept override;
  std::vector<redis_client*> masters() override;
  topology* when_back() noexcept override { return &when_back_; }

 private:
  // topology::when_back(): this topology, with eval sending only to masters that are down.
  class queued_for_return final : public topology {
   public:
    explicit queued_for_return(redlock_topology& masters) : masters_(masters) {}
    net::io_thread& io() noexcept override { return masters_.io(); }
    std::span<const node_id> nodes_for(std::string_view key) override {
      return masters_.nodes_for(key);
    }
    route route_of(node_id node, std::string_view key) const override {
      return masters_.route_of(node, key);
    }
    void eval(node_id node, const script& s, std::span<const std::string_view> keys,
              std::span<const std::string_view> args, net::clock::time_point deadline, durability d,
              net::reply_callback done) override;
    void command(std::string_view key, std::span<const std::string_view> args,
                 net::clock::time_point deadline, net::reply_callback done) override {
      masters_.command(key, args, deadline, std::move(done));
    }
    std::uint64_t subscribe(node_id node, const std::string& channel, message_handler on_message,
                            std::function<void()> on_subscribed) override {
      return masters_.subscribe(node, channel, std::move(on_message), std::move(on_subscribed));
    }
    void unsubscribe(std::uint64_t id) override { masters_.unsubscribe(id); }
    void close(std::error_code reason) override { masters_.close(reason); }
    redis_client& redis() noexcept override { return masters_.redis(); }

   private:
    redlock_topology& masters_;
  };

  standalone_topology& first_up() noexcept;
  net::connection& connection_for(node_id node, std::span<const std::string_view> keys);
  void answer_lost(net::reply_callback done);

  std::shared_ptr<net::io_thread> io_;
  std::vector<std::unique_ptr<standalone_topology>> masters_;
  std::vector<node_id> all_;
  std::uint64_t next_subscription_ = 0;
  // A subscription on every master, by our id: each master's own id (I/O thread only).
  std::map<std::uint64_t, std::vector<std::uint64_t>> subscriptions_;
  queued_for_return when_back_{*this};
};

}  // namespace dlock::detail
