// Teardowns that cannot run on the thread that starts them, on threads of their own that the
// process still joins before it exits.
//
// A client whose last owner lets go inside a callback on its own I/O thread (a user's callback
// dropping its copy of a lock; the core's own handlers own nothing, lock_core::unowned) cannot be
// torn down there: the teardown joins that thread. On a detached thread, a process that returned
// from main meanwhile would run exit's cleanups (OpenSSL's atexit handler, the statics'
// destructors) under it and crash. Here, exit waits for them instead. The registry is built when
// the first client is created (teardown_threads::prepare() in lock_core::create), after the
// libraries it uses registered their own cleanups, so its destructor runs before theirs: exit
// runs handlers in the reverse order of their registration.
#pragma once

#include <atomic>
#include <functional>
#include <list>
#include <memory>
#include <thread>

#include "core/sync.hpp"

namespace dlock::detail {

class teardown_threads {
 public:
  /// Runs `work` on a new thread, joined by the next call or at exit, whichever comes first.
  /// Once exit has joined the others (a teardown that starts that late), it is detached.
  static void start(std::function<void()> work) {
    if (exited.load(std::memory_order_acquire)) {
      std::thread(std::move(work)).detach();
      return;
    }
    instance().add(std::move(work));
  }

  /// Builds the registry (see the top of this file for why that matters).
  static void prepare() { instance(); }

  ~teardown_threads() {
    lock_guard lock(mutex_);
    exited.store(true, std::memory_order_release);
    for (auto& e : running_)
      e.thread.join();
  }

 private:
  teardown_threads() = default;

  static teardown_threads& instance() {
    static teardown_threads threads;
    return threads;
  }

  void add(std::function<void()> work) {
    lock_guard lock(mutex_);
    if (exited.load(std::memory_order_relaxed)) {  // exit got here first
      std::thread(std::move(work)).detach();
      return;
    }
    std::erase_if(running_, [](entry& e) {
      if (!e.done->load(std::memory_order_acquire)) return false;
      e.thread.join();
      return true;
    });
    auto done = std::make_shared<std::atomic<bool>>(false);
    running_.push_back({std::thread([work = std::move(work), done] {
                          work();
                          done->store(true, std::memory_order_release);
                        }),
                        done});
  }

  struct entry {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  // Constant-initialized with a trivial destructor: readable at any point of exit.
  static inline std::atomic<bool> exited{false};
  mutex mutex_;
  std::list<entry> running_ DLOCK_GUARDED_BY(mutex_);
};

}  // namespace dlock::detail
