// The inside of a redis_client, for the layers above the connection (locks, leases) that need
// its I/O thread, its connections and its subscriber directly.
#pragma once

#include <memory>

#include "dlock/redis_client.hpp"
#include "net/connection.hpp"
#include "net/io_thread.hpp"
#include "net/subscriber.hpp"

namespace dlock {

struct subscription::owner {
  virtual ~owner() = default;
  virtual void unsubscribe(std::uint64_t id) noexcept = 0;
};

struct redis_client::impl final : subscription::owner {
  explicit impl(connection_options o);
  ~impl() override;

  /// The subscriber, created on first use. I/O thread only.
  net::subscriber& subscriber();
  void unsubscribe(std::uint64_t id) noexcept override;

  // Declaration order is destruction order reversed: the I/O thread outlives the connections.
  net::io_thread io;
  const connection_options options;
  std::shared_ptr<asio::ssl::context> tls;
  std::unique_ptr<net::connection> commands;
  std::unique_ptr<net::subscriber> subscriber_;
};

namespace detail {
struct redis_client_access {
  static redis_client::impl& get(redis_client& c) { return *c.impl_; }
  static std::shared_ptr<redis_client::impl> shared(redis_client& c) { return c.impl_; }
  static subscription make_subscription(const std::shared_ptr<redis_client::impl>& i,
                                        std::uint64_t id) {
    return subscription(std::weak_ptr<subscription::owner>(i), id);
  }
};
}  // namespace detail

}  // namespace dlock
