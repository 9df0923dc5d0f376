// RedLock's decision over independent masters, sans-io: one round (an acquisition, a fence
// write-back, a renewal of one hold) asks every master the same question at once, and holds when
// a majority said yes while time remained. The round owns no socket, clock or timer: it is told
// each master's outcome and the time, so every path (late replies after the decision, all
// masters timing out, exactly a majority, validity running out while replies trickle in) is
// unit-tested with made-up times.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dlock::detail {

/// How RedLock times one round, all derived from the lease.
struct quorum_timing {
  /// Each master must answer within this share of the lease (RedLock's "small compared to the
  /// auto-release time"), so a stalled master cannot hold the round up.
  double node_timeout_factor = 0.05;
  /// Clocks drift: validity loses this share of the lease, plus `drift_floor`.
  double drift_factor = 0.01;
  std::chrono::milliseconds drift_floor{2};

  /// How long one master may take to answer, for a lease of `lease` (at least 1 ms).
  std::chrono::milliseconds node_timeout(std::chrono::milliseconds lease) const;
  /// The drift allowance for a lease of `lease`.
  std::chrono::milliseconds drift(std::chrono::milliseconds lease) const;
};

/// ⌊n/2⌋ + 1: how many of `n` masters make a majority.
constexpr std::size_t majority_of(std::size_t n) noexcept {
  return n / 2 + 1;
}

class quorum_round {
 public:
  using clock = std::chrono::steady_clock;

  /// What one master said.
  enum class vote {
    yes,      ///< granted (or renewed, or stored)
    no,       ///< a definite refusal: held by someone else, no longer ours
    unknown,  ///< no usable answer: an error, a timeout, a connection lost
  };
  enum class verdict {
    pending,  ///< neither a majority of yes nor a certain miss yet
    won,      ///< a majority said yes, with validity left
    lost,     ///< a majority can no longer say yes, or the validity ran out first
  };

  /// A round over `masters` masters (at least 1), started at `started`, for a lease of `lease`
  /// (validity = lease - elapsed - drift).
  quorum_round(std::size_t masters, clock::time_point started, std::chrono::milliseconds lease,
               const quorum_timing& timing);
  /// A round with no validity to run out (a release: it only counts answers).
  explicit quorum_round(std::size_t masters);

  /// Records master `index`'s answer at `now`, with a value the caller reads back (a fence, a
  /// PTTL). Returns the verdict, which never changes once decided: answers after the decision
  /// (late replies) are recorded, and `late()` counts them, but they change nothing. A second
  /// answer from the same master is ignored.
  verdict record(std::size_t index, vote v, std::int64_t value, clock::time_point now);
  /// The verdict at `now`: a round still pending whose validity has run out is lost.
  verdict check(clock::time_point now);
  verdict current() const noexcept { return verdict_; }

  /// Validity left at `now`: lease - (now - started) - drift. Not positive: nothing is held.
  clock::duration validity(clock::time_point now) const noexcept;

  std::size_t masters() const noexcept { return votes_.size(); }
  std::size_t needed() const noexcept { return majority_of(votes_.size()); }
  std::size_t count(vote v) const noexcept;
  std::size_t answered() const noexcept;
  std::size_t late() const noexcept { return late_; }
  /// The largest value among yes answers given before the decision (a quorum's fences).
  std::int64_t max_yes_value() const noexcept;
  /// How long until enough masters may be free for a majority, from the `no` answers' PTTLs
  /// (-1: no expiry, counted as never; -2: gone, counted as free). Masters that said yes are
  /// counted free (a miss releases them); masters that gave no usable answer as never free.
  /// 0 when a majority may already be free; -1 when no wait frees enough.
  std::int64_t wait_for_majority_ms() const;

 private:
  verdict decide(clock::time_point now);

  std::vector<vote> votes_;
  std::vector<std::int64_t> values_;
  std::vector<bool> answered_;
  std::vector<bool> before_decision_;
  clock::time_point validity_end_;
  verdict verdict_ = verdict::pending;
  std::size_t late_ = 0;
};

}  // namespace dlock::detail
