// The figures behind client::metrics(): latency histograms and counters per lock kind and name
// prefix, script round trips per command kind, and the watchdog's lag behind its schedule.
// Recording is a few relaxed atomic additions on the thread that saw the event; only finding a
// name's series (once per acquisition) takes a mutex.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "core/sync.hpp"
#include "dlock/observe.hpp"

namespace dlock::detail {

class lock_kind;

/// The kind's label in events and metrics: "reentrant", "fair", "leased_semaphore", ...
std::string_view metric_kind(const lock_kind& k) noexcept;

/// A name's first segment: the part before the first ':' or '/' (the whole name without
/// either); the default of client_options::metric_prefix.
std::string first_segment(std::string_view name);

/// Upper bounds of every histogram's buckets, in seconds: from 100 us (a loopback round trip)
/// to an hour (a long job's hold).
inline constexpr std::array<double, 21> histogram_bounds = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
    0.5,    1,       2.5,    5,     10,     30,    60,   300,   900,  3600};

class histogram {
 public:
  void observe(std::chrono::steady_clock::duration d) noexcept;
  histogram_snapshot snapshot() const;

 private:
  std::array<std::atomic<std::uint64_t>, histogram_bounds.size() + 1> counts_{};
  std::atomic<std::uint64_t> sum_ns_{0};
};

/// One kind's locks under one prefix.
struct lock_series {
  std::string_view kind;
  std::string prefix;
  std::atomic<std::uint64_t> granted{0}, not_acquired{0}, cancelled{0}, failed{0}, released{0},
      lost_expired{0}, lost_not_held{0};
  histogram wait, hold;
};

enum class timed_command { acquire, release, renew };

class metrics_registry {
 public:
  /// `prefix_of` empty: first_segment. `prefix_limit` distinct prefixes per kind, then "other".
  metrics_registry(std::function<std::string(std::string_view)> prefix_of,
                   std::size_t prefix_limit);

  /// The series of `name`'s prefix for locks of `kind`, made on first use; stable while the
  /// registry lives. Any thread. A prefix function that throws counts the name under "other".
  lock_series& series_for(const lock_kind& kind, std::string_view name);
  void round_trip(timed_command c, std::chrono::steady_clock::duration d) noexcept {
    round_trips_[static_cast<std::size_t>(c)].observe(d);
  }
  void renewal_lag(std::chrono::steady_clock::duration d) noexcept { renewal_lag_.observe(d); }
  /// Fills `m`'s locks, round trips and renewal lag.
  void snapshot_into(metrics_snapshot& m) const;

 private:
  const std::function<std::string(std::string_view)> prefix_of_;
  const std::size_t prefix_limit_;
  mutable mutex m_;
  std::deque<lock_series> series_ DLOCK_GUARDED_BY(m_);  // a deque: references stay valid
  std::map<std::pair<std::string_view, std::string>, lock_series*, std::less<>> index_
      DLOCK_GUARDED_BY(m_);
  std::map<std::string_view, std::size_t> prefixes_per_kind_ DLOCK_GUARDED_BY(m_);
  std::array<histogram, 3> round_trips_;
  histogram renewal_lag_;
};

}  // namespace dlock::detail
