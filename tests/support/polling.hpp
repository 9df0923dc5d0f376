// Checks of server state that can only be polled from outside (a key appearing, a counter
// moving), shared by the integration tests. Each is bounded: it fails the test rather than hang.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <sstream>
#include <string>
#include <thread>

#include "redis_fixture.hpp"

namespace dlock::testing {

/// Until `done` holds, or fails the test after `limit`.
template <class Check>
void wait_until(Check done, std::chrono::milliseconds limit = std::chrono::seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the condition never came true";
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

/// Calls of EVAL and EVALSHA the server has run (scripts' inner commands are not counted).
inline std::int64_t script_calls(raw_redis& raw) {
  std::istringstream info(raw({"INFO", "commandstats"}).str());
  std::int64_t total = 0;
  for (std::string line; std::getline(info, line);) {
    for (const char* name : {"evalsha", "eval"}) {
      const std::string prefix = std::string("cmdstat_") + name + ":calls=";
      if (line.rfind(prefix, 0) == 0) total += std::stoll(line.substr(prefix.size()));
    }
  }
  return total;
}

/// Read events the server has handled (INFO stats' total_reads_processed): commands that left a
/// client in one send are read in one event. The INFO asking counts itself.
inline std::int64_t reads_processed(raw_redis& raw) {
  std::istringstream info(raw({"INFO", "stats"}).str());
  for (std::string line; std::getline(info, line);) {
    if (line.rfind("total_reads_processed:", 0) == 0) return std::stoll(line.substr(22));
  }
  ADD_FAILURE() << "no total_reads_processed in INFO stats";
  return 0;
}

}  // namespace dlock::testing
