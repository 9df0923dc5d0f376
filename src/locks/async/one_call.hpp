// Calls that take one round trip or a short chain of them (a latch's count-down, a semaphore's
// release, a lock's info, ...) in every form: started with a callback that gets a call_result<T>
// on the I/O thread, waited for by the blocking form, which throws what the result carries, or
// awaited (awaitable_factory::call). Each form runs the call's one *start*: a closure that holds
// what the call needs and starts it with a result_callback<T>, throwing dlock::error (having sent
// nothing) for bad arguments. One path, so the forms cannot differ.
#pragma once

#include <functional>
#include <string>
#include <system_error>
#include <utility>

#include "core/one_shot.hpp"
#include "core/user_callback.hpp"
#include "dlock/async.hpp"
#include "dlock/error.hpp"
#include "dlock/reply.hpp"
#include "locks/runtime/lock_core.hpp"
#include "net/io_thread.hpp"

namespace dlock::detail {

template <class T>
using result_callback = std::function<void(call_result<T>)>;

/// Runs `done(r)`: a user's callback on the I/O thread, where nothing may escape.
template <class T>
void deliver(const result_callback<T>& done, call_result<T> r) noexcept {
  call_user(done, std::move(r));
}

/// A reply callback that hands `done` the call's outcome: `value(reply)` (which may throw
/// dlock::error for a reply it cannot read) if it succeeded, else the error with the server's
/// own words (or the code's).
template <class T, class Value>
auto to_result(Value value, result_callback<T> done) {
  return [value = std::move(value), done = std::move(done)](std::error_code ec, const reply& r) {
    call_result<T> out;
    if (ec) {
      out.error = ec;
      out.message = r.is_error() ? r.str() : ec.message();
    } else {
      try {
        if constexpr (std::is_void_v<T>) {
          value(r);
        } else {
          out.value = value(r);
        }
      } catch (const error& e) {
        out.error = e.code();
        out.message = bare_message(e);
      }
    }
    deliver(done, std::move(out));
  };
}

/// The callback form: starts the call with `start(done)` and reports an error it throws (having
/// sent nothing) as every outcome is reported: through `done`, on `io`'s thread. Never throws.
template <class T, class Start>
void start_or_report(net::io_thread& io, result_callback<T> done, Start start) noexcept {
  try {
    try {
      start(done);
    } catch (const error& e) {
      report_on_io_thread<call_result<T>>(io, std::move(done), e);
    }
  } catch (...) {
    // No memory to report with: nothing may escape a call that never throws.
  }
}

/// The blocking form: starts the call with `start(done)` and waits for it; returns its value or
/// throws its error. Throws errc::invalid_argument on the I/O thread, which would wait for itself.
template <class T, class Start>
T wait_for_result(net::io_thread& io, Start start) {
  io.refuse_blocking("a synchronous call", "use the _async form there");
  one_shot<call_result<T>> result;
  start(result_callback<T>([&result](call_result<T> r) { result.put(std::move(r)); }));
  auto r = result.take();
  if (r.error) throw error(r.error, r.message);
  if constexpr (!std::is_void_v<T>) return std::move(r.value);
}

}  // namespace dlock::detail
