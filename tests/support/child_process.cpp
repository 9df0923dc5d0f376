#include "child_process.hpp"

namespace dlock::testing {

std::string worker_path() {
  return DLOCK_TEST_WORKER;
}

std::string sync_worker_path() {
  return DLOCK_TEST_SYNC_WORKER;
}

}  // namespace dlock::testing
