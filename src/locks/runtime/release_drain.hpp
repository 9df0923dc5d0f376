// The releases a client has sent and not yet seen answered by every server they went to, and a
// closing client's wait for them (lock_core's destructor): a lease let go just before its client
// must not be left to expire on the server.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>

namespace dlock::detail {

class release_drain {
 public:
  /// Counts one release until the returned guard and all its copies are gone. The guard holds
  /// the drain, not the client: a RedLock master's late answer, or a callback dropped with the
  /// client's I/O thread, may let go of it while the client is being torn down.
  static std::shared_ptr<void> track(const std::shared_ptr<release_drain>& d) {
    d->in_flight_.fetch_add(1, std::memory_order_relaxed);
    return std::shared_ptr<void>(nullptr, [d](void*) { d->answered(); });
  }

  /// Waits, until `until` at the latest, for every tracked release. Not on the I/O thread,
  /// which delivers the answers.
  void wait_until(std::chrono::steady_clock::time_point until) noexcept {
    draining_.store(true);
    std::unique_lock lock(m_);
    drained_.wait_until(lock, until, [this] { return in_flight_.load() == 0; });
  }

 private:
  void answered() noexcept {
    if (in_flight_.fetch_sub(1) == 1 && draining_.load()) {
      std::lock_guard lock(m_);
      drained_.notify_all();
    }
  }

  std::atomic<int> in_flight_{0};
  std::atomic<bool> draining_{false};
  std::mutex m_;
  std::condition_variable drained_;
};

}  // namespace dlock::detail
