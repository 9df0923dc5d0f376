// dlock/lease.hpp — what you hold when a lock is granted.
#pragma once

#include "dlock/export.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "dlock/async.hpp"
#include "dlock/reply.hpp"

namespace dlock {

/// Why a lease stopped being valid before it was released.
enum class lease_lost_reason {
  /// The lease's validity ran out without a successful renewal: the server was unreachable or
  /// this process was paused for longer than the lease. Someone else may hold the lock now.
  expired,
  /// A renewal found that the lock is no longer ours: it expired and was taken, or it was
  /// force-unlocked or deleted.
  not_held,
};

/// How a release ended.
enum class release_outcome {
  /// The server confirmed that this hold is released.
  released,
  /// The lock was no longer held by this lease when the release reached the server: the lease
  /// had been lost (expired, taken over, deleted, or the server restarted without it), whether
  /// or not that had been signalled yet.
  not_held,
  /// The server could not be asked (unreachable, timed out, client closed). The lock ends at
  /// its expiry, which the watchdog no longer pushes out.
  unconfirmed,
};

/// Options for one acquisition.
struct lease_options {
  /// A fixed lease: the lock expires this long after it is granted unless released or extended.
  /// Unset (the default) means a watchdog lease: the client's watchdog lease time, renewed in the
  /// background for as long as the lease is held. Must be positive.
  std::optional<std::chrono::milliseconds> lease_time{};
  /// Called once if the lease is lost (never after `release`). Runs on the client's I/O thread:
  /// keep it short and do not block; exceptions it throws are swallowed.
  std::function<void(lease_lost_reason)> on_lost{};
  /// Reentrant, fair and read-write locks: who owns the hold, instead of the calling thread. Use it
  /// for work that moves between threads (thread pools, coroutines); any thread may then release
  /// it. Holds with the same owner id re-enter each other. A re-entry keeps the first hold's lease
  /// mode (watchdog or fixed); its lease time only ever extends the lock's expiry.
  std::string owner{};
  /// Semaphores only: how many permits this acquisition takes, all or none. Must be 1 for
  /// locks.
  std::int64_t permits = 1;
};

namespace detail {
struct lease_state;
}

/// One grant of a lock. Move-only. Destroying it releases the hold (never throws).
///
/// A lease knows its fencing token, a number taken from a per-lock counter at every grant and
/// strictly greater than every earlier grant's: pass it to the resource you protect, and have
/// the resource reject writes that carry an older token (see `fenced_set`).
///
/// A lease can be lost while held (the server was unreachable through a whole lease, the
/// process was paused, an operator force-unlocked it). It is never lost silently: `valid()`
/// turns false, the `on_lost` callback runs, then `stop_token()` is signalled.
class DLOCK_API lease {
 public:
  /// An empty lease: holds nothing.
  lease() noexcept = default;
  lease(lease&& other) noexcept = default;
  /// Releases what this lease holds, then takes over `other`'s.
  lease& operator=(lease&& other) noexcept;
  lease(const lease&) = delete;
  lease& operator=(const lease&) = delete;
  ~lease();

  /// True if this object holds a grant that has not been released (even if it was lost).
  bool held() const noexcept { return state_ != nullptr; }
  explicit operator bool() const noexcept { return held(); }

  /// True while held and not lost, and (for the local clock) still within its validity.
  bool valid() const noexcept;
  /// Signalled when the lease is lost (not when it is released). Hand it to the work the lock
  /// protects. Stop callbacks registered on it run on the client's I/O thread. An empty lease
  /// returns a token that can never be signalled.
  std::stop_token stop_token() const noexcept;
  /// Why the lease was lost, if it was.
  std::optional<lease_lost_reason> lost_reason() const noexcept;

  /// The fencing token of this grant (0 for an empty lease). Re-entries of a reentrant lock
  /// share the token of the hold they re-enter.
  std::uint64_t fence() const noexcept;
  /// The lock's name ("" for an empty lease).
  const std::string& name() const noexcept;
  /// A leased semaphore's permit id, in hex (32 hex digits per permit): what
  /// `leased_semaphore::release(id)` takes, from any process. Empty for other kinds.
  std::string permit_id() const;
  /// How many permits this lease holds (1 for a lock, 0 for an empty lease).
  std::int64_t permits() const noexcept;
  /// Until when, by the local steady clock, the lease is known to be valid: the last
  /// successful grant or renewal plus the lease time, less an allowance for clock drift.
  std::chrono::steady_clock::time_point valid_until() const noexcept;
  /// True if the watchdog renews this lease.
  bool watchdog() const noexcept;

  /// Sets the lease's remaining time to `lease_time` from now, if it is still held. Returns true
  /// if extended, false if the lock was no longer held by this lease (which is then lost).
  /// Throws `dlock::error`: errc::invalid_argument for a non-positive time, errc::lease_lost if
  /// the lease was already released or lost, errc::timeout / connection_lost if the server could
  /// not be asked.
  bool extend(std::chrono::milliseconds lease_time);
  /// `extend` without parking a thread: returns at once, and `done` runs once, on the client's
  /// I/O thread, with `value` what `extend` would have returned (false: no longer held; the
  /// lease is then lost and its `on_lost` has run) or the error `extend` would have thrown. An
  /// empty lease completes at once, on this thread, with errc::lease_lost. Never throws; do not
  /// block in `done`. Safe on the I/O thread, where `extend` is refused.
  void extend_async(std::chrono::milliseconds lease_time,
                    std::function<void(call_result<bool>)> done) noexcept;
  /// The same for a C++20 coroutine: `bool extended = co_await held.extend_async(30s);`, with
  /// `call_awaitable`'s rules (sent when awaited; continues on the I/O thread). It refers to the
  /// hold, not to this object: a lease released (or moved into another that is released) before
  /// the `co_await` completes it with errc::lease_lost.
  [[nodiscard]] call_awaitable<bool> extend_async(std::chrono::milliseconds lease_time);

  /// Runs `writes` on the lock's server only while this lease still holds the lock there: one
  /// script makes the check a release makes (this lease's token or owner) and, if the lock is
  /// ours, runs the writes in order in the same atomic step. The server decides at the moment
  /// of writing, not this process's clock: a holder paused past its lease, or cut off while the
  /// lock expired and went to another client, writes nothing. That is a fence for data on the
  /// lock's own server, with nothing for the data's readers to check (see `fenced_set` for a
  /// resource elsewhere). Returns one reply per write, in order; a write the server refuses (a
  /// wrong type, a command scripts may not run, a key outside the lock's cluster slot) has its
  /// error reply in its place and, as in MULTI/EXEC, undoes nothing.
  ///
  /// Each write is one command with its arguments, at most 4,096 of them, e.g.
  /// `{"HINCRBY", "users:17", "funds", "-5"}`. Their keys must live on the lock's server: on a
  /// cluster, in the lock's slot (give them the lock name's hash tag). Never write the lock's own
  /// keys. With `client_options` asking for replica acknowledgements, the writes wait for them
  /// as a grant does.
  /// Throws `dlock::error`: errc::lease_lost (the lease is empty or known lost, or the server
  /// found the lock no longer held by it: nothing was written, the lease is lost and its
  /// `on_lost` has run), errc::invalid_argument (a command without a name or with too many
  /// arguments; a semaphore, whose permits have no holder to check; a RedLock lock, which has no
  /// single server; a call on the client's I/O thread), errc::timeout / connection_lost (no
  /// reply: whether the writes ran is unknown, as for any command), errc::not_replicated
  /// (written, but fewer replicas acknowledged than asked), or the server's error if it refused
  /// the script itself (an ACL without EVALSHA or the check's read, OOM: nothing written).
  std::vector<reply> write_while_held(const std::vector<std::vector<std::string>>& writes);
  /// `write_while_held` without parking a thread: returns at once, and `done` runs once, on the
  /// client's I/O thread, with the replies or the error `write_while_held` would have thrown.
  /// Never throws; do not block in `done`. Safe on the I/O thread.
  void write_while_held_async(std::vector<std::vector<std::string>> writes,
                              std::function<void(call_result<std::vector<reply>>)> done) noexcept;
  /// The same for a C++20 coroutine: `auto replies = co_await held.write_while_held_async(w);`,
  /// with `call_awaitable`'s rules (sent when awaited; continues on the I/O thread). It refers
  /// to the hold, not to this object: a lease released before the `co_await` completes it with
  /// errc::lease_lost, having written nothing.
  [[nodiscard]] call_awaitable<std::vector<reply>> write_while_held_async(
      std::vector<std::vector<std::string>> writes);
  /// `write_while_held`, then `release_async`, in one send and one round trip: the release goes
  /// right behind the writes, so the server runs it after them, and it is not waited for. The
  /// usual end of a critical section that reads, decides and writes. Returns and throws as
  /// `write_while_held`, except that the lease is empty afterwards whatever the outcome (not
  /// held: released as lost, without `on_lost`), unless errc::invalid_argument was thrown:
  /// then nothing was sent and the lease is as it was. An empty lease throws errc::lease_lost.
  std::vector<reply> write_and_release(const std::vector<std::vector<std::string>>& writes);
  /// `write_and_release` without parking a thread: sends at once, empties the lease (unless
  /// the arguments are refused, which `done` learns and which leaves it as it was), and `done`
  /// runs once, on the client's I/O thread, with the replies or the error. Never throws.
  void write_and_release_async(std::vector<std::vector<std::string>> writes,
                               std::function<void(call_result<std::vector<reply>>)> done) noexcept;

  /// Releases the hold now. Returns true if the server confirmed the release, false if the lock
  /// was no longer held by this lease or the server could not be reached (the lease then ends at
  /// its expiry: the watchdog has stopped renewing it); `release_checked` tells those apart.
  /// Never throws. Idempotent: later calls return false. Stops renewal before it returns. On
  /// the client's I/O thread (inside a callback, where waiting for the reply would wait for
  /// itself) it sends the release without waiting and returns true, as `release_async` does.
  bool release() noexcept;
  /// Releases the hold as `release` does and says how it went: whether the lock was still held
  /// to the end (`released`), had been lost (`not_held`: act as if `on_lost` had run), or could
  /// not be confirmed. An empty lease reports `not_held`. Never throws.
  release_outcome release_checked() noexcept;
  /// Releases the hold without waiting for the server's answer (one round trip less on the
  /// caller's path: the release leaves ahead of anything this thread sends next through the same
  /// client, and an acquisition of the same name by this client never overtakes it). A client
  /// being closed first waits, up to its command timeout, for such releases to be answered.
  /// `done`, if given, later runs on the client's I/O thread with what `release`
  /// would have returned (at once, on this thread, if the lease was already lost or is empty).
  /// Stops renewal before it returns. Never throws.
  void release_async(std::function<void(bool released)> done = {}) noexcept;

 private:
  friend struct detail::lease_state;
  explicit lease(std::shared_ptr<detail::lease_state> s) noexcept : state_(std::move(s)) {}
  std::shared_ptr<detail::lease_state> state_;
};

}  // namespace dlock
