// What `dlock watch` knows of the names it watches (watch_model.cpp): the latest snapshot of
// each, the figures derived between snapshots (held-for, a TTL counting down, hand-offs per
// second) and the events that diffing two snapshots of a name yields.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lock_view.hpp"

namespace dlock::cli {

using steady_time = std::chrono::steady_clock::time_point;
using wall_time = std::chrono::system_clock::time_point;

/// One change of one name, as `watch --json` prints it (docs/cli.md).
struct watch_event {
  std::string type;  ///< acquired, released, lost, expired, waiter_joined, waiter_left, handoff
  std::string name;
  std::string kind;
  wall_time time{};
  nlohmann::json holder = nullptr;    ///< the holder concerned: identity or owner
  nlohmann::json previous = nullptr;  ///< handoff: the holder before
  std::uint64_t fence = 0;
  std::int64_t waiters = 0;
};

/// The JSON line of one event.
nlohmann::json event_json(const watch_event& e);

/// One watched name and what is derived from its snapshots.
struct watch_entry {
  shown s;
  steady_time read_at{};               ///< when `s` was read
  std::optional<wall_time> held_seen;  ///< when watch first saw the current holders
  std::string holders_key;             ///< the current holders, to tell a change of them
  std::deque<std::pair<steady_time, std::uint64_t>> fences;  ///< fence samples, last 10 s
  // When the last unlock message and keyspace `expired` notification arrived: one that arrived
  // after a snapshot was read speaks of what changed after it.
  steady_time unlock_at{};
  steady_time expiry_at{};
};

/// A row as the table shows it (terminal and plain modes).
struct watch_row {
  std::string name, kind, holder, held, ttl, waiters, fence, handoffs;
  std::chrono::milliseconds held_for{0};
  std::int64_t waiting = 0;
};

enum class watch_sort { name, held_for, waiters };
/// "name", "held", "waiters".
const char* sort_label(watch_sort s);

class watch_model {
 public:
  /// `all`: free names are shown too (as `ls --all`).
  explicit watch_model(bool all) : all_(all) {}

  /// Takes a fresh snapshot of `name`, read at `now`; returns the events against the previous
  /// one, in the order they happened. A `baseline` snapshot (the first scan) yields none: the
  /// state at start is not a change.
  std::vector<watch_event> update(const std::string& name, shown s, steady_time now, wall_time wall,
                                  bool baseline);
  /// An unlock message, or a keyspace `expired` notification, arrived for `name`.
  void note_unlock(const std::string& name, steady_time now);
  void note_expiry(const std::string& name, steady_time now);
  bool known(const std::string& name) const { return entries_.count(name) != 0; }
  /// Whether a release is heard (its message or its key's deletion): not on a Cluster without
  /// keyspace notifications, whose release messages are sharded. A holder gone unheard is then
  /// `ended`, never `lost`: a clean release must not read as a loss.
  void hear_releases(bool heard) { releases_heard_ = heard; }
  std::vector<std::string> names() const;

  /// The shown rows, matching the glob `filter`, sorted.
  std::vector<watch_row> rows(const std::string& filter, watch_sort sort, steady_time now,
                              wall_time wall) const;
  /// How many names are shown (before any filter).
  std::size_t shown_count() const;

 private:
  bool visible(const watch_entry& e) const;
  watch_row row_of(const std::string& name, const watch_entry& e, steady_time now,
                   wall_time wall) const;

  bool all_;
  bool releases_heard_ = true;
  std::map<std::string, watch_entry> entries_;
};

/// The remaining lease now, counted down from the last read with the local monotonic clock
/// (nothing when free, milliseconds::max() without expiry, never below 0); a leased semaphore's
/// is its first permit to run out.
std::optional<std::chrono::milliseconds> ttl_now(const watch_entry& e, steady_time now);
/// Fence increases per second over the last 10 s (over the time watched, if shorter).
double handoffs_per_second(const watch_entry& e, steady_time now);
/// "1h02m", "3m12s", "45s", "-".
std::string held_text(std::optional<std::chrono::milliseconds> held);

/// The lock names a pub/sub channel (unlock messages of every kind) or a keyspace notification's
/// key may stand for: the unwrapped `{NAME}` first, then a name that holds a '{'. Empty when it
/// names no lock.
std::vector<std::string> names_of_channel(std::string_view channel);
std::vector<std::string> names_of_key(std::string_view key);

}  // namespace dlock::cli
