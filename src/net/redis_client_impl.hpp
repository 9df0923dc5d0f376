// The inside of a redis_client: one server's command connection and subscriber, on an I/O
// thread that is either its own (a redis_client a user made) or a dlock::client's, shared by all
// of that client's connections.
#pragma once

#include <memory>

#include "dlock/redis/client.hpp"
#include "net/connection.hpp"
#include "net/io_thread.hpp"
#include "net/subscriber.hpp"

namespace dlock {

struct subscription::owner {
  virtual ~owner() = default;
  virtual void unsubscribe(std::uint64_t id) noexcept = 0;
};

struct redis_client::impl final : subscription::owner {
  /// Connects on an I/O thread of its own. Throws as redis_client's constructor does.
  explicit impl(connection_options o);
  /// Connects on `shared_io`, which the caller owns: it must stop that thread before it lets
  /// this object go (the connections are then closed from the calling thread).
  impl(connection_options o, std::shared_ptr<net::io_thread> shared_io);
  ~impl() override;

  /// The subscriber, created on first use. I/O thread only.
  net::subscriber& subscriber();
  void unsubscribe(std::uint64_t id) noexcept override;

  // Declaration order is destruction order reversed: the I/O thread outlives the connections.
  const std::shared_ptr<net::io_thread> io_holder;
  net::io_thread& io;
  const bool owns_io;
  const connection_options options;
  std::shared_ptr<asio::ssl::context> tls;
  std::unique_ptr<net::connection> commands;
  std::unique_ptr<net::subscriber> subscriber_;

 private:
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
                                                    std::shared_ptr<net::io_thread> io) {
    return std::unique_ptr<redis_client>(
        new redis_client(std::make_shared<redis_client::impl>(std::move(o), std::move(io))));
  }
};
}  // namespace detail

}  // namespace dlock
