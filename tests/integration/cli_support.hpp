// Running the built dlock binary from tests: to completion, or in the background with its output
// read line by line.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "child_process.hpp"
#include "redis_fixture.hpp"

namespace dlock::testing {

struct outcome {
  int code;
  std::string output;  // stdout and stderr together
};

/// Runs the dlock binary to completion.
inline outcome dlock_cli(std::vector<std::string> args, std::vector<std::string> env = {}) {
  using namespace std::chrono_literals;
  args.insert(args.begin(), DLOCK_CLI);
  child_process p(args, {.capture_stdout = true, .merge_stderr = true, .env = std::move(env)});
  auto output = p.drain();
  return {p.wait(120s), std::move(output)};
}

inline std::size_t line_count(const std::string& s) {
  return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n'));
}

class Cli : public redis_test {
 protected:
  std::vector<std::string> run_args(std::vector<std::string> rest) {
    std::vector<std::string> a = {"--url", url(), "run"};
    a.insert(a.end(), rest.begin(), rest.end());
    return a;
  }
  /// A `dlock run` in the background whose output the test reads.
  child_process start(std::vector<std::string> rest) {
    auto a = run_args(std::move(rest));
    a.insert(a.begin(), DLOCK_CLI);
    return child_process(a, {.capture_stdout = true, .merge_stderr = true});
  }
};

}  // namespace dlock::testing
