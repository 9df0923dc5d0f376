// A child process for multi-process tests: spawned with its stdout on a pipe, read line by line
// with a deadline (so a test waits for events the child reports, never for a fixed time), and
// always killed and reaped when the object dies.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace dlock::testing {

class child_process {
 public:
  explicit child_process(const std::vector<std::string>& argv);
  ~child_process();
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;
  child_process(child_process&&) noexcept;

  /// The next line the child printed (without '\n'), or nothing if none came within `limit` or
  /// the child closed its output.
  std::optional<std::string> read_line(std::chrono::milliseconds limit = std::chrono::seconds(30));
  /// Reads lines until one starts with `prefix`; returns it, or nothing on timeout/EOF.
  std::optional<std::string> wait_for(const std::string& prefix,
                                      std::chrono::milliseconds limit = std::chrono::seconds(30));
  void signal(int sig);
  /// Waits for the child to exit (up to `limit`, then SIGKILL); returns its exit code, or
  /// 128+signal if a signal ended it.
  int wait(std::chrono::milliseconds limit = std::chrono::seconds(60));
  pid_t pid() const noexcept { return pid_; }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  std::string buffer_;
};

/// Path of the multi-process test worker binary.
std::string worker_path();

}  // namespace dlock::testing
