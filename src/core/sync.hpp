// Mutexes that clang's thread-safety analysis understands, so that internal state can say which
// mutex guards it (DLOCK_GUARDED_BY) and functions which mutex they need (DLOCK_REQUIRES), and
// the clang build checks every access. libstdc++'s std::mutex carries no such annotations.
#pragma once

#include <cassert>
#include <mutex>

#include "dlock/thread_annotations.hpp"

namespace dlock::detail {

class DLOCK_CAPABILITY("mutex") mutex {
 public:
  void lock() DLOCK_ACQUIRE() { m_.lock(); }
  void unlock() DLOCK_RELEASE() { m_.unlock(); }
  bool try_lock() DLOCK_TRY_ACQUIRE(true) { return m_.try_lock(); }

 private:
  std::mutex m_;
};

/// Tells the analysis that `m` is held, when it is by another name: a grant's guard is the mutex of
/// its registry shard, which the analysis cannot see through. No effect at run time.
inline void assume_held(const mutex& m) DLOCK_THREAD_ANNOTATION(assert_capability(m)) {
  static_cast<void>(m);
}

/// A thread's role as a capability (the analysis's "role" idiom): state that one thread alone may
/// touch is DLOCK_GUARDED_BY its role, and code reaches it only after saying that it runs there
/// (`assert_here`), which the analysis takes as holding the role and debug builds check.
class DLOCK_CAPABILITY("role") thread_role {
 public:
  /// `here`: whether the caller runs in the role's thread (asserted in debug builds).
  void assert_here(bool here) const DLOCK_THREAD_ANNOTATION(assert_capability(this)) {
    assert(here);
    static_cast<void>(here);
  }
};

/// std::lock_guard for detail::mutex.
class DLOCK_SCOPED_CAPABILITY lock_guard {
 public:
  explicit lock_guard(mutex& m) DLOCK_ACQUIRE(m) : m_(m) { m_.lock(); }
  ~lock_guard() DLOCK_RELEASE() { m_.unlock(); }
  lock_guard(const lock_guard&) = delete;
  lock_guard& operator=(const lock_guard&) = delete;

 private:
  mutex& m_;
};

/// A guard that can let go early (and take the mutex again), for code that must call out
/// without holding it.
class DLOCK_SCOPED_CAPABILITY unique_lock {
 public:
  explicit unique_lock(mutex& m) DLOCK_ACQUIRE(m) : m_(m) { m_.lock(); }
  ~unique_lock() DLOCK_RELEASE() {
    if (held_) m_.unlock();
  }
  void unlock() DLOCK_RELEASE() {
    held_ = false;
    m_.unlock();
  }
  void lock() DLOCK_ACQUIRE() {
    m_.lock();
    held_ = true;
  }
  unique_lock(const unique_lock&) = delete;
  unique_lock& operator=(const unique_lock&) = delete;

 private:
  mutex& m_;
  bool held_ = true;
};

}  // namespace dlock::detail
