// RedLock: a lock kind over independent masters, made from a single-server kind. Every call goes
// to every master at once (each bounded by a share of the lease), and quorum.hpp decides:
//   attempt  granted when a majority granted with validity left; the fence is the largest the
//            majority drew, written back to a majority before the grant is reported; otherwise
//            every master is released, those that did not answer included;
//   renew    per hold, renewed when a majority renewed it, lost when a majority no longer holds
//            it (the partial extensions are released), undecided otherwise;
//   release  confirmed when a majority released, or released where it held and did not hold it
//            on the rest of a majority; "not held" when a majority did not hold it.
// On each master the keys, values and scripts are exactly the wrapped kind's: the simple kind is
// node-redlock's and redsync's layout there, the reentrant kind a Redisson RLock.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "locks/kinds/lock_kind.hpp"
#include "locks/sansio/quorum.hpp"

namespace dlock::detail {

/// What RedLock rounds counted, for client_stats.
struct quorum_counters {
  std::atomic<std::uint64_t> misses{0};        // attempts no majority granted
  std::atomic<std::uint64_t> late{0};          // answers that came after their round's decision
  std::atomic<std::uint64_t> fence_raises{0};  // fence write-backs sent
};

/// Reply value of a renewal item that neither a majority renewed nor a majority refused (too
/// many masters unreachable to tell): not renewed this round, not lost either.
inline constexpr std::int64_t renewal_undecided = 2;

/// `base` over every master the topology names for a key. `counters` outlives the kind.
std::unique_ptr<lock_kind> make_redlock_kind(const lock_kind& base, quorum_timing timing,
                                             quorum_counters& counters);

}  // namespace dlock::detail
