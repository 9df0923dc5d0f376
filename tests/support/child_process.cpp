#include "child_process.hpp"

namespace dlock::testing {

std::string worker_path() {
  return DLOCK_TEST_WORKER;
}

}  // namespace dlock::testing
