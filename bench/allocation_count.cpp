// Replaces the global operator new of the program that links it, to count allocations while
// allocation_counter::start is in force. Off, the cost is one relaxed load per allocation, so
// the timed rows run as they would without it. The array and nothrow forms forward to these
// (libstdc++), and the aligned forms are left alone: the library makes no over-aligned
// allocations on the paths counted.
#include "allocation_count.hpp"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {
std::atomic<bool> counting{false};
std::atomic<std::uint64_t> allocations{0};
}  // namespace

void* operator new(std::size_t size) {
  if (counting.load(std::memory_order_relaxed)) {
    allocations.fetch_add(1, std::memory_order_relaxed);
  }
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}

void operator delete(void* p) noexcept {
  std::free(p);
}

void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

namespace dlock::bench {

allocation_counter counting_allocations() noexcept {
  return {[] {
            allocations.store(0, std::memory_order_relaxed);
            counting.store(true, std::memory_order_seq_cst);
          },
          [] {
            counting.store(false, std::memory_order_seq_cst);
            return allocations.load(std::memory_order_relaxed);
          }};
}

}  // namespace dlock::bench
