#include "net/io_thread.hpp"

namespace dlock::net {

io_thread::io_thread() : work_(asio::make_work_guard(context_)) {
  thread_ = std::thread([this] {
    // A handler that throws is a bug in dlock; keep the loop alive rather than kill the process,
    // since every pending caller would otherwise hang until its own timeout.
    for (;;) {
      try {
        context_.run();
        return;
      } catch (...) {
      }
    }
  });
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

}  // namespace dlock::net
