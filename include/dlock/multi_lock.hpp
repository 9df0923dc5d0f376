// dlock/multi_lock.hpp — several locks taken as one, all or nothing, without deadlock.
#pragma once

#include "dlock/export.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dlock/lease.hpp"
#include "dlock/lock.hpp"

namespace dlock {

/// The holds of one multi-lock acquisition: one lease per name, each with its own fencing
/// token. Move-only; destroying it releases every hold (never throws).
class DLOCK_API multi_lease {
 public:
  multi_lease() = default;
  explicit multi_lease(std::vector<lease> holds) noexcept : holds_(std::move(holds)) {}
  /// True if it holds all the names.
  bool held() const noexcept { return !holds_.empty(); }
  explicit operator bool() const noexcept { return held(); }
  /// True while every hold is valid.
  bool valid() const noexcept;
  /// The holds, in the multi-lock's name order (sorted, see `multi_lock`).
  const std::vector<lease>& holds() const noexcept { return holds_; }
  /// The fencing token of the hold on `name` (0 if not held here).
  std::uint64_t fence(const std::string& name) const noexcept;
  /// Releases every hold; true if the server confirmed them all. Never throws.
  bool release() noexcept;
  /// Hands the holds over to the caller (in name order), leaving this object empty.
  std::vector<lease> take() noexcept { return std::exchange(holds_, {}); }

 private:
  std::vector<lease> holds_;
};

/// Several reentrant locks taken as one: all names or none. When every name lives on one node
/// in one slot (a standalone server or Sentinel master, or names sharing a hash tag on a
/// cluster), one script call takes all the free ones or none. Otherwise the names are taken one
/// by one in one global order (sorted by name bytes), each within what is left of the wait, and
/// any partial holds are released if the wait ends: two multi-locks over overlapping names
/// never deadlock, whatever order their names were given in. Each name is an ordinary
/// reentrant lock (Redisson's RLock layout), so single-name lockers exclude it and vice versa.
///
/// The holds are owned as a reentrant lock's are: by the calling thread, or by
/// `lease_options::owner`; a name the owner already holds is re-entered (and shares that hold's
/// fencing token). The lease options apply to every hold: watchdog or fixed lease, and
/// `on_lost`, which runs once for each hold that is lost. RedLock always takes the names one by
/// one, each by majority. Copyable; thread-safe.
class DLOCK_API multi_lock {
 public:
  /// The names, sorted and de-duplicated.
  const std::vector<std::string>& names() const noexcept { return names_; }
  /// One attempt at all names. Throws as `basic_lock::try_acquire`.
  multi_lease try_acquire(const lease_options& options = {});
  /// Waits up to `wait` for all names. Returns an empty multi_lease if the wait ends first (no
  /// partial hold is kept). Throws as `basic_lock::try_acquire_for`.
  multi_lease try_acquire_for(std::chrono::milliseconds wait, const lease_options& options = {});
  /// Waits for as long as it takes.
  multi_lease acquire(const lease_options& options = {});

 private:
  friend class client;
  multi_lock(std::shared_ptr<detail::lock_core> core, std::vector<std::string> names);
  std::shared_ptr<detail::lock_core> core_;
  std::vector<std::string> names_;
};

}  // namespace dlock
