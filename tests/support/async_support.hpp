// What the tests of dlock's asynchronous forms share: the smallest coroutine that can co_await
// dlock's awaitables without asio, and a callback that records how a callback-form acquisition
// ended and on which thread.
#pragma once

#include <chrono>
#include <coroutine>
#include <exception>
#include <functional>
#include <future>
#include <stdexcept>
#include <utility>

#include "dlock/dlock.hpp"

namespace dlock::testing {

/// A coroutine that starts at once and runs to its end by itself: the tests learn how it ended
/// through promises it fulfils.
struct spawned {
  struct promise_type {
    spawned get_return_object() noexcept { return {}; }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { std::terminate(); }
  };
};

/// The value of `f`; fails the test (by throwing), instead of hanging it, if it has not come
/// within 30 s.
template <class T>
T settle(std::future<T> f) {
  if (f.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
    throw std::runtime_error("not completed within 30 s");
  }
  return f.get();
}

/// Spins for `d`: lands a cancellation or a release at a chosen instant of a hand-off, finer
/// than a sleep can.
inline void spin_for(std::chrono::microseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
  }
}

/// How a callback-form call ended, and whether it ran where blocking calls are refused (the
/// client's I/O thread).
template <class Result>
struct called_back {
  Result result;
  bool on_io_thread = false;
};

/// A completion that fulfils `done`; it tries a blocking call on `probe` to learn whether it
/// runs on the client's I/O thread (where that call is refused with errc::invalid_argument).
template <class Result>
std::function<void(Result)> into(std::promise<called_back<Result>>& done, basic_lock probe) {
  return [&done, probe](Result r) mutable {
    called_back<Result> out{std::move(r), false};
    try {
      (void)probe.try_acquire();
    } catch (const error& e) {
      out.on_io_thread = e.code() == errc::invalid_argument;
    }
    done.set_value(std::move(out));
  };
}

}  // namespace dlock::testing
