// The local waiters on one lock name, in arrival order, and the bookkeeping of unlock messages
// around this client's own releases. Sans-io: it decides, the lock core acts (sends attempts,
// arms timers), so every rule here is unit-tested without a server.
//
// Only the waiters at the front attempt: one for a mutex, as many as the kind admits holders
// (a semaphore's permits, a read lock's readers). The rest wait for their turn, so waiters of
// one client on one name are served in arrival order without racing each other.
//
// Echo accounting: our own release publishes an unlock message that our own subscription also
// receives. Acting on it would send a useless attempt; ignoring every message would miss other
// clients' releases. While a release of ours is in flight, messages are held; when its reply
// says how many subscribers heard it, our own echo is told apart from the others.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace dlock::detail {

template <class Waiter>
class waiter_queue {
 public:
  /// `admits`: how many waiters may attempt at once (the kind's holders).
  explicit waiter_queue(std::size_t admits = 1) : admits_(std::max<std::size_t>(admits, 1)) {}

  void push(Waiter w) { waiters_.push_back(std::move(w)); }
  void remove(const Waiter& w) {
    waiters_.erase(std::remove(waiters_.begin(), waiters_.end(), w), waiters_.end());
  }
  bool empty() const noexcept { return waiters_.empty(); }
  std::size_t size() const noexcept { return waiters_.size(); }
  const Waiter& front() const { return waiters_.front(); }
  /// Copies of the first `n` admitted waiters (fewer if fewer wait).
  std::vector<Waiter> front_waiters(std::size_t n) const {
    const auto count = std::min({n, admits_, size()});
    return {waiters_.begin(), waiters_.begin() + static_cast<std::ptrdiff_t>(count)};
  }
  /// True if it is `w`'s turn: it is among the first `admits` waiters.
  bool admitted(const Waiter& w) const {
    const auto end = waiters_.begin() + static_cast<std::ptrdiff_t>(std::min(admits_, size()));
    return std::find(waiters_.begin(), end, w) != end;
  }
  /// The waiter that has just been admitted because the one before it left, if any.
  const Waiter* newly_admitted() const {
    return size() >= admits_ ? &waiters_[admits_ - 1] : nullptr;
  }

  // ---- the subscription the queue listens on ----
  std::uint64_t subscription = 0;  // 0 until a waiter has found the lock held
  bool confirmed = false;          // the server confirmed it
  // A lingering queue (lock_kind::lingers) stays, empty and subscribed, after its last waiter
  // left: since when, and whether a message came meanwhile that the next waiter must act on
  // (it may have been sent to it while its attempt's reply was still on the way).
  std::chrono::steady_clock::time_point idle_since{};
  bool unclaimed_message = false;
  // Whether our last release on this name reached other clients' subscriptions (assumed until
  // a release says otherwise): then the next local waiter lets them go first.
  bool others_waited = true;

  // ---- echo accounting ----

  /// What the queue knew as one of our releases began.
  struct release_note {
    bool tracked = false;    // messages are held until its reply
    bool confirmed = false;  // our subscription was live: its echo will come
    bool requested = false;  // our subscription was at least on its way: it may be counted
  };
  release_note release_started() {
    ++releases_in_flight_;
    return {true, confirmed, subscription != 0};
  }

  enum class message_action {
    hold,  // a release of ours is in flight: judged when its reply comes
    skip,  // the echo of our own release, already acted upon
    wake,  // someone else released: the front waiter tries
  };
  message_action message_arrived() {
    if (releases_in_flight_ > 0) {
      ++held_messages_;
      return message_action::hold;
    }
    if (own_messages_to_skip_ > 0) {
      --own_messages_to_skip_;
      return message_action::skip;
    }
    return message_action::wake;
  }

  enum class release_action {
    none,   // nothing to do
    wake,   // the front waiter tries now
    yield,  // another client was told the lock is free: the front waiter lets it go first
  };
  /// Our release's reply: `released` if the lock was freed, `others_waiting` if subscribers
  /// other than us heard the unlock message.
  release_action release_finished(const release_note& note, bool released, bool others_waiting) {
    int held = 0;
    if (note.tracked && releases_in_flight_ > 0 && --releases_in_flight_ == 0) {
      held = std::exchange(held_messages_, 0);
    }
    if (!released) return held > 0 ? release_action::wake : release_action::none;
    const int own_echo = note.confirmed ? 1 : 0;
    if (held < own_echo) own_messages_to_skip_ += own_echo - held;
    if (waiters_.empty()) return release_action::none;
    return others_waiting ? release_action::yield : release_action::wake;
  }

 private:
  std::deque<Waiter> waiters_;
  std::size_t admits_;
  int releases_in_flight_ = 0;
  int held_messages_ = 0;
  int own_messages_to_skip_ = 0;
};

/// Channels whose subscription we dropped a moment ago: an UNSUBSCRIBE takes a while to reach
/// the server, and a publish meanwhile still counts us among its receivers.
class recent_unsubscribes {
 public:
  using clock = std::chrono::steady_clock;
  static constexpr auto window = std::chrono::seconds(1);

  void note(const std::string& channel, clock::time_point now) {
    constexpr std::size_t sweep_above = 4096;  // names are unbounded; keep the table small
    if (at_.size() > sweep_above) {
      std::erase_if(at_, [&](const auto& kv) { return now - kv.second > window; });
    }
    at_[channel] = now;
  }
  bool maybe_subscribed(const std::string& channel, clock::time_point now) {
    auto it = at_.find(channel);
    if (it == at_.end()) return false;
    if (now - it->second > window) {
      at_.erase(it);
      return false;
    }
    return true;
  }

 private:
  std::unordered_map<std::string, clock::time_point> at_;
};

}  // namespace dlock::detail
