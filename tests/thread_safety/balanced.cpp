// Compiled with clang -Wthread-safety -Werror: dlock's locks used correctly raise no warning.
#include <dlock/dlock.hpp>

#include <mutex>

void lock_and_unlock(dlock::reentrant_lock& l) {
  l.lock();
  l.unlock();
}

bool try_then_unlock(dlock::simple_lock& l) {
  if (!l.try_lock()) return false;
  l.unlock();
  return true;
}
