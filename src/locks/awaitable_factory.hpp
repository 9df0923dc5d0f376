// How the library builds the awaitables of calls that take one round trip (call_awaitable<T>)
// and of a latch's wait: on the acquisition awaitable's machinery (async.cpp), which already
// settles the race between a completion on the I/O thread and the awaiting thread's suspension,
// a stop token, and a coroutine destroyed while suspended.
#pragma once

#include <cstdint>
#include <functional>
#include <stop_token>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>

#include "dlock/async.hpp"

namespace dlock::detail {

struct awaitable_factory {
  /// An awaitable for a call that `start(done)` starts so that it ends in `done`, a
  /// std::function<void(call_result<T>)>, exactly once, on any thread (also inside `start`).
  /// `start` returns nothing, or the acquire_handle that cancels the call, which `stop` (if it
  /// can stop) then reaches. It may throw dlock::error, having sent nothing: the awaiting
  /// coroutine gets that from await_resume.
  template <class T, class Start>
  static call_awaitable<T> call(Start start, std::stop_token stop = {}) {
    using callback = std::function<void(call_result<T>)>;
    auto started = [start = std::move(start)](number_done done) -> acquire_handle {
      callback finish = [done = std::move(done)](call_result<T> r) {
        std::int64_t number = 0;
        if constexpr (!std::is_void_v<T>) number = static_cast<std::int64_t>(r.value);
        done(r.error, std::move(r.message), number);
      };
      if constexpr (std::is_void_v<std::invoke_result_t<Start&, callback>>) {
        start(std::move(finish));
        return {};
      } else {
        return start(std::move(finish));
      }
    };
    return call_awaitable<T>(awaitable(std::move(started), std::move(stop)));
  }

 private:
  /// A call's completion as the awaitable keeps it: the error and its words, or the number that
  /// await_resume converts to the call's type (bool: 0 or 1).
  using number_done = std::function<void(std::error_code, std::string, std::int64_t)>;
  using number_start = std::function<acquire_handle(number_done done)>;
  static acquire_awaitable awaitable(number_start start, std::stop_token stop);  // async.cpp
};

}  // namespace dlock::detail
