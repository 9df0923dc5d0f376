// The decisions of connecting, sans-io: what the handshake sends and how its replies are
// judged, how long to wait before the next attempt, and what a timed-out attempt is called. The
// connection does the I/O and follows these; the unit tests drive them with made-up replies,
// random numbers and times.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include "dlock/redis/connection_options.hpp"
#include "dlock/redis/reply.hpp"

namespace dlock::net {

/// One handshake: AUTH (when credentials are given), SELECT (a database other than 0), ROLE
/// (when the server must be a master: one Sentinel named), CLIENT SETNAME and CLIENT SETINFO
/// (lib-name dlock, lib-ver), pipelined in one write, judged reply by reply.
class handshake {
 public:
  explicit handshake(const connection_options& options, bool require_master = false);

  /// The commands to send once the transport is up.
  const std::string& request() const noexcept { return request_; }

  enum class status {
    more,    // wait for the next reply
    ready,   // every reply was fine: the connection may carry commands
    failed,  // `error` and `detail` say why; this attempt is over
  };
  struct verdict {
    status state = status::more;
    std::error_code error{};
    std::string detail{};
  };
  /// Judges the next reply. A failing AUTH is errc::auth_failed whatever the server's wording;
  /// a NOPERM answer to CLIENT SETNAME is tolerated when the user asked for no name (naming is
  /// cosmetic, and a restricted ACL user may not be allowed it); a ROLE other than master is
  /// errc::read_only; any error answering CLIENT SETINFO is ignored (servers before Redis 7.2
  /// and Valkey 8 do not know it).
  verdict on_reply(const reply& r);

 private:
  enum class step { auth, select, role, setname, setinfo };
  const connection_options& options_;
  std::string request_;
  std::vector<step> steps_;
  std::size_t seen_ = 0;
};

/// The pause before each reconnect attempt: none before the first, then `reconnect_min`,
/// doubling up to `reconnect_max`, each drawn uniformly from its upper half so that many clients
/// spread out after a server restart. `reset` after a successful connect.
class reconnect_backoff {
 public:
  reconnect_backoff(std::chrono::milliseconds min, std::chrono::milliseconds max)
      : min_(min), max_(max) {}
  /// The next pause; `random` is any uniformly distributed number.
  std::chrono::milliseconds next(std::uint64_t random);
  void reset() noexcept { step_ = std::chrono::milliseconds(0); }

 private:
  std::chrono::milliseconds min_, max_;
  std::chrono::milliseconds step_{0};
};

/// The message of an attempt that timed out: a server that accepted the TCP connection but
/// never answered the TLS handshake is most likely a plaintext port given as rediss://.
std::string connect_timeout_message(const connection_options& options, bool in_tls_handshake);

/// The errc a server error reply stands for (auth_failed, wrong_type, permission_denied,
/// read_only, server_busy, or server_error).
std::error_code classify_error_reply(std::string_view text);

}  // namespace dlock::net
