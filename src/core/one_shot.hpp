// A value handed from one thread (the client's I/O thread) to another that waits for it: a
// release store and a wake through the futex behind std::atomic::wait, one system call, no
// mutex to fight over, no allocation. Notifying touches only the kernel's and libstdc++'s wait
// tables, never this object, so the waiter may destroy it as soon as `take` returns.
#pragma once

#include <atomic>
#include <utility>

namespace dlock::detail {

template <class T>
class one_shot {
 public:
  /// Called once, by the producing thread.
  void put(T value) {
    value_ = std::move(value);
    done_.store(1, std::memory_order_release);
    done_.notify_one();
  }
  /// Waits for `put`, then returns the value.
  T take() {
    done_.wait(0, std::memory_order_acquire);
    return std::move(value_);
  }

 private:
  std::atomic<int> done_{0};
  T value_{};
};

}  // namespace dlock::detail
