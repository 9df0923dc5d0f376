// The asynchronous entry points of basic_lock: a completion callback (with the handle that
// cancels it), and the C++20 awaitables (a lock's, an acquisition with reads, a multi-lock's). The
// awaitable's completion runs on the I/O thread and may beat the awaiting thread's await_suspend;
// an atomic hand-shake decides which of the two goes on with the coroutine, so that it is resumed
// exactly once and never while await_suspend still touches the awaitable.
#include <atomic>
#include <exception>
#include <functional>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "dlock/async.hpp"
#include "dlock/error.hpp"
#include "dlock/lock.hpp"
#include "dlock/multi_lock.hpp"
#include "dlock/read_write_lock.hpp"
#include "locks/async/awaitable_factory.hpp"
#include "locks/runtime/lock_core.hpp"

namespace dlock {

using detail::steady;

namespace detail {

namespace {

void give_own_owner(const lock_handle& h, lease_options& options, bool own_owner) {
  if (own_owner && options.owner.empty() && h.kind->reentrant()) options.owner = async_owner_id();
}

// Both throw errc::invalid_argument for bad arguments, as make_request does; `done` is left
// alone then.
acquire_handle start_acquisition(const lock_handle& h, std::chrono::milliseconds wait,
                                 acquire_callback& done, lease_options& options, bool own_owner) {
  give_own_owner(h, options, own_owner);
  auto request = h.core->make_request(h, options, limits_for_wait(wait), {});
  request.done = std::move(done);
  return h.core->acquire(std::move(request));
}

acquire_handle start_acquisition_and_read(const lock_handle& h, std::chrono::milliseconds wait,
                                          std::vector<std::vector<std::string>> reads,
                                          acquire_and_read_callback& done, lease_options& options,
                                          bool own_owner) {
  give_own_owner(h, options, own_owner);
  return h.core->acquire_and_read_async(h, options, limits_for_wait(wait), std::move(reads),
                                        std::move(done));
}

}  // namespace

acquire_limits limits_until(steady::time_point deadline) {
  acquire_limits limits;
  limits.deadline = deadline;
  limits.single_attempt = deadline <= steady::now();
  return limits;
}

acquire_limits limits_for_wait(std::chrono::milliseconds wait) {
  acquire_limits limits;
  const auto now = steady::now();
  limits.single_attempt = wait.count() <= 0;
  limits.deadline = limits.single_attempt ? now : saturating_add(now, wait);
  return limits;
}

std::string async_owner_id() {
  static std::atomic<std::uint64_t> next{1};
  return "async#" + std::to_string(next.fetch_add(1, std::memory_order_relaxed));
}

std::string bare_message(const error& e) {
  std::string what = e.what();
  const auto suffix = ": " + e.code().message();
  if (what.size() > suffix.size() && what.ends_with(suffix))
    what.resize(what.size() - suffix.size());
  return what;
}

/// What an acquire_awaitable shares with its completion.
struct acquire_wait {
  /// Starts the acquisition with a completion that ends in `complete`; throws
  /// errc::invalid_argument for bad arguments, as the callback forms' starters do.
  using starter = std::function<acquire_handle(const std::shared_ptr<acquire_wait>& self)>;

  acquire_wait(starter s, std::stop_token t) : start(std::move(s)), stop(std::move(t)) {}

  // Who goes on with the coroutine: the completion moves `phase` to `completed` and resumes it
  // only if await_suspend got to `suspended` first; otherwise await_suspend sees `completed` and
  // returns false. `abandoned`: the coroutine was destroyed while suspended.
  enum phase_value : int { idle, suspended, completed, abandoned };

  struct canceller {
    acquire_handle handle;
    void operator()() const noexcept { handle.cancel(); }
  };

  /// The completion, on the I/O thread, once the outcome's fields below are set.
  void complete(std::error_code ec, std::string why) {
    code = ec;
    message = std::move(why);
    if (phase.exchange(completed, std::memory_order_acq_rel) == suspended) awaiting.resume();
  }

  // Until the acquisition starts (then dropped, so that what it holds, the lock and with it the
  // client, is not kept open by the pending acquisition through its completion).
  starter start;
  std::stop_token stop;

  std::atomic<int> phase{idle};
  std::coroutine_handle<> awaiting;  // set before the acquisition starts
  // The outcome, set before `phase` becomes `completed`: the error, or what the kind of
  // awaitable yields.
  std::error_code code;
  std::string message;
  lease held;
  std::vector<reply> replies;
  multi_lease multi;
  std::exception_ptr failure;  // an argument error, rethrown as it was thrown
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
    detail::report_on_io_thread<acquire_result>(handle_->core->io(), std::move(done), e);
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
    detail::report_on_io_thread<acquire_and_read_result>(handle_->core->io(), std::move(done), e);
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
  auto start = [lock = handle_, wait, options](const std::shared_ptr<detail::acquire_wait>& state) {
    acquire_callback done = [state](acquire_result r) {
      state->held = std::move(r.held);
      state->complete(r.error, std::move(r.message));
    };
    auto own = options;
    return detail::start_acquisition(*lock, wait, done, own, true);
  };
  return acquire_awaitable(std::make_shared<detail::acquire_wait>(start, std::move(cancel)));
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
  auto start = [lock = handle_, wait, reads = std::move(reads),
                options](const std::shared_ptr<detail::acquire_wait>& state) {
    acquire_and_read_callback done = [state](acquire_and_read_result r) {
      state->held = std::move(r.held);
      state->replies = std::move(r.reads);
      state->complete(r.error, std::move(r.message));
    };
    auto own = options;
    return detail::start_acquisition_and_read(*lock, wait, reads, done, own, true);
  };
  return acquire_and_read_awaitable(
      acquire_awaitable(std::make_shared<detail::acquire_wait>(start, std::move(cancel))));
}

acquire_awaitable read_lock::upgrade_async(const lease& read_hold, std::chrono::milliseconds wait) {
  return upgrade_async(read_hold, wait, std::stop_token{});
}

acquire_awaitable read_lock::upgrade_async(const lease& read_hold, std::chrono::milliseconds wait,
                                           std::stop_token cancel) {
  // The read hold, weakly: one released before the co_await has nothing to upgrade.
  auto start = [reads = handle_, hold = std::weak_ptr(detail::lease_state::of(read_hold)),
                wait](const std::shared_ptr<detail::acquire_wait>& state) {
    acquire_callback done = [state](acquire_result r) {
      state->held = std::move(r.held);
      state->complete(r.error, std::move(r.message));
    };
    return detail::start_upgrade(*reads, hold.lock(), wait, done);
  };
  return acquire_awaitable(std::make_shared<detail::acquire_wait>(start, std::move(cancel)));
}

multi_acquire_awaitable multi_lock::acquire_async(std::chrono::milliseconds wait) {
  return acquire_async(wait, lease_options{}, std::stop_token{});
}

multi_acquire_awaitable multi_lock::acquire_async(std::chrono::milliseconds wait,
                                                  const lease_options& options) {
  return acquire_async(wait, options, std::stop_token{});
}

multi_acquire_awaitable multi_lock::acquire_async(std::chrono::milliseconds wait,
                                                  const lease_options& options,
                                                  std::stop_token cancel) {
  auto start = [lock = *this, wait, options](const std::shared_ptr<detail::acquire_wait>& state) {
    multi_acquire_callback done = [state](multi_acquire_result r) {
      state->multi = std::move(r.held);
      state->complete(r.error, std::move(r.message));
    };
    auto own = options;
    if (own.owner.empty()) own.owner = detail::async_owner_id();
    return detail::start_multi_acquisition(*lock.core_, lock.names_, std::move(own),
                                           detail::limits_for_wait(wait), done);
  };
  return multi_acquire_awaitable(
      acquire_awaitable(std::make_shared<detail::acquire_wait>(start, std::move(cancel))));
}

acquire_awaitable detail::awaitable_factory::awaitable(outcome_start start, std::stop_token stop) {
  auto starter = [start = std::move(start)](const std::shared_ptr<acquire_wait>& state) {
    return start([state](std::error_code ec, std::string message) {
      state->complete(ec, std::move(message));
    });
  };
  return acquire_awaitable(std::make_shared<acquire_wait>(std::move(starter), std::move(stop)));
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
  s.code = make_error_code(errc::cancelled);
  s.message = "cancelled before it started";
  s.phase.store(detail::acquire_wait::completed, std::memory_order_relaxed);
  return true;
}

bool acquire_awaitable::await_suspend(std::coroutine_handle<> awaiting) {
  auto& s = *state_;
  using phase = detail::acquire_wait::phase_value;
  if (s.stop.stop_requested()) {  // stopped since await_ready: still nothing sent
    s.code = make_error_code(errc::cancelled);
    s.message = "cancelled before it started";
    s.phase.store(phase::completed, std::memory_order_relaxed);
    return false;
  }
  if (!s.start) {
    s.failure = std::make_exception_ptr(
        error(errc::invalid_argument, "an acquire_awaitable can be awaited only once"));
    return false;
  }
  s.awaiting = awaiting;
  const auto start = std::move(s.start);
  s.start = nullptr;
  try {
    s.handle = start(state_);
  } catch (const error&) {
    s.failure = std::current_exception();
    s.phase.store(phase::completed, std::memory_order_relaxed);
    return false;
  }
  // From here the completion may run at any moment on the I/O thread; it touches only the
  // outcome, `phase` and `awaiting`. A stop already requested runs the canceller right here.
  if (s.stop.stop_possible()) s.on_stop.emplace(s.stop, detail::acquire_wait::canceller{s.handle});
  int expected = phase::idle;
  // Publishes `on_stop` and `handle` to whoever resumes the coroutine; if the completion came
  // first, reads its result and goes on here.
  return s.phase.compare_exchange_strong(expected, phase::suspended, std::memory_order_acq_rel,
                                         std::memory_order_acquire);
}

void acquire_awaitable::throw_if_failed() {
  auto& s = *state_;
  // Deregisters the stop callback (waiting for it if it is running on another thread: it only
  // posts the cancellation).
  s.on_stop.reset();
  if (s.failure) std::rethrow_exception(s.failure);
  if (s.code) throw error(s.code, s.message);
}

lease acquire_awaitable::await_resume() {
  throw_if_failed();
  return std::move(state_->held);
}

acquire_and_read_awaitable::acquire_and_read_awaitable(acquire_awaitable acquisition) noexcept
    : acquisition_(std::move(acquisition)) {}

lease_and_reads acquire_and_read_awaitable::await_resume() {
  acquisition_.throw_if_failed();
  auto& s = *acquisition_.state_;
  return {std::move(s.held), std::move(s.replies)};
}

multi_acquire_awaitable::multi_acquire_awaitable(acquire_awaitable acquisition) noexcept
    : acquisition_(std::move(acquisition)) {}

multi_lease multi_acquire_awaitable::await_resume() {
  acquisition_.throw_if_failed();
  return std::move(acquisition_.state_->multi);
}

}  // namespace dlock
