// What the lock core hands out and keeps: one owner's grant of one lock (shared by its
// re-entries), one hold of it (what a dlock::lease points to), and a pending acquisition's
// request.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/sync.hpp"
#include "dlock/lease.hpp"
#include "dlock/lock.hpp"
#include "locks/kinds/lock_kind.hpp"
#include "locks/runtime/metrics_registry.hpp"
#include "locks/sansio/attempt_timing.hpp"

namespace dlock::detail {

class lock_core;

/// What an acquire_handle cancels: one lock's acquisition (lock_core::op) or a multi-lock's.
struct cancellable : std::enable_shared_from_this<cancellable> {
  virtual ~cancellable() = default;
  /// Ends the acquisition with errc::cancelled if it has not completed. I/O thread only.
  virtual void cancel() = 0;
};

/// One owner's grant of one lock. The fields below `mutable_state` are guarded by the mutex of
/// the grant registry's shard that holds it, which `guard` names so that clang's analysis can
/// check it.
struct grant {
  grant(mutex& shard_mutex, const lock_kind& k) : guard(shard_mutex), kind(k) {}

  mutex& guard;
  const lock_kind& kind;
  std::shared_ptr<const lock_names> names;
  std::string owner;  // hash field (reentrant) or token (simple)
  std::uint64_t fence = 0;
  std::int64_t permits = 1;  // semaphores: permits this grant holds
  std::chrono::milliseconds lease_time DLOCK_GUARDED_BY(guard){0};
  bool watchdog = false;
  std::stop_source stop;
  lock_series* series = nullptr;  // its metrics (null with collect_metrics off)
  steady::time_point granted_at{};

  // mutable_state
  int holds DLOCK_GUARDED_BY(guard) = 0;
  bool in_table DLOCK_GUARDED_BY(guard) = false;
  steady::time_point valid_until DLOCK_GUARDED_BY(guard){};
  std::optional<lease_lost_reason> lost DLOCK_GUARDED_BY(guard);
  std::vector<std::pair<std::uint64_t, std::function<void(lease_lost_reason)>>> on_lost
      DLOCK_GUARDED_BY(guard);
};

/// One hold: what a `dlock::lease` points to.
struct lease_state {
  std::shared_ptr<lock_core> core;
  std::shared_ptr<grant> g;
  std::uint64_t hold_id = 0;
  steady::time_point granted_at{};
  static lease make(std::shared_ptr<lease_state> s) { return lease(std::move(s)); }
  /// The hold behind `l` (null for an empty lease).
  static const std::shared_ptr<lease_state>& of(const lease& l) noexcept { return l.state_; }
};

/// Everything a lock handle needs: the core, the kind, the names, and the Lockable holds per
/// thread.
struct lock_handle {
  std::shared_ptr<lock_core> core;
  const lock_kind* kind = nullptr;
  std::shared_ptr<const lock_names> names;
  mutex holds_mutex;
  std::unordered_map<std::uint64_t, std::vector<lease>> holds_by_thread
      DLOCK_GUARDED_BY(holds_mutex);
};

/// One acquisition, as the caller asked for it.
struct acquire_request {
  const lock_kind* kind = nullptr;
  std::shared_ptr<const lock_names> names;
  std::string owner;
  std::chrono::milliseconds lease_time{0};
  bool watchdog = false;
  std::int64_t permits = 1;
  std::function<void(lease_lost_reason)> on_lost;
  acquire_limits limits;
  acquire_callback done;
  steady::time_point started_at{};  // when the caller asked
  lock_series* series = nullptr;    // its metrics (null with collect_metrics off)
};

}  // namespace dlock::detail
