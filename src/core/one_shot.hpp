// A value handed from one thread (the client's I/O thread) to another that waits for it: a
// release store and a wake through a futex, one system call, no mutex to fight over, no
// allocation. Notifying touches only the kernel's wait table, never this object after the
// store, so the waiter may destroy it as soon as `take` returns.
//
// On Linux the wait is a FUTEX_WAIT, after a short spin by at most one waiting thread in the
// process. libstdc++'s std::atomic::wait spins calling sched_yield in every waiter, which on a
// machine with fewer cores than waiting callers (16 threads on 2 cores) turns every wait into a
// round of needless context switches; but a lone caller waiting for a round trip (tens of
// microseconds on loopback) that sleeps at once pays a wake-up from an idle core on every reply.
// One spinner keeps that case fast. It spins only while few callers wait: with 16 or more
// waiting, replies come back to back and the I/O thread and the server keep the cores busy, so a
// yielding thread only takes CPU from them (64 threads on two command connections, 2 cores: ~100k
// pairs/s spinning, ~130k not; docs/benchmarks/spin-cap.txt). A limit of 4 was measured too:
// 8 threads locking in a loop gained 23 % and 16 threads at a fixed rate spent 16 % less CPU,
// but the marketplace's 10 workers lost 5 %, so 16 stays.
#pragma once

#include <atomic>
#include <chrono>
#include <utility>

#if defined(__linux__)
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cerrno>
#endif

namespace dlock::detail {

/// How many threads are in one_shot::take right now, process-wide: callers parked on a reply.
/// The connection reads it too: while none waits, nothing is about to hand its I/O thread a
/// batch of replies, so a command is better sent by the thread that submits it.
inline std::atomic<int> one_shot_waiters{0};

#if defined(__linux__)
/// How many one_shot waiters are spinning right now, process-wide (at most one spins).
inline std::atomic<int> one_shot_spinners{0};
/// From this many other waiters on, none spins.
inline constexpr int one_shot_spin_max_waiters = 16;
/// How long the spinning waiter yields before it sleeps: about one loopback round trip.
inline constexpr std::chrono::microseconds one_shot_spin{100};
#endif

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
    const int others_waiting = one_shot_waiters.fetch_add(1, std::memory_order_relaxed);
    if (done_.load(std::memory_order_acquire) == 0 && others_waiting < one_shot_spin_max_waiters) {
      if (one_shot_spinners.fetch_add(1, std::memory_order_relaxed) == 0) {
        const auto until = std::chrono::steady_clock::now() + one_shot_spin;
        while (done_.load(std::memory_order_acquire) == 0 &&
               std::chrono::steady_clock::now() < until) {
          ::sched_yield();
        }
      }
      one_shot_spinners.fetch_sub(1, std::memory_order_relaxed);
    }
    int expected = 0;
    if (done_.compare_exchange_strong(expected, waiting, std::memory_order_acquire)) {
      while (done_.load(std::memory_order_acquire) == waiting) {
        ::syscall(SYS_futex, reinterpret_cast<int*>(&done_), FUTEX_WAIT_PRIVATE, waiting, nullptr,
                  nullptr, 0);
      }
    }
    one_shot_waiters.fetch_sub(1, std::memory_order_relaxed);
#else
    one_shot_waiters.fetch_add(1, std::memory_order_relaxed);
    done_.wait(0, std::memory_order_acquire);
    one_shot_waiters.fetch_sub(1, std::memory_order_relaxed);
#endif
    return std::move(value_);
  }

 private:
  static constexpr int waiting = 2;
  std::atomic<int> done_{0};
  T value_{};
};

}  // namespace dlock::detail
