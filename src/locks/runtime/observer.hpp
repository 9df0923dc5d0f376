// What a client tells the service around it (dlock/observe.hpp): events for on_event, lines for
// the logger, and the metrics. Events and log lines are built only when something will read
// them, and handed over on a thread of their own (callback_queue), so that a slow callback
// never holds up the I/O thread's renewals.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/callback_queue.hpp"
#include "dlock/client.hpp"
#include "locks/runtime/metrics_registry.hpp"
#include "net/notice.hpp"

namespace dlock::detail {

/// How much an event matters to an operator: the level the logger gets it at.
log_level severity(event_type t) noexcept;

class observer {
 public:
  explicit observer(const client_options& o);

  /// True if an event of type `t` would reach a callback: build it only then.
  bool wants(event_type t) const noexcept {
    return on_event_ || (logger_ && severity(t) >= min_level_);
  }
  /// Hands `e` to the callbacks (stamping its time); to on_event alone unless `log_it`. Any
  /// thread; never blocks on them.
  void emit(event e, bool log_it = true);
  /// True if on_event is set.
  bool has_event_callback() const noexcept { return static_cast<bool>(on_event_); }
  /// Hands `line` to the logger if it takes `level`. Any thread.
  void log(log_level level, std::string line);
  bool logs(log_level level) const noexcept { return logger_ && level >= min_level_; }
  /// Counts and passes on what a connection or topology reported (the I/O thread's notices).
  void on_notice(net::notice n);

  /// The metrics, or null with client_options::collect_metrics off.
  metrics_registry* metrics() noexcept { return metrics_.get(); }
  const metrics_registry* metrics() const noexcept { return metrics_.get(); }
  /// Adds the observer's own counters to `s`.
  void add_counters(client_stats& s) const noexcept;
  std::atomic<std::uint64_t> woken_without_message{0};
  /// True inside an event or log callback.
  bool in_callback() const noexcept { return queue_ && queue_->in_delivery_thread(); }

 private:
  struct item {
    std::optional<event> e;  // an event, or else a log line
    bool log_event = true;   // an event: the logger gets its line too
    log_level level = log_level::info;
    std::string line;
  };
  void deliver(item& i) const;

  const std::function<void(const event&)> on_event_;
  const std::function<void(log_level, std::string_view)> logger_;
  const log_level min_level_;
  std::unique_ptr<metrics_registry> metrics_;
  std::atomic<std::uint64_t> connection_losses_{0}, reconnects_{0};
  std::unique_ptr<callback_queue<item>> queue_;  // last: its thread calls deliver
};

/// `t` on the system clock, `t` being a steady-clock time: for times the client keeps on its
/// steady clock and reports to people.
std::chrono::system_clock::time_point to_system(std::chrono::steady_clock::time_point t);

}  // namespace dlock::detail
