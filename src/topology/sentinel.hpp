// Redis under Sentinel: one master at a time, the one a majority of the sentinels names, confirmed
// with ROLE on every (re)connection. The master's connections move when a sentinel announces
// +switch-master, and, as backstops for a missed announcement, whenever a connection attempt
// fails or the server answers READONLY or LOADING, and every master_check_period: then the
// sentinels are asked again.
#pragma once

#include <asio/steady_timer.hpp>
#include <memory>
#include <vector>

#include "dlock/deployment_options.hpp"
#include "topology/sentinel_protocol.hpp"
#include "topology/standalone.hpp"

namespace dlock::detail {

class sentinel_watch;

class sentinel_topology final : public standalone_topology {
 public:
  /// Asks the sentinels for the master (`master` holds its credentials, database, TLS and
  /// timeouts), connects to it and follows it. Throws errc::connect_failed when no sentinel
  /// answers or none knows the master (the message says which), or as redis_client's
  /// constructor does for the master itself. `lanes`: command connections to the master.
  sentinel_topology(const connection_options& master, const sentinel_options& sentinels,
                    std::shared_ptr<net::io_thread> io, write_ack ack, std::size_t lanes = 1);
  ~sentinel_topology() override;

  void eval(node_id node, const script& s, std::span<const std::string_view> keys,
            std::span<const std::string_view> args, net::clock::time_point deadline, durability d,
            net::reply_callback done) override;
  void close(std::error_code reason) override;

 private:
  sentinel_topology(const connection_options& master, std::unique_ptr<sentinel_watch> watch,
                    std::shared_ptr<net::io_thread> io, write_ack ack, std::size_t lanes);
  void ask_again();
  void move_to(const node_address& master);
  void check_later();

  std::unique_ptr<sentinel_watch> watch_;
  bool asking_ = false;  // I/O thread only
  std::chrono::milliseconds check_period_;
  asio::steady_timer check_timer_;  // I/O thread only
  bool closed_ = false;             // I/O thread only
};

}  // namespace dlock::detail
