// A lock kind as a protocol object: its keys, its scripts, how it encodes a call and decodes the
// reply, how its holds are renewed and released, and how many holders it admits. Everything that
// differs between kinds lives behind this interface, in one file per kind; the acquisition
// driver, the waiter queues, the grant registry and the watchdog never ask which kind they serve.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "dlock/lease.hpp"
#include "dlock/lock.hpp"
#include "dlock/redis/reply.hpp"
#include "net/connection.hpp"
#include "topology/topology.hpp"

namespace dlock::detail {

/// A lock's key and the keys derived from it by Redisson's rule (dlock/keys.hpp).
struct lock_names {
  /// `shared_fence_counter`: client_options::fence_counter (empty: a counter per name).
  lock_names(std::string lock_name, const std::string& shared_fence_counter = {});
  std::string name;
  std::string fence_key;  // redisson_lock_token:{NAME}
  std::string channel;    // redisson_lock__channel:{NAME}
};

/// The unlock message Redisson publishes and listens for.
inline constexpr std::string_view unlock_message = "0";

/// What the reply to an attempt says.
struct attempt_outcome {
  enum class type { granted, reentered, busy, malformed };
  type what = type::malformed;
  std::uint64_t fence = 0;  // granted, reentered
  std::int64_t pttl = 0;    // busy: the holder's remaining lease (-1: no expiry, -2: gone)
};

/// One call on one lock: where it goes, on whose behalf, and by when it must be answered.
struct lock_call {
  topology& topo;
  node_id node;
  const lock_names& names;
  const std::string& owner;
  std::chrono::milliseconds lease;
  net::clock::time_point deadline;
};

/// One hold in a renewal batch.
struct renewal_item {
  const std::string* name;
  const std::string* owner;
  std::chrono::milliseconds lease;
};

class lock_kind {
 public:
  virtual ~lock_kind() = default;

  /// "reentrant", "simple": for messages and for telling grants of the same name apart.
  virtual std::string_view name() const noexcept = 0;
  /// The TYPE its key has in Redis, which a force-unlock may be confirmed with.
  virtual std::string_view redis_type() const noexcept = 0;
  /// What `lock_info` calls a lock of this kind.
  virtual lock_type public_type() const noexcept = 0;
  /// True if the same owner may take it again: a re-entry joins its hold instead of queueing
  /// behind waiters that wait for that very owner.
  virtual bool reentrant() const noexcept = 0;
  /// How many may hold it at once; the waiter queue lets that many attempt together.
  virtual std::size_t max_holders() const noexcept { return 1; }

  /// The owner id of a new acquisition (for a reentrant kind, shared by its re-entries).
  /// Throws errc::invalid_argument for options the kind does not take.
  virtual std::string owner_for(const std::string& client_id, const lease_options& o) const = 0;

  /// Sends one attempt; `decode_attempt` reads its reply.
  virtual void attempt(const lock_call& c, net::reply_callback done) const = 0;
  virtual attempt_outcome decode_attempt(const reply& r) const;

  /// Releases one hold. The reply is nil when the owner no longer held it, an integer otherwise
  /// (0: holds remain, n >= 1: released and n - 1 subscribers were told).
  virtual void release(const lock_call& c, net::reply_callback done) const = 0;
  /// Ends the owner's hold outright, whatever its count: a grant whose reply was lost, one
  /// that was dead on arrival, one declared lost. Waiters are woken if the lock became free.
  virtual void drop(const lock_call& c, net::reply_callback done) const = 0;
  /// As `drop`, without the unlock message (RedLock's partial grants after a miss that a
  /// holder elsewhere caused: waking anyone, ourselves included, would only cost an attempt).
  virtual void drop_quietly(const lock_call& c, net::reply_callback done) const {
    drop(c, std::move(done));
  }
  /// Renews `items` (all on `node`, in one slot) in one script call; the reply holds 1 (renewed)
  /// or 0 (no longer held) per item.
  virtual void renew(topology& t, node_id node, std::span<const renewal_item> items,
                     net::clock::time_point deadline, net::reply_callback done) const = 0;
};

/// The kinds dlock has (defined in reentrant.cpp and simple.cpp), and all of them, for code
/// that must recognise any kind's keys (status, ls).
const lock_kind& reentrant_kind() noexcept;
const lock_kind& simple_kind() noexcept;
std::span<const lock_kind* const> all_lock_kinds() noexcept;

}  // namespace dlock::detail
