#include "net/transport.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <asio/connect.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/local/stream_protocol.hpp>
#include <asio/read.hpp>
#include <asio/ssl.hpp>
#include <asio/write.hpp>

#include "dlock/error.hpp"

namespace dlock::net {
namespace {

std::string endpoint_text(const connection_options& o) {
  return o.unix_path.empty() ? o.host + ":" + std::to_string(o.port) : o.unix_path;
}

std::string openssl_reason(const std::error_code& ec) {
  if (ec.category() == asio::error::get_ssl_category()) {
    char text[256];
    ERR_error_string_n(static_cast<unsigned long>(ec.value()), text, sizeof text);
    return text;
  }
  return ec.message();
}

// Reading, writing and closing are the same for every stream type; only connecting differs.
template <class Stream>
class stream_transport : public transport {
 public:
  template <class... Args>
  stream_transport(const connection_options& o, Args&&... args)
      : options_(o), stream_(std::forward<Args>(args)...) {}

  void async_read_some(asio::mutable_buffer b, io_handler done) override {
    stream_.async_read_some(b, [self = shared_from_this(), this, done = std::move(done)](
                                   std::error_code ec, std::size_t n) {
      if (!closed_) done(ec, n);
    });
  }
  void async_write(asio::const_buffer b, io_handler done) override {
    asio::async_write(stream_, b,
                      [self = shared_from_this(), this, done = std::move(done)](std::error_code ec,
                                                                                std::size_t n) {
                        if (!closed_) done(ec, n);
                      });
  }

 protected:
  void connect_failed(const transport::connect_handler& done, const std::error_code& ec) {
    done(errc::connect_failed,
         "cannot connect to " + endpoint_text(options_) + ": " + ec.message());
  }

  const connection_options options_;  // a copy: pending handlers may outlive the connection
  Stream stream_;
  // Set by close(). Nothing that completes after it is reported: whoever asked closed this
  // transport and may be gone. A client torn down while its TLS handshake was still on the wire
  // read a freed connection (found by TSan); a TLS read or write can likewise finish its
  // cancellation a hop after close(), behind a topology's release of the node. I/O thread only.
  bool closed_ = false;
};

// TCP, with or without TLS on top: resolve the host, try each address, then `on_connected`.
template <class Stream>
class ip_transport : public stream_transport<Stream> {
 public:
  template <class... Args>
  ip_transport(asio::io_context& io, const connection_options& o, Args&&... args)
      : stream_transport<Stream>(o, std::forward<Args>(args)...), resolver_(io) {}

  void async_connect(transport::connect_handler done) override {
    resolver_.async_resolve(
        this->options_.host, std::to_string(this->options_.port),
        [self = this->shared_from_this(), this, done = std::move(done)](
            std::error_code ec, asio::ip::tcp::resolver::results_type endpoints) {
          // Name resolution runs on asio's own thread and cannot be interrupted: its completion
          // may come after close(), when whoever asked may be gone. Nothing is reported then.
          if (this->closed_) return;
          if (ec) {
            done(errc::connect_failed,
                 "cannot resolve " + endpoint_text(this->options_) + ": " + ec.message());
            return;
          }
          asio::async_connect(socket(), endpoints,
                              [self, this, done](std::error_code connect_ec, const auto&) {
                                if (this->closed_) return;
                                if (connect_ec) {
                                  this->connect_failed(done, connect_ec);
                                  return;
                                }
                                std::error_code ignored;
                                socket().set_option(asio::ip::tcp::no_delay(true), ignored);
                                on_connected(done);
                              });
        });
  }
  void close() noexcept override {
    this->closed_ = true;
    resolver_.cancel();
    std::error_code ignored;
    socket().close(ignored);
  }

 protected:
  virtual asio::ip::tcp::socket& socket() = 0;
  virtual void on_connected(const transport::connect_handler& done) = 0;

 private:
  asio::ip::tcp::resolver resolver_;
};

class tcp_transport final : public ip_transport<asio::ip::tcp::socket> {
 public:
  tcp_transport(asio::io_context& io, const connection_options& o) : ip_transport(io, o, io) {}
  int native_handle() noexcept override { return stream_.native_handle(); }

 private:
  asio::ip::tcp::socket& socket() override { return stream_; }
  void on_connected(const connect_handler& done) override { done({}, {}); }
};

class tls_transport final : public ip_transport<asio::ssl::stream<asio::ip::tcp::socket>> {
 public:
  tls_transport(asio::io_context& io, const connection_options& o,
                std::shared_ptr<asio::ssl::context> ctx)
      : ip_transport(io, o, io, *ctx), ctx_(std::move(ctx)) {}

 private:
  asio::ip::tcp::socket& socket() override { return stream_.next_layer(); }
  void on_connected(const connect_handler& done) override {
    const auto& tls = options_.tls;
    const std::string& name = tls.server_name.empty() ? options_.host : tls.server_name;
    SSL_set_tlsext_host_name(stream_.native_handle(), name.c_str());
    if (tls.verify_peer) {
      stream_.set_verify_mode(asio::ssl::verify_peer);
      stream_.set_verify_callback(asio::ssl::host_name_verification(name));
    } else {
      stream_.set_verify_mode(asio::ssl::verify_none);
    }
    handshaking_ = true;
    stream_.async_handshake(asio::ssl::stream_base::client, [self = shared_from_this(), this,
                                                             done](std::error_code ec) {
      if (closed_) return;
      if (ec) {
        done(errc::tls_failed,
             "TLS handshake with " + endpoint_text(options_) + " failed: " + openssl_reason(ec));
        return;
      }
      done({}, {});
    });
  }

  bool in_tls_handshake() const noexcept override { return handshaking_; }

  std::shared_ptr<asio::ssl::context> ctx_;  // must outlive the stream
  bool handshaking_ = false;
};

class unix_transport final : public stream_transport<asio::local::stream_protocol::socket> {
 public:
  unix_transport(asio::io_context& io, const connection_options& o) : stream_transport(o, io) {}
  int native_handle() noexcept override { return stream_.native_handle(); }

  void async_connect(connect_handler done) override {
    stream_.async_connect(
        asio::local::stream_protocol::endpoint(options_.unix_path),
        [self = shared_from_this(), this, done = std::move(done)](std::error_code ec) {
          if (closed_) return;
          if (ec) {
            connect_failed(done, ec);
            return;
          }
          done({}, {});
        });
  }
  void close() noexcept override {
    closed_ = true;
    std::error_code ignored;
    stream_.close(ignored);
  }
};

}  // namespace

std::shared_ptr<asio::ssl::context> make_tls_context(const tls_options& t) {
  auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
  ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                   asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                   asio::ssl::context::no_tlsv1_1);
  std::error_code ec;
  auto check = [&](const char* what, const std::string& file) {
    if (ec) {
      throw error(errc::tls_failed, std::string("cannot load TLS ") + what + " '" + file +
                                        "': " + openssl_reason(ec));
    }
  };
  if (t.ca_file.empty()) {
    ctx->set_default_verify_paths(ec);
    check("default trust store", "");
  } else {
    ctx->load_verify_file(t.ca_file, ec);
    check("CA file", t.ca_file);
  }
  if (!t.cert_file.empty()) {
    ctx->use_certificate_chain_file(t.cert_file, ec);
    check("certificate", t.cert_file);
    if (t.key_file.empty()) {
      // No key= given: the key must be in the certificate's PEM file too.
      ctx->use_private_key_file(t.cert_file, asio::ssl::context::pem, ec);
      if (ec) {
        throw error(errc::tls_failed,
                    "no TLS private key: key= was not given and the certificate file '" +
                        t.cert_file + "' holds none (" + openssl_reason(ec) +
                        "); give key=FILE with the client certificate's private key");
      }
    } else {
      ctx->use_private_key_file(t.key_file, asio::ssl::context::pem, ec);
      check("private key", t.key_file);
    }
  }
  return ctx;
}

std::shared_ptr<transport> make_transport(asio::io_context& io, const connection_options& options,
                                          std::shared_ptr<asio::ssl::context> tls) {
  if (!options.unix_path.empty()) return std::make_shared<unix_transport>(io, options);
  if (options.tls.enabled) return std::make_shared<tls_transport>(io, options, std::move(tls));
  return std::make_shared<tcp_transport>(io, options);
}

}  // namespace dlock::net
