// A value handed from one thread (the client's I/O thread) to another that waits for it: a
// release store and a wake through a futex, one system call, no mutex to fight over, no
// allocation. Notifying touches only the kernel's wait table, never this object after the
// store, so the waiter may destroy it as soon as `take` returns.
//
// On Linux the wait is a plain FUTEX_WAIT: libstdc++'s std::atomic::wait first spins calling
// sched_yield, which on a machine with fewer cores than waiting callers (16 threads on 2 cores)
// turns every wait into a round of needless context switches.
#pragma once

#include <atomic>
#include <utility>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cerrno>
#endif

namespace dlock::detail {

template <class T>
class one_shot {
 public:
  /// Called once, by the producing thread.
  void put(T value) {
    value_ = std::move(value);
#if defined(__linux__)
    // The waiter may return and destroy *this as soon as the store is visible: only the
    // address is passed to the kernel after it, never dereferenced here.
    int* word = reinterpret_cast<int*>(&done_);
    if (done_.exchange(1, std::memory_order_acq_rel) == waiting) {
      ::syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
    }
#else
    done_.store(1, std::memory_order_release);
    done_.notify_one();
#endif
  }
  /// Waits for `put`, then returns the value.
  T take() {
#if defined(__linux__)
    int expected = 0;
    if (done_.compare_exchange_strong(expected, waiting, std::memory_order_acquire)) {
      while (done_.load(std::memory_order_acquire) == waiting) {
        ::syscall(SYS_futex, reinterpret_cast<int*>(&done_), FUTEX_WAIT_PRIVATE, waiting, nullptr,
                  nullptr, 0);
      }
    }
#else
    done_.wait(0, std::memory_order_acquire);
#endif
    return std::move(value_);
  }

 private:
  static constexpr int waiting = 2;
  std::atomic<int> done_{0};
  T value_{};
};

}  // namespace dlock::detail
