// How the library builds the awaitables of calls that take one round trip (call_awaitable<T>)
// and of a latch's wait: on the acquisition awaitable's machinery (async.cpp), which already
// settles the race between a completion on the I/O thread and the awaiting thread's suspension,
// a stop token, and a coroutine destroyed while suspended.
#pragma once

#include <functional>
#include <memory>
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
    using slot = typename call_awaitable<T>::slot;
    auto value = std::make_shared<slot>();
    auto started = [start = std::move(start), value](outcome_done done) -> acquire_handle {
      callback finish = [done = std::move(done), value](call_result<T> r) {
        // Written before the outcome is published (done), which orders it before await_resume.
        if constexpr (!std::is_void_v<T>) *value = std::move(r.value);
        done(r.error, std::move(r.message));
      };
      if constexpr (std::is_void_v<std::invoke_result_t<Start&, callback>>) {
        start(std::move(finish));
        return {};
      } else {
        return start(std::move(finish));
      }
    };
    return call_awaitable<T>(awaitable(std::move(started), std::move(stop)), std::move(value));
  }

 private:
  /// A call's completion as the awaitable keeps it: the error and its words (the value went
  /// into the call_awaitable's slot first).
  using outcome_done = std::function<void(std::error_code, std::string)>;
  using outcome_start = std::function<acquire_handle(outcome_done done)>;
  static acquire_awaitable awaitable(outcome_start start, std::stop_token stop);  // async.cpp
};

}  // namespace dlock::detail
