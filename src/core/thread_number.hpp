// A process-unique number per thread, given on first use and never reused (like a Java thread
// id): the default owner of a reentrant hold, as Redisson uses the thread id.
#pragma once

#include <atomic>
#include <cstdint>

namespace dlock::detail {

inline std::uint64_t current_thread_number() noexcept {
  static std::atomic<std::uint64_t> next{1};
  thread_local const std::uint64_t mine = next.fetch_add(1, std::memory_order_relaxed);
  return mine;
}

}  // namespace dlock::detail
