// dlock/fencing.hpp — writes that a stale lock holder cannot make.
#pragma once

#include "dlock/export.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "dlock/async.hpp"

namespace dlock {

class client;
class redis_client;

/// The outcome of a fenced write.
struct fenced_write_result {
  /// True if the value was written.
  bool written = false;
  /// The newest fencing token seen for the resource (the caller's, if written).
  std::uint64_t highest = 0;
};

/// Sets `key` to `value` only if `fence` is not older than the newest token a fenced write to
/// `key` has carried, and records `fence` as the newest. Pass the `lease::fence()` of the lock
/// that protects `key`: a holder that was paused past its lease and resumes still has its old,
/// smaller token, and its write is rejected once the next holder has written. One atomic
/// script. Throws `dlock::error` (errc::timeout, connection_lost, server_error) when the server
/// cannot be asked, and errc::wrong_type, writing nothing, when the record of the newest token
/// (`fence_record_key(key)`) holds something that is not a token; a rejection is not an error.
DLOCK_API fenced_write_result fenced_set(redis_client& redis, std::string_view key,
                                         std::string_view value, std::uint64_t fence);
/// The same through a dlock client: it reaches the node that serves `key` (the current Sentinel
/// master, or the cluster master owning its slot, following redirects).
DLOCK_API fenced_write_result fenced_set(const client& c, std::string_view key,
                                         std::string_view value, std::uint64_t fence);
/// `fenced_set` through a dlock client without parking a thread: returns at once, and `done`
/// runs once, on the client's I/O thread, with the outcome or the error `fenced_set` would have
/// thrown. Never throws; safe on the I/O thread (inside a completion, after a `co_await`),
/// where the blocking form is refused. Do not block in `done`.
DLOCK_API void fenced_set_async(
    const client& c, std::string_view key, std::string_view value, std::uint64_t fence,
    std::function<void(call_result<fenced_write_result>)> done) noexcept;
/// The same for a C++20 coroutine: `auto r = co_await dlock::fenced_set_async(c, key, value,
/// held.fence());`, with `call_awaitable`'s rules (sent when awaited; continues on the I/O
/// thread). The key and value are copied.
[[nodiscard]] DLOCK_API call_awaitable<fenced_write_result> fenced_set_async(const client& c,
                                                                             std::string_view key,
                                                                             std::string_view value,
                                                                             std::uint64_t fence);

/// Where the newest token for `key` is kept: "dlock_fence:{key}" (the key as is when it already
/// has a hash tag), in the same cluster slot as `key`.
DLOCK_API std::string fence_record_key(std::string_view key);

}  // namespace dlock
