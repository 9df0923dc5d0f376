// The asynchronous entry points of basic_lock: a completion callback (with the handle that
// cancels it), and the C++20 awaitable. The awaitable's completion runs on the I/O thread and may
// beat the awaiting thread's await_suspend; an atomic hand-shake decides which of the two goes
// on with the coroutine, so that it is resumed exactly once and never while await_suspend still
// touches the awaitable.
#include <atomic>
#include <exception>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "dlock/async.hpp"
#include "dlock/error.hpp"
#include "dlock/lock.hpp"
#include "locks/lock_core.hpp"

namespace dlock {

using detail::steady;

namespace detail {

namespace {

// An owner of its own for an acquisition that is not a thread's (a coroutine's, asio's): unique
// in the process, and the client's id in front of it makes it unique everywhere.
std::string own_owner_id() {
  static std::atomic<std::uint64_t> next{1};
  return "async#" + std::to_string(next.fetch_add(1, std::memory_order_relaxed));
}

acquire_limits limits_for(std::chrono::milliseconds wait) {
  acquire_limits limits;
  const auto now = steady::now();
  limits.single_attempt = wait.count() <= 0;
  limits.deadline = limits.single_attempt ? now : saturating_add(now, wait);
  return limits;
}

void give_own_owner(const lock_handle& h, lease_options& options, bool own_owner) {
  if (own_owner && options.owner.empty() && h.kind->reentrant()) options.owner = own_owner_id();
}

// Both throw errc::invalid_argument for bad arguments, as make_request does; `done` is left
// alone then.
acquire_handle start_acquisition(const lock_handle& h, std::chrono::milliseconds wait,
                                 acquire_callback& done, lease_options& options, bool own_owner) {
  give_own_owner(h, options, own_owner);
  auto request = h.core->make_request(h, options, limits_for(wait), {});
  request.done = std::move(done);
  return h.core->acquire(std::move(request));
}

acquire_handle start_acquisition_and_read(const lock_handle& h, std::chrono::milliseconds wait,
                                          std::vector<std::vector<std::string>> reads,
                                          acquire_and_read_callback& done, lease_options& options,
                                          bool own_owner) {
  give_own_owner(h, options, own_owner);
  return h.core->acquire_and_read_async(h, options, limits_for(wait), std::move(reads),
                                        std::move(done));
}

// An error from starting a callback-form acquisition, reported as every outcome is: through
// `done`, on the I/O thread, never from the starting call; the message without the code's own
// text, which what() appends.
template <class Result, class Callback>
void report_on_io_thread(lock_core& core, Callback done, const error& e) {
  std::string what = e.what();
  const auto suffix = ": " + e.code().message();
  if (what.size() > suffix.size() && what.ends_with(suffix))
    what.resize(what.size() - suffix.size());
  core.io().post([done = std::move(done), ec = e.code(), what = std::move(what)] {
    Result r{};
    r.error = ec;
    r.message = what;
    try {
      done(std::move(r));
    } catch (...) {
      // User callbacks run on the I/O thread; nothing may escape into it.
    }
  });
}

}  // namespace

/// What an acquire_awaitable shares with its completion.
struct acquire_wait {
  acquire_wait(std::shared_ptr<lock_handle> l, std::chrono::milliseconds w, lease_options o,
               std::stop_token s,
               std::optional<std::vector<std::vector<std::string>>> r = std::nullopt)
      : lock(std::move(l)),
        wait(w),
        options(std::move(o)),
        stop(std::move(s)),
        reads(std::move(r)) {}

  // Who goes on with the coroutine: the completion moves `phase` to `completed` and resumes it
  // only if await_suspend got to `suspended` first; otherwise await_suspend sees `completed` and
  // returns false. `abandoned`: the coroutine was destroyed while suspended.
  enum phase_value : int { idle, suspended, completed, abandoned };

  struct canceller {
    acquire_handle handle;
    void operator()() const noexcept { handle.cancel(); }
  };

  /// The completion, on the I/O thread.
  void complete(acquire_result r, std::vector<reply> read_replies = {}) {
    result = std::move(r);
    replies = std::move(read_replies);
    if (phase.exchange(completed, std::memory_order_acq_rel) == suspended) awaiting.resume();
  }

  // Until the acquisition starts (then moved out, so that the pending acquisition does not keep
  // its own client open through its completion).
  std::shared_ptr<lock_handle> lock;
  std::chrono::milliseconds wait;
  lease_options options;
  std::stop_token stop;
  std::optional<std::vector<std::vector<std::string>>> reads;  // an acquire_and_read_awaitable's

  std::atomic<int> phase{idle};
  std::coroutine_handle<> awaiting;  // set before the acquisition starts
  acquire_result result;             // set before `phase` becomes `completed`
  std::vector<reply> replies;        // the same
  std::exception_ptr failure;        // an argument error, rethrown as it was thrown
  // The awaiting side's (the completion never touches them).
  acquire_handle handle;
  std::optional<std::stop_callback<canceller>> on_stop;
};

}  // namespace detail

// ---- the callback form ----

acquire_handle basic_lock::start_async(std::chrono::milliseconds wait, acquire_callback done,
                                       lease_options options, bool own_owner) {
  try {
    return detail::start_acquisition(*handle_, wait, done, options, own_owner);
  } catch (const error& e) {
    detail::report_on_io_thread<acquire_result>(*handle_->core, std::move(done), e);
    return {};
  }
}

acquire_handle basic_lock::start_read_async(std::chrono::milliseconds wait,
                                            std::vector<std::vector<std::string>> reads,
                                            acquire_and_read_callback done, lease_options options,
                                            bool own_owner) {
  try {
    return detail::start_acquisition_and_read(*handle_, wait, std::move(reads), done, options,
                                              own_owner);
  } catch (const error& e) {
    detail::report_on_io_thread<acquire_and_read_result>(*handle_->core, std::move(done), e);
    return {};
  }
}

// ---- the awaitable ----

// Three overloads rather than default arguments: a default argument of class type is a temporary
// in the caller's co_await expression, which GCC 12 destroys twice.
acquire_awaitable basic_lock::acquire_async(std::chrono::milliseconds wait) {
  return acquire_async(wait, lease_options{}, std::stop_token{});
}

acquire_awaitable basic_lock::acquire_async(std::chrono::milliseconds wait,
                                            const lease_options& options) {
  return acquire_async(wait, options, std::stop_token{});
}

acquire_awaitable basic_lock::acquire_async(std::chrono::milliseconds wait,
                                            const lease_options& options, std::stop_token cancel) {
  return acquire_awaitable(
      std::make_shared<detail::acquire_wait>(handle_, wait, options, std::move(cancel)));
}

acquire_and_read_awaitable basic_lock::acquire_and_read_async(
    std::chrono::milliseconds wait, std::vector<std::vector<std::string>> reads) {
  return acquire_and_read_async(wait, std::move(reads), lease_options{}, std::stop_token{});
}

acquire_and_read_awaitable basic_lock::acquire_and_read_async(
    std::chrono::milliseconds wait, std::vector<std::vector<std::string>> reads,
    const lease_options& options) {
  return acquire_and_read_async(wait, std::move(reads), options, std::stop_token{});
}

acquire_and_read_awaitable basic_lock::acquire_and_read_async(
    std::chrono::milliseconds wait, std::vector<std::vector<std::string>> reads,
    const lease_options& options, std::stop_token cancel) {
  return acquire_and_read_awaitable(acquire_awaitable(std::make_shared<detail::acquire_wait>(
      handle_, wait, options, std::move(cancel), std::move(reads))));
}

acquire_awaitable::acquire_awaitable(std::shared_ptr<detail::acquire_wait> state) noexcept
    : state_(std::move(state)) {}

acquire_awaitable::acquire_awaitable(acquire_awaitable&&) noexcept = default;

acquire_awaitable::~acquire_awaitable() {
  if (!state_) return;  // moved from
  auto& s = *state_;
  int expected = detail::acquire_wait::suspended;
  // The coroutine frame is being destroyed while it waits here: it must never be resumed.
  if (s.phase.compare_exchange_strong(expected, detail::acquire_wait::abandoned,
                                      std::memory_order_acq_rel)) {
    s.on_stop.reset();
    s.handle.cancel();
  }
}

bool acquire_awaitable::await_ready() {
  if (!state_) throw error(errc::invalid_argument, "this acquire_awaitable was moved from");
  auto& s = *state_;
  if (!s.stop.stop_requested()) return false;
  s.result = {{}, make_error_code(errc::cancelled), "acquisition cancelled before it started"};
  s.phase.store(detail::acquire_wait::completed, std::memory_order_relaxed);
  return true;
}

bool acquire_awaitable::await_suspend(std::coroutine_handle<> awaiting) {
  auto& s = *state_;
  using phase = detail::acquire_wait::phase_value;
  if (s.stop.stop_requested()) {  // stopped since await_ready: still nothing sent
    s.result = {{}, make_error_code(errc::cancelled), "acquisition cancelled before it started"};
    s.phase.store(phase::completed, std::memory_order_relaxed);
    return false;
  }
  if (!s.lock) {
    s.failure = std::make_exception_ptr(
        error(errc::invalid_argument, "an acquire_awaitable can be awaited only once"));
    return false;
  }
  s.awaiting = awaiting;
  const auto lock = std::move(s.lock);
  try {
    if (s.reads) {
      acquire_and_read_callback done = [state = state_](acquire_and_read_result r) {
        state->complete({std::move(r.held), r.error, std::move(r.message)}, std::move(r.reads));
      };
      s.handle = detail::start_acquisition_and_read(*lock, s.wait, std::move(*s.reads), done,
                                                    s.options, true);
    } else {
      acquire_callback done = [state = state_](acquire_result r) { state->complete(std::move(r)); };
      s.handle = detail::start_acquisition(*lock, s.wait, done, s.options, true);
    }
  } catch (const error&) {
    s.failure = std::current_exception();
    s.phase.store(phase::completed, std::memory_order_relaxed);
    return false;
  }
  // From here the completion may run at any moment on the I/O thread; it touches only `result`,
  // `phase` and `awaiting`. A stop already requested runs the canceller right here.
  if (s.stop.stop_possible()) s.on_stop.emplace(s.stop, detail::acquire_wait::canceller{s.handle});
  int expected = phase::idle;
  // Publishes `on_stop` and `handle` to whoever resumes the coroutine; if the completion came
  // first, reads its result and goes on here.
  return s.phase.compare_exchange_strong(expected, phase::suspended, std::memory_order_acq_rel,
                                         std::memory_order_acquire);
}

lease acquire_awaitable::await_resume() {
  auto& s = *state_;
  // Deregisters the stop callback (waiting for it if it is running on another thread: it only
  // posts the cancellation).
  s.on_stop.reset();
  if (s.failure) std::rethrow_exception(s.failure);
  auto r = std::move(s.result);
  if (r.error) throw error(r.error, r.message);
  return std::move(r.held);
}

acquire_and_read_awaitable::acquire_and_read_awaitable(acquire_awaitable acquisition) noexcept
    : acquisition_(std::move(acquisition)) {}

lease_and_reads acquire_and_read_awaitable::await_resume() {
  lease held = acquisition_.await_resume();
  return {std::move(held), std::move(acquisition_.state_->replies)};
}

}  // namespace dlock
