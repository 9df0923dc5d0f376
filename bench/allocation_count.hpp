// Heap allocations counted while a scenario asks: how many a lock+unlock pair makes is a cost
// the pairs/s rows cannot resolve on a noisy machine, but a count is exact. Only a program that
// links allocation_count.cpp counts (it replaces the global operator new); `dlock bench` does
// not, and its rows leave the field out.
#pragma once

#include <cstdint>

namespace dlock::bench {

struct allocation_counter {
  /// Starts counting every operator new in the process, from any thread. Null: not counted.
  void (*start)() = nullptr;
  /// Stops counting and returns the allocations since `start`.
  std::uint64_t (*stop)() = nullptr;
  explicit operator bool() const noexcept { return start != nullptr && stop != nullptr; }
};

/// The counter of a program that links allocation_count.cpp.
allocation_counter counting_allocations() noexcept;

}  // namespace dlock::bench
