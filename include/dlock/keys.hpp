// dlock/keys.hpp — the Redis keys and channels a lock name stands for.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "dlock/export.hpp"

namespace dlock {

/// A key or channel derived from a lock name, by Redisson's rule, which dlock follows exactly so
/// that both wake each other and count fences on the same key: `prefix:NAME` if NAME contains
/// `{` anywhere (the name's own hash tag, complete or not, decides the cluster slot), otherwise
/// `prefix:{NAME}`. Never throws except std::bad_alloc.
DLOCK_API std::string derived_key(std::string_view prefix, std::string_view name);

/// Where the locks of one name live.
struct lock_keys {
  /// The lock itself: the name, unchanged.
  std::string lock;
  /// The fencing counter, `redisson_lock_token:{NAME}` (Redisson's fenced lock keeps the same).
  std::string fence_counter;
  /// The channel the last release publishes on, `redisson_lock__channel:{NAME}`.
  std::string unlock_channel;
  /// Who holds it, `dlock_holder:{NAME}`: a hash of each hold's owner (a semaphore's permit) to
  /// the JSON record its dlock client wrote at the grant (lock_holder::identity). dlock's own
  /// key beside Redisson's layout, in the same slot, gone with the last hold it names.
  std::string holder;
};

/// The keys and channel of the lock `name` (any kind dlock has today).
DLOCK_API lock_keys keys_of_lock(std::string_view name);

/// The prefix of every holder record key (`dlock_holder:*`).
inline constexpr std::string_view holder_key_prefix = "dlock_holder";

/// The prefix of every fencing counter, for finding locks by SCAN (`redisson_lock_token:*`).
inline constexpr std::string_view fence_counter_prefix = "redisson_lock_token";

/// The lock names whose fencing counter is `counter_key`, for listing locks: empty if the key is
/// not a fencing counter; otherwise the name, or two when Redisson's rule is ambiguous (the
/// names `a` and `{a}` derive the same keys), the unwrapped one first.
DLOCK_API std::vector<std::string> lock_names_of_fence_counter(std::string_view counter_key);

}  // namespace dlock
