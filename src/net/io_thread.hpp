// The one I/O thread of a client: it owns the asio io_context that drives every socket and timer
// of that client. User threads never touch sockets; they post work here.
#pragma once

#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <future>
#include <thread>
#include <type_traits>

namespace dlock::net {

class io_thread {
 public:
  io_thread();
  ~io_thread();
  io_thread(const io_thread&) = delete;
  io_thread& operator=(const io_thread&) = delete;

  asio::io_context& context() noexcept { return context_; }
  bool in_io_thread() const noexcept { return std::this_thread::get_id() == thread_.get_id(); }

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

  /// Stops the loop and joins the thread. Pending handlers are destroyed, not run. Idempotent.
  void stop() noexcept;

 private:
  asio::io_context context_{1};
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::thread thread_;
};

}  // namespace dlock::net
