// Compiled with clang -Wthread-safety -Werror this must FAIL: the lock is still held at the end
// of the function, which the annotations on dlock's lock types let clang see.
#include <dlock/dlock.hpp>

void forgets_to_unlock(dlock::reentrant_lock& l) {
  l.lock();
}
