// The grants a client holds: which owner holds which lock, how many holds each grant has, until
// when it is known to be valid, and whether it was lost. Shared by user threads (acquire,
// release, lease accessors) and the I/O thread (watchdog, expiry watch). Every acquisition and
// release reads and updates it several times, so the grants are spread over shards with a mutex
// each, as the names in name_activity.hpp are: with one mutex for all, 16 threads taking locks of
// their own slept on it more than on any other (measured with perf). It owns no timer and no
// connection: the lock core drives it, which keeps it testable alone.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/spare_nodes.hpp"
#include "core/sync.hpp"
#include "locks/runtime/grant.hpp"

namespace dlock::detail {

class grant_registry {
 public:
  /// What adding a hold did.
  struct added {
    std::shared_ptr<grant> g;
    std::uint64_t hold_id = 0;
    /// A grant the server no longer knew (the same owner was granted afresh): it was lost.
    std::shared_ptr<grant> stale;
    /// The new grant's validity ends before every deadline the expiry watch knew of.
    bool earlier_expiry = false;
  };

  /// A live (not lost) grant of `kind` on `name` for `owner`, if any.
  std::shared_ptr<grant> find_live(const lock_kind& kind, const std::string& name,
                                   const std::string& owner) const;

  /// Records a grant the server made: a new one, or a re-entry joining the owner's grant.
  added add_hold(const acquire_request& r, bool reentry, std::uint64_t fence,
                 steady::time_point valid_until);
  struct removed {
    bool lost = false;  // the grant had been lost already
    bool last = false;  // it was the grant's last hold: the release frees the lock
  };
  /// Takes one hold away (a release). The last hold leaves the table, which stops its renewal:
  /// rounds are built under the same mutex.
  removed remove_hold(grant& g, std::uint64_t hold_id);

  /// Marks a grant lost and takes it out of the table. Returns its on_lost callbacks, which
  /// the caller runs (then signals `g->stop`), or nothing if it was lost or released already.
  std::optional<std::vector<std::function<void(lease_lost_reason)>>> lose(
      const std::shared_ptr<grant>& g, lease_lost_reason why);

  /// A renewal succeeded: the grant is valid until at least `valid_until`.
  void renewed(grant& g, steady::time_point valid_until);
  /// An explicit extension succeeded. Returns true if the expiry watch must look earlier.
  bool extended(grant& g, steady::time_point valid_until, std::chrono::milliseconds lease_time);

  /// Every watchdog grant still held, for a renewal round.
  std::vector<std::shared_ptr<grant>> watched() const;
  std::size_t watched_count() const;

  /// The grants whose validity has passed by `now` (not lost yet), and when the next one ends
  /// (time_point::max() if none).
  std::pair<std::vector<std::shared_ptr<grant>>, steady::time_point> expired(
      steady::time_point now);
  /// When the expiry watch should look next.
  steady::time_point next_expiry() const;

  // A grant's state, read under the mutex (for the lease's accessors).
  bool valid(const grant& g, steady::time_point now) const;
  bool is_lost(const grant& g) const;
  std::optional<lease_lost_reason> lost_reason(const grant& g) const;
  steady::time_point valid_until(const grant& g) const;
  std::chrono::milliseconds lease_time(const grant& g) const;

 private:
  /// A grant's identity. The table's keys view their own grant's strings, which live as long as
  /// the grant is in the table; a lookup's key views the caller's. No key is ever built.
  struct key {
    std::string_view kind;
    std::string_view name;
    std::string_view owner;
    bool operator==(const key&) const = default;
  };
  struct key_hash {
    std::size_t operator()(const key& k) const noexcept;
  };
  using table = std::unordered_map<key, std::shared_ptr<grant>, key_hash>;
  // A cache line each, so that two shards' mutexes do not share one. A grant's `guard` is its
  // shard's mutex.
  struct alignas(64) shard {
    mutex m;
    table grants DLOCK_GUARDED_BY(m);
    spare_nodes<table> spare DLOCK_GUARDED_BY(m);  // a grant per acquisition comes and goes
    std::uint64_t next_hold_id DLOCK_GUARDED_BY(m) = 1;

    void add_locked(const std::shared_ptr<grant>& g) DLOCK_REQUIRES(m);
    void remove_locked(grant& g) DLOCK_REQUIRES(m);
  };
  static constexpr std::size_t shard_count = 16;
  static key key_of(const grant& g) noexcept;
  shard& shard_of(const key& k) const noexcept;
  /// The shard whose mutex is `g.guard`.
  shard& shard_holding(const grant& g) const noexcept;
  /// Takes `g` out of its shard's table; the caller holds `g.guard`.
  void remove_locked(grant& g) DLOCK_REQUIRES(g.guard);
  /// Lowers the time the expiry watch is armed for to `t`; true if it was later.
  bool arm_earlier(steady::time_point t) noexcept;

  mutable std::array<shard, shard_count> shards_;
  // When the expiry watch is armed for (max: not armed), as a count of steady ticks. Atomic
  // rather than under a mutex shared by the shards; expired() orders it against the grants
  // added while it scans (grant_registry.cpp says how).
  std::atomic<steady::duration::rep> expiry_armed_at_{
      steady::time_point::max().time_since_epoch().count()};
};

}  // namespace dlock::detail
