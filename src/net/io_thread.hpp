// The one I/O thread of a client: it owns the asio io_context that drives every socket and timer
// of that client. User threads never touch sockets; they post work here.
#pragma once

#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <chrono>
#include <future>
#include <string_view>
#include <thread>
#include <type_traits>

#include "net/busy_poll.hpp"
#include "net/notice.hpp"

namespace dlock::net {

class io_thread {
 public:
  /// Starts the thread. `busy_poll`: how long it polls before it sleeps while replies come back
  /// fast and alone, or (`busy_poll_under_load`) while it is loaded and its events come close
  /// together (busy_poll.hpp); 0: it sleeps as soon as it has nothing to do. A `dlock::client`
  /// passes client_options::busy_poll (50 us by default) and busy_poll_under_load (a trial
  /// decides, by default); a standalone `redis_client` keeps these defaults, 0 and never.
  explicit io_thread(std::chrono::microseconds busy_poll = std::chrono::microseconds(0),
                     under_load busy_poll_under_load = under_load::never);
  ~io_thread();
  io_thread(const io_thread&) = delete;
  io_thread& operator=(const io_thread&) = delete;

  asio::io_context& context() noexcept { return context_; }
  bool in_io_thread() const noexcept { return std::this_thread::get_id() == thread_.get_id(); }
  /// Throws errc::invalid_argument, naming `what` and `instead`, if called on this thread: a
  /// blocking call there would wait for the thread that is to deliver its reply.
  void refuse_blocking(std::string_view what, std::string_view instead) const;

  template <class F>
  void post(F&& f) {
    asio::post(context_, std::forward<F>(f));
  }

  /// Runs `f` on the I/O thread and returns its result; runs it inline when already there.
  /// Exceptions thrown by `f` propagate to the caller.
  template <class F>
  std::invoke_result_t<F> run(F&& f) {
    if (in_io_thread()) return f();
    std::packaged_task<std::invoke_result_t<F>()> task(std::forward<F>(f));
    auto result = task.get_future();
    asio::post(context_, [&task] { task(); });
    return result.get();
  }

  /// A reply came back `round_trip` after its command was written, with `others_in_flight`
  /// commands still in flight on its connection. I/O thread only.
  void note_reply(std::chrono::nanoseconds round_trip, std::size_t others_in_flight) noexcept {
    busy_poll_.note_reply(round_trip, others_in_flight);
  }

  /// Where the connections and topologies on this thread report drops, reconnects, failovers
  /// and redirects. Set it before the first connection exists; it runs on the I/O thread.
  void set_notice_handler(notice_handler h) { notices_ = std::move(h); }
  /// Reports `n` to the notice handler, if there is one. I/O thread only.
  void report(notice n) const {
    if (notices_) notices_(std::move(n));
  }

  /// Stops the loop and joins the thread. Pending handlers are destroyed, not run. Idempotent.
  void stop() noexcept;
  /// False once stop() has been called. Only meaningful on the thread that would call stop().
  bool running() const noexcept { return thread_.joinable(); }

  /// Runs `close` on the I/O thread, lets the handlers it cancelled run, then runs `release`
  /// there too, and returns once it has: how objects with handlers on this thread are let go
  /// while it keeps running. Not from the I/O thread itself.
  template <class Close, class Release>
  void close_then_release(Close&& close, Release&& release) {
    std::promise<void> released;
    asio::post(context_, [&] {
      close();
      // Posted from this thread, the release queues behind the completions the close just
      // cancelled (a post from another thread could overtake them: asio keeps completions made
      // inside a handler in a thread-private queue until the handler returns).
      asio::post(context_, [&] {
        release();
        released.set_value();
      });
    });
    released.get_future().wait();
  }

 private:
  void run_loop();

  asio::io_context context_{1};
  busy_poll_policy busy_poll_;  // I/O thread only
  notice_handler notices_;      // set before any connection, then read only
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::thread thread_;
};

}  // namespace dlock::net
