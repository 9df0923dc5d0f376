// The grants a client holds: which owner holds which lock, how many holds each grant has, until
// when it is known to be valid, and whether it was lost. Shared by user threads (acquire,
// release, lease accessors) and the I/O thread (watchdog, expiry watch), under one mutex. It
// owns no timer and no connection: the lock core drives it, which keeps it testable alone.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/spare_nodes.hpp"
#include "core/sync.hpp"
#include "locks/grant.hpp"

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
  static key key_of(const grant& g) noexcept;
  void add_locked(const std::shared_ptr<grant>& g) DLOCK_REQUIRES(mutex_);
  void remove_locked(grant& g) DLOCK_REQUIRES(mutex_);

  mutable mutex mutex_;
  using table = std::unordered_map<key, std::shared_ptr<grant>, key_hash>;
  table grants_ DLOCK_GUARDED_BY(mutex_);
  spare_nodes<table> spare_ DLOCK_GUARDED_BY(mutex_);  // a grant per acquisition comes and goes
  std::uint64_t next_hold_id_ DLOCK_GUARDED_BY(mutex_) = 1;
  steady::time_point expiry_armed_at_ DLOCK_GUARDED_BY(mutex_) = steady::time_point::max();
};

}  // namespace dlock::detail
