// Polling with a deadline, for conditions that only a server can report and that nothing
// announces to a client (replication links, cluster gossip, sentinel discovery).
#pragma once

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

namespace dlock::embedded {

class poller {
 public:
  explicit poller(std::chrono::milliseconds timeout)
      : deadline_(std::chrono::steady_clock::now() + timeout) {}
  /// Waits a little, backing off from quick checks (most conditions hold within milliseconds)
  /// to a gentle pace; false once the deadline has passed.
  bool again() {
    if (std::chrono::steady_clock::now() >= deadline_) return false;
    std::this_thread::sleep_for(pause_);
    pause_ = std::min(pause_ * 2, std::chrono::milliseconds(50));
    return true;
  }

 private:
  std::chrono::steady_clock::time_point deadline_;
  std::chrono::milliseconds pause_{2};
};

/// "250 ms": a poller's timeout as the error messages print it.
inline std::string ms(std::chrono::milliseconds d) {
  return std::to_string(d.count()) + " ms";
}

}  // namespace dlock::embedded
