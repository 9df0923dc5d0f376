// A lock kind as a protocol object: its keys, its scripts, how it encodes a call and decodes the
// reply, how its holds are renewed and released, and how many holders it admits. Everything that
// differs between kinds lives behind this interface, in one file per kind; the acquisition
// driver, the waiter queues, the grant registry and the watchdog never ask which kind they serve.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "dlock/redis/reply.hpp"
#include "net/connection.hpp"
#include "topology/topology.hpp"

// The two public types the interface names, declared rather than included, so that the interface
// (and every file of the runtime that includes it) does not depend on the public API's headers;
// a kind's own file includes what it uses.
namespace dlock {
enum class lock_type;  // dlock/lock.hpp
struct lease_options;  // dlock/lease.hpp
}  // namespace dlock

namespace dlock::detail {

/// A lock's key and the keys derived from it by Redisson's rule (dlock/keys.hpp).
struct lock_names {
  /// `shared_fence_counter`: client_options::fence_counter (empty: a counter per name).
  lock_names(std::string lock_name, const std::string& shared_fence_counter = {});
  std::string name;
  std::string fence_key;   // redisson_lock_token:{NAME}
  std::string channel;     // where its waiters listen: redisson_lock__channel:{NAME} for locks
  std::string holder_key;  // dlock_holder:{NAME}: who holds it (_holder.lua)
  // Keys some kinds keep beside the lock (a fair lock's queue and deadlines, a leased
  // semaphore's permits, a read-write lock's intent key), and the channel a release publishes
  // on when it differs from `channel` (a fair lock's waiter listens on its own channel).
  std::string aux_key1, aux_key2, publish_channel;
};

/// A key derived from `name` by Redisson's suffix rule: `NAME:suffix` if NAME holds a '{',
/// else `{NAME}:suffix` (the name's slot either way).
std::string suffixed_key(std::string_view name, std::string_view suffix);

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
  /// How long a waiter's place lasts without renewal (fair locks, waiting writers).
  std::chrono::milliseconds waiter_lease{0};
  /// Semaphores: permits taken or given back at once.
  std::int64_t permits = 1;
  /// False for a single attempt: it takes no place in a queue.
  bool may_queue = true;
  /// The owner holds this lock through this client already: the attempt is a re-entry. The
  /// masters' own "re-entered" answers are trusted only then (RedLock): without a hold here,
  /// such an answer is a stale count left by an attempt whose release never reached that master.
  bool holds_already = false;
  /// Releases: let go once every node the call went to has answered, which may be after the
  /// call's callback ran (RedLock reports a release once a majority has confirmed it). A closing
  /// client waits for it (release_drain).
  std::shared_ptr<void> settled = nullptr;
  /// The holder record a grant writes beside the lock (holder_record.hpp). Set on every call of
  /// a client that records holders, whose scripts then get the record's key (with_record);
  /// empty when the client records none.
  std::string_view identity{};
};

/// How a hold ends (lock_kind::end_hold).
enum class hold_end {
  /// Its holder gives back one hold it knows it has: one count of a re-entered lock (the lock
  /// itself goes with the last), a semaphore's permits. Waiters are told if the lock came free.
  release,
  /// The owner's hold ends outright, whatever its count, and whether or not the grant it is
  /// sent for took effect: a grant whose reply was lost or came too late, one dead on arrival,
  /// one declared lost. Safe to send blind: a semaphore gives permits back only if its grant's
  /// mark says they were taken. Waiters are told if the lock came free.
  drop,
  /// As `drop`, telling nobody: RedLock's partial grants after a miss that a holder elsewhere
  /// caused, where waking anyone (ourselves included) would only cost an attempt.
  drop_quietly,
};

/// The command a hold's end announces the unlock with (`topology::publish_command`), or none.
inline std::string_view unlock_publisher(const lock_call& c, hold_end how) {
  return how == hold_end::drop_quietly ? std::string_view("") : c.topo.publish_command();
}

/// `keys`, whose last is the name's holder record key (_holder.lua), without it when the call's
/// client records no holders: the scripts then leave records alone, and an ACL user whose key
/// patterns leave out `dlock_holder:*` is not refused the whole call.
inline std::span<const std::string_view> with_record(std::span<const std::string_view> keys,
                                                     const lock_call& c) {
  return c.identity.empty() ? keys.first(keys.size() - 1) : keys;
}

/// One hold in a renewal batch.
struct renewal_item {
  const std::string* name;
  const std::string* holder_key;  // nullptr: the client records no holders
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
  /// True for semaphores: an acquisition may take several permits (lease_options::permits).
  virtual bool counts_permits() const noexcept { return false; }
  /// False for a kind whose holds never expire on the server (Redisson's RSemaphore permits):
  /// its leases have no lease time, no watchdog, and cannot be lost to expiry.
  virtual bool leased() const noexcept { return true; }
  /// True if a waiter holds a place on the server that it must renew while it waits and give
  /// up when it stops waiting (`abandon`): a fair lock's queue, a waiting writer's intent.
  virtual bool keeps_waiter_place() const noexcept { return false; }
  /// True if a release publishes on the channel this client's own waiters listen on, so that
  /// its echo must be told apart (false: a fair lock's release tells the next waiter alone).
  virtual bool release_echoes() const noexcept { return true; }
  /// True if a waiter's subscription outlives its wait for a moment: a fair lock's waiter
  /// listens on its owner's own channel, which the same owner's next wait uses again, so a
  /// hand-off loop subscribes once instead of once per acquisition.
  virtual bool lingers() const noexcept { return false; }
  /// How many local waiters an unlock message wakes: one for a mutex; all for a read-write
  /// lock's write release; as many as permits came back for a semaphore.
  virtual std::size_t woken_by(std::string_view message) const noexcept {
    (void)message;
    return 1;
  }

  /// The keys and channels of the lock `name` for this kind.
  virtual std::shared_ptr<const lock_names> names_of(std::string name,
                                                     const std::string& fence_counter) const;
  /// The names one acquisition by `owner` uses: `names` itself, or (a fair lock) with the
  /// owner's own wake-up channel.
  virtual std::shared_ptr<const lock_names> names_for(std::shared_ptr<const lock_names> names,
                                                      const std::string& owner) const {
    (void)owner;
    return names;
  }

  /// The owner id of a new acquisition (for a reentrant kind, shared by its re-entries).
  /// Throws errc::invalid_argument for options the kind does not take.
  virtual std::string owner_for(const std::string& client_id, const lease_options& o) const = 0;
  /// What `lease::permit_id` shows of a grant held by `owner`: a leased semaphore's permit ids
  /// in hex; nothing for the kinds whose owner is not a permit.
  virtual std::string permit_id(const std::string& owner) const {
    (void)owner;
    return {};
  }

  /// Sends one attempt; `decode_attempt` reads its reply.
  virtual void attempt(const lock_call& c, net::reply_callback done) const = 0;
  virtual attempt_outcome decode_attempt(const reply& r) const;

  /// Ends the owner's hold as `how` says, in one script call. A release's reply is nil when the
  /// owner no longer held it, an integer otherwise (0: holds remain, n >= 1: released and n - 1
  /// subscribers were told); a drop's is nil or an integer too, whose meaning varies by kind.
  virtual void end_hold(const lock_call& c, hold_end how, net::reply_callback done) const = 0;
  // end_hold by name, so that a call site says which end it means.
  void release(const lock_call& c, net::reply_callback done) const {
    end_hold(c, hold_end::release, std::move(done));
  }
  void drop(const lock_call& c, net::reply_callback done) const {
    end_hold(c, hold_end::drop, std::move(done));
  }
  void drop_quietly(const lock_call& c, net::reply_callback done) const {
    end_hold(c, hold_end::drop_quietly, std::move(done));
  }
  /// Gives up the waiter place an acquisition that ended without the lock may have left
  /// (`keeps_waiter_place`). Replies with anything; the default has nothing to give up and
  /// does not call `done`.
  virtual void abandon(const lock_call& c, net::reply_callback done) const {
    (void)c;
    (void)done;
  }
  /// Renews `items` (all on `node`, in one slot) in one script call; the reply holds 1 (renewed)
  /// or 0 (no longer held) per item.
  virtual void renew(topology& t, node_id node, std::span<const renewal_item> items,
                     net::clock::time_point deadline, net::reply_callback done) const = 0;
};

/// The kinds dlock has (one file each), and the mutexes RedLock can run over.
const lock_kind& reentrant_kind() noexcept;
const lock_kind& simple_kind() noexcept;
const lock_kind& fair_kind() noexcept;
const lock_kind& read_kind() noexcept;
const lock_kind& write_kind() noexcept;
/// The write side taken by a holder of the read side (read_lock::upgrade).
const lock_kind& upgrade_kind() noexcept;
const lock_kind& semaphore_kind() noexcept;
const lock_kind& leased_semaphore_kind() noexcept;
std::span<const lock_kind* const> redlock_capable_kinds() noexcept;

}  // namespace dlock::detail
