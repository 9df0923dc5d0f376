// dlock/redis/connection_options.hpp — where a server is and how to talk to it; URL parsing.
#pragma once

#include "dlock/export.hpp"

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace dlock {

/// TLS settings for `rediss://` connections.
struct tls_options {
  bool enabled = false;
  /// PEM file of trusted CAs; empty means the system's default trust store.
  std::string ca_file;
  /// Client certificate and key (PEM), for servers with `tls-auth-clients yes`.
  std::string cert_file;
  std::string key_file;
  /// Verify the server's certificate chain and host name. Turn off only for testing.
  bool verify_peer = true;
  /// Name sent as SNI and checked against the certificate; empty means the URL's host.
  std::string server_name;
};

/// Everything needed to open (and re-open) a connection to one Redis server.
struct DLOCK_API connection_options {
  std::string host = "127.0.0.1";
  std::uint16_t port = 6379;
  /// When non-empty, connect to this unix-domain socket instead of host:port.
  std::string unix_path;
  /// ACL user (Redis 6+); empty means the legacy `AUTH password` form.
  std::string user;
  std::string password;
  /// Logical database selected after connecting (`SELECT`).
  int database = 0;
  /// Sent with `CLIENT SETNAME`; empty means "dlock:HOST:PID" (this host's name and process
  /// id, bytes a connection name may not hold replaced by '_'), for operators reading
  /// CLIENT LIST.
  std::string client_name;
  tls_options tls;

  /// Bound on TCP connect + TLS handshake + AUTH/SELECT for one attempt.
  std::chrono::milliseconds connect_timeout{2000};
  /// Default bound on each command's round trip.
  std::chrono::milliseconds command_timeout{5000};
  /// Reconnect backoff: first retry after `reconnect_min`, doubling to `reconnect_max`, jittered.
  std::chrono::milliseconds reconnect_min{10};
  std::chrono::milliseconds reconnect_max{1000};

  /// Parses `redis://[user[:password]@]host[:port][/db][?query]`, `rediss://...` (TLS),
  /// `valkey://...` and `valkeys://...` (the same two, named for Valkey) or
  /// `unix:///path/to/socket[?db=N&...]`. Percent-escapes are decoded in user and password.
  /// Query options: `ca`, `cert`, `key`, `verify=peer|none`, `sni`, `name`, `db`,
  /// `connect_timeout`, `command_timeout` (durations such as `500ms`, `2s`).
  /// Throws `dlock::error(errc::invalid_url)` naming the part that is wrong; the message never
  /// contains the password.
  static connection_options from_url(std::string_view url);

  /// The URL these options describe, with any password replaced by `***`. Safe to log.
  std::string redacted_url() const;
};

/// Parses a duration such as `250ms`, `10s`, `2m`, `1h` or `1.5s`; a bare number means seconds,
/// as for sleep(1) and flock(1). Throws `dlock::error(errc::invalid_argument)` for anything else,
/// including negative values and values that overflow.
DLOCK_API std::chrono::milliseconds parse_duration(std::string_view text);

}  // namespace dlock
