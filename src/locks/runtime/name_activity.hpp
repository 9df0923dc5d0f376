// Per lock name: how many local acquisitions are queued or attempting, whether a first attempt
// went out directly from a user thread, and until when this client yields the name to waiters
// elsewhere after a release. User threads read it to decide whether a first attempt may leave at
// once (no hop through the I/O thread) without overtaking anyone here; the I/O thread updates it.
// Entries exist only while something is going on.
//
// Every acquisition and release touches it several times, from its caller's thread and from the
// I/O thread, so the names are spread over shards with a mutex each: with one mutex for all, a
// caller preempted while holding it (16 callers on 2 cores) made the others sleep on it
// (measured with perf).
#pragma once

#include <array>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "core/spare_nodes.hpp"
#include "core/sync.hpp"

namespace dlock::detail {

class name_activity {
 public:
  using clock = std::chrono::steady_clock;

  /// Claims `name` for a first attempt sent directly: only when no local acquisition is queued
  /// or attempting on it and no yield is in force. A claim counts as one local acquisition.
  bool claim_direct(const std::string& name, clock::time_point now);
  /// Remembers the direct attempt, so that acquisitions arriving while it is in flight queue
  /// behind it.
  void publish_direct(const std::string& name, std::weak_ptr<void> attempt);
  /// The direct attempt in flight on `name`, if any.
  std::shared_ptr<void> direct(const std::string& name) const;
  /// Counts local acquisitions in (+1) or out (-1); `end_direct` forgets the direct attempt.
  void add_local(const std::string& name, int delta, bool end_direct = false);
  bool has_local(const std::string& name) const;

  /// Until when this client yields `name`, if a yield is in force at `now`.
  std::optional<clock::time_point> yielding(const std::string& name, clock::time_point now) const;
  void set_yield(const std::string& name, clock::time_point until);
  void end_yield(const std::string& name);

 private:
  struct entry {
    int local = 0;
    clock::time_point yield_until{};
    std::weak_ptr<void> direct;
  };
  using table = std::unordered_map<std::string, entry>;
  // A cache line each (64 bytes on the targets we build for), so that two shards' mutexes do
  // not share one.
  struct alignas(64) shard {
    mutex guard;
    table names DLOCK_GUARDED_BY(guard);
    // An uncontended acquisition adds its name's entry and removes it again.
    spare_nodes<table> spare DLOCK_GUARDED_BY(guard);
    /// The entry for `name`, added if missing.
    table::iterator slot(const std::string& name) DLOCK_REQUIRES(guard);
  };
  static constexpr std::size_t shard_count = 16;
  shard& shard_of(const std::string& name) const;
  mutable std::array<shard, shard_count> shards_;
};

}  // namespace dlock::detail
