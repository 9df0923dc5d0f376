// The inside of a redis_client: one server's command connections (one, unless a topology asks
// for more lanes) and subscriber, on an I/O thread that is either its own (a redis_client a user
// made) or a dlock::client's, shared by all of that client's connections.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dlock/redis/client.hpp"
#include "net/connection.hpp"
#include "net/io_thread.hpp"
#include "net/subscriber.hpp"

namespace dlock {

struct subscription::owner {
  virtual ~owner() = default;
  virtual void unsubscribe(std::uint64_t id) noexcept = 0;
};

/// How a redis_client on a shared I/O thread connects.
struct connect_settings {
  bool require_master = false;  // every (re)connection checks ROLE (a Sentinel's master)
  bool background = false;      // do not wait for the first attempt (callable on the I/O thread)
  /// With `background`: told how the first attempt ended, on the I/O thread.
  std::function<void(std::error_code, const std::string&)> on_first_attempt;
  /// Command connections to open (at least 1). The first carries the user's own commands; a
  /// topology spreads lock names over all of them (`lane`).
  std::size_t lanes = 1;
};

struct redis_client::impl final : subscription::owner {
  /// Connects on an I/O thread of its own. Throws as redis_client's constructor does.
  explicit impl(connection_options o);
  /// Connects on `shared_io`, which the caller owns: it must stop that thread before it lets
  /// this object go (the connections are then closed from the calling thread).
  impl(connection_options o, std::shared_ptr<net::io_thread> shared_io,
       connect_settings settings = {});
  ~impl() override;

  /// The subscriber, created on first use. I/O thread only.
  net::subscriber& subscriber();
  void unsubscribe(std::uint64_t id) noexcept override;
  /// Command connection `i` (< lanes()); lane 0 is `commands`. Any thread.
  net::connection& lane(std::size_t i) noexcept { return i == 0 ? *commands : *more_lanes[i - 1]; }
  std::size_t lanes() const noexcept { return 1 + more_lanes.size(); }
  /// Moves every connection to another server (a Sentinel failover). I/O thread only.
  void retarget(const std::string& host, std::uint16_t port);
  /// Runs after every failed connection attempt of any connection. I/O thread only; set
  /// before the subscriber is first used.
  void set_attempt_failed_handler(std::function<void(std::error_code)> handler);

  // Declaration order is destruction order reversed: the I/O thread outlives the connections.
  const std::shared_ptr<net::io_thread> io_holder;
  net::io_thread& io;
  const bool owns_io;
  const connect_settings settings;
  connection_options options;  // host and port follow retarget (I/O thread)
  std::shared_ptr<asio::ssl::context> tls;
  std::unique_ptr<net::connection> commands;
  std::vector<std::unique_ptr<net::connection>> more_lanes;  // lanes 1..n-1
  std::unique_ptr<net::subscriber> subscriber_;

  /// Closes every command connection with `reason`. I/O thread only (or after it stopped).
  void close_lanes(std::error_code reason);

 private:
  std::function<void(std::error_code)> attempt_failed_;
  void connect();
};

namespace detail {
struct redis_client_access {
  static redis_client::impl& get(redis_client& c) { return *c.impl_; }
  static std::shared_ptr<redis_client::impl> shared(redis_client& c) { return c.impl_; }
  static subscription make_subscription(const std::shared_ptr<redis_client::impl>& i,
                                        std::uint64_t id) {
    return subscription(std::weak_ptr<subscription::owner>(i), id);
  }
  /// A redis_client on a dlock::client's I/O thread (see impl's second constructor).
  static std::unique_ptr<redis_client> on_shared_io(connection_options o,
                                                    std::shared_ptr<net::io_thread> io,
                                                    connect_settings settings = {}) {
    return std::unique_ptr<redis_client>(new redis_client(
        std::make_shared<redis_client::impl>(std::move(o), std::move(io), settings)));
  }
};
}  // namespace detail

}  // namespace dlock
