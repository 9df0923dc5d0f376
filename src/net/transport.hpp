// A byte stream to one server: TCP, unix-domain socket, or TLS over TCP. The connection layer
// above sees only this interface; which stream it is was decided by the URL.
#pragma once

#include <asio/buffer.hpp>
#include <asio/io_context.hpp>
#include <functional>
#include <memory>
#include <string>
#include <system_error>

#include "dlock/redis/connection_options.hpp"

namespace asio::ssl {
class context;
}

namespace dlock::net {

class transport : public std::enable_shared_from_this<transport> {
 public:
  using io_handler = std::function<void(std::error_code, std::size_t)>;
  /// `ec` is a `dlock::errc` (connect_failed, tls_failed) and `detail` a human-readable reason.
  using connect_handler = std::function<void(std::error_code ec, std::string detail)>;

  virtual ~transport() = default;
  /// Resolves, connects and (for TLS) handshakes.
  virtual void async_connect(connect_handler done) = 0;
  virtual void async_read_some(asio::mutable_buffer buffer, io_handler done) = 0;
  /// Writes the whole buffer.
  virtual void async_write(asio::const_buffer buffer, io_handler done) = 0;
  /// The socket's descriptor when plain bytes may be written to it directly (TCP and unix
  /// sockets), or -1 (TLS).
  virtual int native_handle() noexcept { return -1; }
  /// True once TCP is connected and a TLS handshake is under way (for messages: a plaintext
  /// server never answers one, so the attempt times out there).
  virtual bool in_tls_handshake() const noexcept { return false; }
  /// Cancels outstanding operations and closes the socket. No handler given to this transport
  /// is called after `close` (on the I/O thread), so whoever gave them may be gone by the time
  /// the cancellations complete; the pending operations keep the transport itself alive, so it
  /// may be dropped at any time after `close`.
  virtual void close() noexcept = 0;
};

/// Builds the TLS context for `options`, loading CA and client certificate files.
/// Throws `dlock::error(errc::tls_failed)` when a file cannot be loaded.
std::shared_ptr<asio::ssl::context> make_tls_context(const tls_options& options);

std::shared_ptr<transport> make_transport(asio::io_context& io, const connection_options& options,
                                          std::shared_ptr<asio::ssl::context> tls);

}  // namespace dlock::net
