#include "locks/runtime/metrics_registry.hpp"

#include <algorithm>

#include "locks/kinds/lock_kind.hpp"

namespace dlock::detail {

std::string_view metric_kind(const lock_kind& k) noexcept {
  const auto n = k.name();
  if (n.starts_with("fair")) return "fair";
  if (n.starts_with("read")) return "read";
  if (n.starts_with("write")) return "write";
  if (n.starts_with("leased")) return "leased_semaphore";
  if (n.starts_with("semaphore")) return "semaphore";
  if (n.starts_with("simple")) return "simple";
  return "reentrant";
}

std::string first_segment(std::string_view name) {
  return std::string(name.substr(0, name.find_first_of(":/")));
}

void histogram::observe(std::chrono::steady_clock::duration d) noexcept {
  const auto ns =
      std::max<std::int64_t>(0, std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
  const double seconds = static_cast<double>(ns) / 1e9;
  const auto bucket = static_cast<std::size_t>(
      std::lower_bound(histogram_bounds.begin(), histogram_bounds.end(), seconds) -
      histogram_bounds.begin());
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(static_cast<std::uint64_t>(ns), std::memory_order_relaxed);
}

histogram_snapshot histogram::snapshot() const {
  histogram_snapshot s;
  s.upper_bounds.assign(histogram_bounds.begin(), histogram_bounds.end());
  s.counts.reserve(counts_.size());
  for (const auto& c : counts_) {
    s.counts.push_back(c.load(std::memory_order_relaxed));
    s.count += s.counts.back();
  }
  s.sum_seconds = static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) / 1e9;
  return s;
}

metrics_registry::metrics_registry(std::function<std::string(std::string_view)> prefix_of,
                                   std::size_t prefix_limit)
    : prefix_of_(std::move(prefix_of)), prefix_limit_(prefix_limit) {}

lock_series& metrics_registry::series_for(const lock_kind& kind, std::string_view name) {
  const auto k = metric_kind(kind);
  std::string prefix;
  try {
    prefix = prefix_of_ ? prefix_of_(name) : first_segment(name);
  } catch (...) {
    prefix = "other";
  }
  lock_guard lock(m_);
  auto key = std::make_pair(k, std::move(prefix));
  if (auto it = index_.find(key); it != index_.end()) return *it->second;
  if (prefixes_per_kind_[k] >= prefix_limit_) {
    key.second = "other";
    if (auto it = index_.find(key); it != index_.end()) return *it->second;
  } else {
    ++prefixes_per_kind_[k];
  }
  auto& s = series_.emplace_back();
  s.kind = k;
  s.prefix = key.second;
  index_.emplace(std::move(key), &s);
  return s;
}

void metrics_registry::snapshot_into(metrics_snapshot& m) const {
  auto get = [](const std::atomic<std::uint64_t>& v) { return v.load(std::memory_order_relaxed); };
  {
    lock_guard lock(m_);
    m.locks.reserve(series_.size());
    for (const auto& s : series_) {
      lock_metrics l;
      l.kind = s.kind;
      l.prefix = s.prefix;
      l.granted = get(s.granted);
      l.not_acquired = get(s.not_acquired);
      l.cancelled = get(s.cancelled);
      l.failed = get(s.failed);
      l.released = get(s.released);
      l.lost_expired = get(s.lost_expired);
      l.lost_not_held = get(s.lost_not_held);
      l.wait = s.wait.snapshot();
      l.hold = s.hold.snapshot();
      m.locks.push_back(std::move(l));
    }
  }
  constexpr std::array<std::string_view, 3> commands = {"acquire", "release", "renew"};
  for (std::size_t i = 0; i < commands.size(); ++i)
    m.round_trips.push_back({commands[i], round_trips_[i].snapshot()});
  m.renewal_lag = renewal_lag_.snapshot();
}

}  // namespace dlock::detail
