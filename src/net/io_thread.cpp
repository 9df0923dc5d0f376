#include "net/io_thread.hpp"

#include <string>

#include "dlock/error.hpp"

namespace dlock::net {

io_thread::io_thread(std::chrono::microseconds busy_poll, under_load busy_poll_under_load)
    : busy_poll_(busy_poll, busy_poll_under_load), work_(asio::make_work_guard(context_)) {
  thread_ = std::thread([this] {
    // A handler that throws is a bug in dlock; keep the loop alive rather than kill the process,
    // since every pending caller would otherwise hang until its own timeout.
    for (;;) {
      try {
        run_loop();
        return;
      } catch (...) {
      }
    }
  });
}

// Like io_context::run, except that after each burst of handlers the thread may keep polling
// (running whatever becomes ready, without sleeping) for the policy's window before it blocks.
void io_thread::run_loop() {
  using clock = std::chrono::steady_clock;
  if (!busy_poll_.enabled()) {
    context_.run();
    return;
  }
  while (!context_.stopped()) {
    const auto window = busy_poll_.window();
    // Under load the policy may need the waits for the next event. Handlers already due run
    // first, untimed: what follows them is the wait, and the thread sleeps unless the window is
    // open.
    const bool timed = window.count() > 0 || busy_poll_.times_waits();
    if (timed && context_.poll() > 0) continue;
    // Only a timed wait, or a loaded client's (for the trial's pace), reads the clock.
    const bool clocked = timed || busy_poll_.loaded();
    const auto start = clocked ? clock::now() : clock::time_point{};
    auto now = start;
    bool ran = false;
    if (window.count() > 0) {
      const auto until = start + window;
      for (; !context_.stopped() && now < until; now = clock::now()) {
        if (context_.poll() > 0) {
          ran = true;
          break;
        }
      }
    }
    if (!ran) {
      context_.run_one();
      // It slept: an overestimate by the one handler it ran, which only errs towards sleeping.
      if (clocked) now = clock::now();
    }
    if (timed) busy_poll_.note_wait(now - start);
    if (clocked) busy_poll_.note_time(now);
  }
}

io_thread::~io_thread() {
  stop();
}

void io_thread::stop() noexcept {
  work_.reset();
  context_.stop();
  if (thread_.joinable()) {
    if (in_io_thread()) {
      thread_.detach();
    } else {
      thread_.join();
    }
  }
}

void io_thread::refuse_blocking(std::string_view what, std::string_view instead) const {
  if (in_io_thread()) {
    throw error(errc::invalid_argument,
                std::string(what)
                    .append(" blocks, so it cannot run on the client's I/O thread (inside a "
                            "callback); ")
                    .append(instead));
  }
}

}  // namespace dlock::net
