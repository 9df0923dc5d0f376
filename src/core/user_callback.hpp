// User callbacks run on the client's I/O thread, which renews every lease: whatever a callback
// throws must stop at its call, never unwind into the thread. Every place that calls one goes
// through `call_user`.
#pragma once

#include <utility>

namespace dlock::detail {

/// Calls `f(args...)`, swallowing anything it throws. An empty std::function is not called.
template <class F, class... Args>
void call_user(F&& f, Args&&... args) noexcept {
  if constexpr (requires { static_cast<bool>(f); }) {
    if (!static_cast<bool>(f)) return;
  }
  try {
    std::forward<F>(f)(std::forward<Args>(args)...);
  } catch (...) {
  }
}

}  // namespace dlock::detail
