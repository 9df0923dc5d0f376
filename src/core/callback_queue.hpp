// Hands items to a user's callback on a thread of its own, in the order they were queued, so
// that the thread that queues them (the I/O thread, which renews every lease) never waits for
// the callback. The queue is bounded: an item beyond the limit is dropped and counted, never
// waited for. At close, what is queued is still delivered for a grace period, then dropped.
//
// Waking a sleeping thread for every item cost a client a quarter of its lock+unlock pairs per
// second on a 2-vCPU machine (an event per grant and per release). So the delivering thread,
// once it has had work, dozes: it looks for items every `poll_period` by itself for `linger`,
// while pushes do not wake it; only a thread that stayed idle past that sleeps for good and is
// woken by the next push. Under a stream of events that is one wake-up per poll period, not
// one per item, at the price of delivering them up to a poll period late.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <thread>
#include <utility>

#include "core/sync.hpp"

namespace dlock::detail {

template <class Item>
class callback_queue {
 public:
  /// Starts the delivering thread, which calls `deliver` with each item. `limit` >= 1.
  callback_queue(std::size_t limit, std::function<void(Item&)> deliver)
      : limit_(limit), deliver_(std::move(deliver)), thread_([this] { run(); }) {}

  /// Delivers what is queued for up to 2 s more, drops the rest, and joins the thread. Never
  /// on the delivering thread (it would join itself): the owner of a queue that a callback
  /// may let go of finishes its teardown elsewhere (in_delivery_thread tells).
  ~callback_queue() { close(std::chrono::seconds(2)); }
  callback_queue(const callback_queue&) = delete;
  callback_queue& operator=(const callback_queue&) = delete;

  /// Queues `item`, or drops and counts it if `limit` items wait already. Any thread; never
  /// blocks on the callback.
  void push(Item item) {
    {
      lock_guard lock(m_);
      if (closing_ || items_.size() >= limit_) {
        dropped_.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      items_.push_back(std::move(item));
      if (!idle_) return;  // busy or dozing: the thread finds it by itself
    }
    wake_.notify_one();
  }

  /// True when called from inside `deliver`.
  bool in_delivery_thread() const noexcept {
    return thread_.get_id() == std::this_thread::get_id();
  }

  std::uint64_t delivered() const noexcept { return delivered_.load(std::memory_order_relaxed); }
  std::uint64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }

 private:
  void close(std::chrono::steady_clock::duration grace) {
    {
      lock_guard lock(m_);
      closing_ = true;
      give_up_at_ = std::chrono::steady_clock::now() + grace;
    }
    wake_.notify_one();
    thread_.join();
  }

  void run() {
    using clock = std::chrono::steady_clock;
    unique_lock lock(m_);
    auto doze_until = clock::time_point{};
    for (;;) {
      if (items_.empty()) {
        if (closing_) return;
        if (clock::now() < doze_until) {
          wake_.wait_for(lock, poll_period);
        } else {
          idle_ = true;
          wake_.wait(lock);
          idle_ = false;
          doze_until = clock::now() + linger;
        }
        continue;
      }
      doze_until = clock::now() + linger;
      if (closing_ && std::chrono::steady_clock::now() >= give_up_at_) {
        dropped_.fetch_add(items_.size(), std::memory_order_relaxed);
        items_.clear();
        return;
      }
      Item item = std::move(items_.front());
      items_.pop_front();
      lock.unlock();
      deliver_(item);
      delivered_.fetch_add(1, std::memory_order_relaxed);
      lock.lock();
    }
  }

  static constexpr std::chrono::milliseconds poll_period{2};
  static constexpr std::chrono::milliseconds linger{50};

  const std::size_t limit_;
  const std::function<void(Item&)> deliver_;
  mutex m_;
  std::condition_variable_any wake_;
  std::deque<Item> items_ DLOCK_GUARDED_BY(m_);
  bool idle_ DLOCK_GUARDED_BY(m_) = false;
  bool closing_ DLOCK_GUARDED_BY(m_) = false;
  std::chrono::steady_clock::time_point give_up_at_ DLOCK_GUARDED_BY(m_){};
  std::atomic<std::uint64_t> delivered_{0}, dropped_{0};
  std::thread thread_;  // last: it starts once everything above is built
};

}  // namespace dlock::detail
