// The smallest coroutine the tests need to co_await dlock's awaitables without asio.
#pragma once

#include <coroutine>
#include <exception>

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

}  // namespace dlock::testing
