// Child processes for multi-process tests: the embedded runner's, with stdout captured.
#pragma once

#include <string>

#include "embedded/process.hpp"

namespace dlock::testing {

using embedded::child_process;

/// Spawn options for a child whose output the test reads line by line.
inline const embedded::spawn_options captured{.capture_stdout = true};

/// Path of the multi-process test worker binary.
std::string worker_path();

/// Path of the synchronizers' multi-process test worker (tests/worker/sync_worker.cpp).
std::string sync_worker_path();

}  // namespace dlock::testing
