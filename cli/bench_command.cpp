// dlock bench: dlock's locks beside references measured in the same run. The work is the
// scenario library's run_bench (bench/bench_run.hpp), shared with dlock_lock_bench; this file
// maps the command's options and failures and draws the progress line.
#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>

#include "bench_run.hpp"
#include "cli.hpp"
#include "embedded/redis_server.hpp"

namespace dlock::cli {
namespace {

// Progress on stderr: on a terminal, one line rewritten in place and erased before the results
// are printed; otherwise (a log, a pipe) one line per step.
class progress_line {
 public:
  progress_line()
      : tty_(::isatty(STDERR_FILENO) == 1), started_(std::chrono::steady_clock::now()) {}
  ~progress_line() { clear(); }
  progress_line(const progress_line&) = delete;
  progress_line& operator=(const progress_line&) = delete;

  void show(std::string_view message) {
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    char prefix[48];
    std::snprintf(prefix, sizeof prefix, "dlock bench %5.1f s  ", elapsed);
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
  bool tty_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace

int bench(const bench_args& args) {
  bench::bench_run_options o;
  o.scenarios = args.scenarios;
  o.url = args.url;
  o.seconds = args.seconds;
  o.rounds = 0;  // from --seconds: one interleaved slice per 0.25 s, 1 to 6
  o.json = args.json;
  o.plot_dir = args.plot_dir;

  progress_line line;  // erased on the way out, whatever happens
  std::ostringstream results;
  try {
    bench::run_bench(
        o, results, [&](std::string_view m) { line.show(m); },
        [&](std::string_view m) { line.warn(m); });
  } catch (const bench::bench_usage_error& e) {
    throw failure(exit_usage, std::string("bench: ") + e.what());
  } catch (const bench::missing_program& e) {
    throw failure(exit_unavailable, std::string("bench: ") + e.what());
  } catch (const embedded::server_error& e) {
    throw failure(exit_unavailable, std::string("bench: ") + e.what());
  }
  line.clear();
  std::cout << results.str() << std::flush;
  return exit_ok;
}

}  // namespace dlock::cli
