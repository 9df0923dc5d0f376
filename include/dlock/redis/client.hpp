// dlock/redis/client.hpp — a multiplexed, automatically pipelined Redis client.
#pragma once

#include "dlock/export.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "dlock/redis/connection_options.hpp"
#include "dlock/redis/reply.hpp"
#include "dlock/redis/script.hpp"

namespace dlock {

namespace detail {
struct redis_client_access;
}

/// What a client has done so far, over all its command connections; all counts are since
/// construction.
struct client_counters {
  std::uint64_t commands_sent = 0;  ///< commands written to the socket
  std::uint64_t writes = 0;         ///< socket writes that carried them (fewer = more pipelining)
  std::uint64_t replies = 0;        ///< replies received on the command connections
  std::uint64_t reconnects = 0;     ///< successful reconnects after a lost connection
  std::uint64_t connection_losses = 0;
  std::uint64_t timeouts = 0;          ///< commands that failed with errc::timeout
  std::uint64_t noscript_retries = 0;  ///< EVALSHA calls transparently re-sent as EVAL
};

/// Completion of an asynchronous command: `ec` is empty on success; otherwise a `dlock::errc`.
/// For errors the server sent (errc::server_error, auth_failed, wrong_type) `r` is the error
/// reply and `r.str()` its text; for the others (timeout, connection_lost, client_closed) `r` is
/// nil. Runs on the client's I/O thread: keep it short and never block in it.
using reply_callback = std::function<void(std::error_code ec, reply r)>;

/// Receives a pub/sub message. For a pattern subscription `channel` is the matching channel.
/// Runs on the client's I/O thread.
using message_handler = std::function<void(std::string_view channel, std::string_view message)>;

class redis_client;

/// A live subscription. Move-only; destroying or `reset()`ing it unsubscribes, after which its
/// handler is never called again (when called from a thread other than the client's I/O thread
/// this waits for the I/O thread to drop the handler). Outliving the client is harmless.
class DLOCK_API subscription {
 public:
  subscription() noexcept = default;
  subscription(subscription&&) noexcept;
  subscription& operator=(subscription&&) noexcept;
  ~subscription();

  /// Unsubscribes. Never throws; a no-op when empty.
  void reset() noexcept;
  bool active() const noexcept { return id_ != 0; }

 private:
  friend class redis_client;
  friend struct detail::redis_client_access;
  struct owner;
  subscription(std::weak_ptr<owner> o, std::uint64_t id) : owner_(std::move(o)), id_(id) {}
  std::weak_ptr<owner> owner_;
  std::uint64_t id_ = 0;
};

/// A client for one Redis server. Thread-safe: any number of threads may issue commands at once.
///
/// One connection carries every command. Commands issued while a write is on the wire leave
/// together in the next write (automatic pipelining), so many threads share one socket with
/// few system calls; `counters()` shows it. Replies are matched to callers in order.
///
/// A second connection, opened on first use, carries pub/sub.
///
/// If the connection drops, commands in flight fail at once with errc::connection_lost; the
/// client reconnects in the background with jittered exponential backoff, re-authenticates,
/// re-selects the database and re-subscribes; commands issued meanwhile wait for the reconnect
/// up to their timeout.
class DLOCK_API redis_client {
 public:
  /// Connects (TCP, TLS or unix socket), authenticates, selects the database and names the
  /// connection. Throws `dlock::error` with errc::invalid_url, connect_failed, auth_failed,
  /// tls_failed or server_error (e.g. a database index the server does not have).
  explicit redis_client(connection_options options);
  /// Same, from a URL (see `connection_options::from_url`).
  explicit redis_client(std::string_view url);
  /// Fails every pending command with errc::client_closed, closes the connections and joins the
  /// I/O thread. Never throws. Must not run on the I/O thread (i.e. inside a callback).
  ~redis_client();
  redis_client(const redis_client&) = delete;
  redis_client& operator=(const redis_client&) = delete;

  /// Sends one command and waits for its reply. `timeout` ≤ 0 means the client's default
  /// command timeout. Throws `dlock::error`: errc::timeout, connection_lost, client_closed, or
  /// server_error / wrong_type / auth_failed carrying the server's message.
  reply command(std::span<const std::string_view> args,
                std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
  reply command(std::initializer_list<std::string_view> args,
                std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) {
    return command(std::span<const std::string_view>(args.begin(), args.size()), timeout);
  }
  reply command(const std::vector<std::string>& args,
                std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

  /// Sends one command; `done` runs on the I/O thread with the result. Never throws; if the client
  /// is already closed, `done` runs inline with errc::client_closed.
  void command_async(std::span<const std::string_view> args, reply_callback done,
                     std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
  void command_async(std::initializer_list<std::string_view> args, reply_callback done,
                     std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) {
    command_async(std::span<const std::string_view>(args.begin(), args.size()), std::move(done),
                  timeout);
  }
  /// Sends one command; the future yields the reply or throws what `command` would.
  std::future<reply> command_future(
      std::span<const std::string_view> args,
      std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

  /// Runs `s` (EVAL on its first call on the connection, then EVALSHA; see `script`) and waits
  /// for its reply. Throws as
  /// `command` does; a script runtime error is errc::server_error with the server's message.
  reply eval(const script& s, std::span<const std::string_view> keys,
             std::span<const std::string_view> args,
             std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
  reply eval(const script& s, std::initializer_list<std::string_view> keys,
             std::initializer_list<std::string_view> args,
             std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) {
    return eval(s, std::span<const std::string_view>(keys.begin(), keys.size()),
                std::span<const std::string_view>(args.begin(), args.size()), timeout);
  }
  /// Asynchronous `eval`; `done` runs on the I/O thread.
  void eval_async(const script& s, std::span<const std::string_view> keys,
                  std::span<const std::string_view> args, reply_callback done,
                  std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

  /// Subscribes to `channel` and waits until the server confirms. `on_message` runs on the I/O
  /// thread for every message. After a reconnect the subscription is renewed automatically.
  /// Throws errc::timeout if no confirmation arrives within the command timeout (nothing stays
  /// registered then), errc::invalid_argument for an empty channel.
  subscription subscribe(std::string channel, message_handler on_message);
  /// Same for a glob-style pattern (PSUBSCRIBE).
  subscription psubscribe(std::string pattern, message_handler on_message);

  client_counters counters() const noexcept;
  const connection_options& options() const noexcept;
  /// True while the command connection is up (false while it reconnects).
  bool connected() const noexcept;

  /// Opaque; dlock's own layers reach it through detail::redis_client_access.
  struct impl;

 private:
  friend struct detail::redis_client_access;
  explicit redis_client(std::shared_ptr<impl> i) noexcept : impl_(std::move(i)) {}
  std::shared_ptr<impl> impl_;
};

}  // namespace dlock
