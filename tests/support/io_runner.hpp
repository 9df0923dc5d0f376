// An asio io_context with a thread of its own, for tests of dlock/asio.hpp.
#pragma once

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <thread>

namespace dlock::testing {

/// An io_context run by a thread of its own (kept running by a work guard until destroyed).
class io_runner {
 public:
  io_runner() : work_(asio::make_work_guard(io)), thread_([this] { io.run(); }) {}
  ~io_runner() {
    work_.reset();
    io.stop();
    thread_.join();
  }
  io_runner(const io_runner&) = delete;
  io_runner& operator=(const io_runner&) = delete;
  std::thread::id id() const { return thread_.get_id(); }
  asio::io_context io;

 private:
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::thread thread_;
};

}  // namespace dlock::testing
