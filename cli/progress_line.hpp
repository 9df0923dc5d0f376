// Progress of a long command on stderr: on a terminal, one line rewritten in place and erased
// before the results are printed; otherwise (a log, a pipe) one line per step.
#pragma once

#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <string_view>

namespace dlock::cli {

class progress_line {
 public:
  explicit progress_line(std::string label)
      : label_(std::move(label)),
        tty_(::isatty(STDERR_FILENO) == 1),
        started_(std::chrono::steady_clock::now()) {}
  ~progress_line() { clear(); }
  progress_line(const progress_line&) = delete;
  progress_line& operator=(const progress_line&) = delete;

  void show(std::string_view message) {
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    char prefix[64];
    std::snprintf(prefix, sizeof prefix, "%s %5.1f s  ", label_.c_str(), elapsed);
    std::string line = prefix;
    line += message;
    if (!tty_) {
      std::cerr << line << '\n';
      return;
    }
    // A line longer than the terminal would wrap, and \r would then rewrite only its tail.
    winsize ws{};
    const std::size_t width =
        ::ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1 ? ws.ws_col - 1 : 79;
    if (line.size() > width) line.resize(width);
    std::cerr << "\r\033[K" << line << std::flush;
    shown_ = true;
  }

  void warn(std::string_view message) {
    clear();
    std::cerr << "dlock: warning: " << message << '\n';
  }

  void clear() {
    if (!shown_) return;
    std::cerr << "\r\033[K" << std::flush;
    shown_ = false;
  }

 private:
  std::string label_;
  bool tty_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace dlock::cli
