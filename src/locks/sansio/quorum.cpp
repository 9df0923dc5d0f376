#include "locks/sansio/quorum.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace dlock::detail {

using std::chrono::milliseconds;

namespace {
milliseconds share_of(milliseconds lease, double factor) {
  return milliseconds(static_cast<milliseconds::rep>(std::ceil(lease.count() * factor)));
}
}  // namespace

milliseconds quorum_timing::node_timeout(milliseconds lease) const {
  return std::max(share_of(lease, node_timeout_factor), milliseconds(1));
}

milliseconds quorum_timing::drift(milliseconds lease) const {
  return share_of(lease, drift_factor) + drift_floor;
}

quorum_round::quorum_round(std::size_t masters, clock::time_point started, milliseconds lease,
                           const quorum_timing& timing)
    : votes_(std::max<std::size_t>(masters, 1), vote::unknown),
      values_(votes_.size(), 0),
      answered_(votes_.size(), false),
      before_decision_(votes_.size(), false),
      validity_end_(started + lease - timing.drift(lease)) {}

quorum_round::quorum_round(std::size_t masters)
    : votes_(std::max<std::size_t>(masters, 1), vote::unknown),
      values_(votes_.size(), 0),
      answered_(votes_.size(), false),
      before_decision_(votes_.size(), false),
      validity_end_(clock::time_point::max()) {}

quorum_round::verdict quorum_round::record(std::size_t index, vote v, std::int64_t value,
                                           clock::time_point now) {
  if (index >= votes_.size() || answered_[index]) return verdict_;
  answered_[index] = true;
  votes_[index] = v;
  values_[index] = value;
  if (verdict_ != verdict::pending) {
    ++late_;
    return verdict_;
  }
  before_decision_[index] = true;
  return decide(now);
}

quorum_round::verdict quorum_round::check(clock::time_point now) {
  return verdict_ == verdict::pending ? decide(now) : verdict_;
}

quorum_round::verdict quorum_round::decide(clock::time_point now) {
  if (validity(now) <= clock::duration::zero()) return verdict_ = verdict::lost;
  const auto yes = count(vote::yes);
  const auto against = answered() - yes;  // a no or an unknown can no longer become a yes
  if (yes >= needed()) return verdict_ = verdict::won;
  if (against > masters() - needed()) return verdict_ = verdict::lost;
  return verdict_;
}

quorum_round::clock::duration quorum_round::validity(clock::time_point now) const noexcept {
  return validity_end_ - now;
}

std::size_t quorum_round::count(vote v) const noexcept {
  std::size_t n = 0;
  for (std::size_t i = 0; i < votes_.size(); ++i)
    n += answered_[i] && votes_[i] == v ? 1 : 0;
  return n;
}

std::size_t quorum_round::answered() const noexcept {
  return static_cast<std::size_t>(std::count(answered_.begin(), answered_.end(), true));
}

std::int64_t quorum_round::max_yes_value() const noexcept {
  std::int64_t best = std::numeric_limits<std::int64_t>::min();
  for (std::size_t i = 0; i < votes_.size(); ++i) {
    if (before_decision_[i] && votes_[i] == vote::yes) best = std::max(best, values_[i]);
  }
  return best;
}

std::int64_t quorum_round::wait_for_majority_ms() const {
  constexpr auto never = std::numeric_limits<std::int64_t>::max();
  std::vector<std::int64_t> held;  // how long until each master may be free
  for (std::size_t i = 0; i < votes_.size(); ++i) {
    if (answered_[i] && votes_[i] == vote::yes) continue;  // ours: released after a miss
    if (!answered_[i] || votes_[i] == vote::unknown) {
      held.push_back(never);  // down or silent: no telling when it answers again
      continue;
    }
    const auto pttl = values_[i];
    if (pttl == -2) continue;  // gone meanwhile: free
    held.push_back(pttl < 0 ? never : pttl);
  }
  const auto free_now = masters() - held.size();
  if (free_now >= needed()) return 0;
  std::sort(held.begin(), held.end());
  const auto wait = held[needed() - free_now - 1];
  return wait == never ? -1 : wait;
}

}  // namespace dlock::detail
