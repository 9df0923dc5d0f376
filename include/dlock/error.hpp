// dlock/error.hpp — the one exception type dlock throws, and its error codes.
#pragma once

#include "dlock/export.hpp"

#include <string>
#include <system_error>

namespace dlock {

/// Why an operation failed. Every exception dlock throws is a `dlock::error` whose `code()` is
/// one of these, in `dlock::error_category()`. "Lock not acquired" is never an error: acquisition
/// calls report it as `false` or an empty lease.
enum class errc : int {
  /// A caller-supplied value is out of range or malformed (negative lease, empty lock name, ...).
  invalid_argument = 1,
  /// A connection URL could not be parsed; the message names the part that is wrong.
  invalid_url,
  /// The server could not be reached (refused, unresolvable, connect timeout).
  connect_failed,
  /// The server rejected the credentials (AUTH / ACL), or required some and none were given.
  auth_failed,
  /// The TLS handshake or certificate verification failed.
  tls_failed,
  /// A command got no reply within its timeout (or within the caller's deadline).
  timeout,
  /// The connection dropped while the command was in flight; it may or may not have executed.
  connection_lost,
  /// The client was closed or destroyed before the command could complete.
  client_closed,
  /// The server sent bytes that are not valid RESP; the connection was closed.
  protocol_error,
  /// The server answered with an error reply not covered by a more precise code (the message
  /// holds the server's text), e.g. OOM when the server is out of memory.
  server_error,
  /// A key exists with a type the operation cannot work on: a lock name that holds a list, or a
  /// string or hash that is not a lock. The message names what the key holds.
  wrong_type,
  /// A reply had a different shape than the operation expected.
  unexpected_reply,
  /// The operation needs a lease that is still held, and this one was released or lost.
  lease_lost,
  /// The server cannot serve the command now but will soon: it is loading its dataset
  /// (LOADING), busy with a long script (BUSY), or waiting for its master or cluster (TRYAGAIN,
  /// MASTERDOWN, CLUSTERDOWN). Acquisitions retry it while their wait lasts.
  server_busy,
  /// The server's ACL does not let this user run a command the operation needs (NOPERM).
  permission_denied,
  /// The server is a read-only replica (READONLY): locks need the master.
  read_only,
  /// A grant was made on the master but fewer replicas than `client_options::min_replica_acks`
  /// acknowledged it within `replica_ack_timeout`, for as long as the caller's wait lasted. It
  /// was undone, not handed out: a failover could have promoted a replica without it.
  not_replicated,
  /// A read hold asked to become a write hold while another holder is already upgrading (only
  /// one may, or two upgraders would each wait for the other's read hold forever). Release the
  /// read hold and take the write lock afresh.
  upgrade_conflict,
  /// The caller cancelled an asynchronous acquisition, or a latch's wait, before it completed
  /// (`acquire_handle::cancel`, a coroutine's `std::stop_token`). Nothing is held: a grant that
  /// was on its way back when the cancellation came is undone on the server.
  cancelled,
};

/// The category of all `dlock::errc` codes; its name is "dlock".
DLOCK_API const std::error_category& error_category() noexcept;

/// Makes a `std::error_code` for `e` in `dlock::error_category()`.
DLOCK_API std::error_code make_error_code(errc e) noexcept;

/// The exception dlock throws. `code()` compares equal to a `dlock::errc`:
/// `catch (const dlock::error& e) { if (e.code() == dlock::errc::timeout) ... }`.
/// Messages never contain passwords.
class DLOCK_API error : public std::system_error {
 public:
  explicit error(errc e) : std::system_error(make_error_code(e)) {}
  error(errc e, const std::string& what) : std::system_error(make_error_code(e), what) {}
  error(std::error_code ec, const std::string& what) : std::system_error(ec, what) {}
};

}  // namespace dlock

template <>
struct std::is_error_code_enum<dlock::errc> : std::true_type {};
