#include "locks/runtime/observer.hpp"

#include "core/user_callback.hpp"

namespace dlock::detail {

log_level severity(event_type t) noexcept {
  switch (t) {
    case event_type::acquired:
    case event_type::released:
      return log_level::debug;
    case event_type::reconnected:
    case event_type::slot_moved:
    case event_type::woken_without_message:
      return log_level::info;
    case event_type::release_failed:
    case event_type::renewal_failed:
    case event_type::grant_undone:
    case event_type::connection_lost:
    case event_type::master_switched:
      return log_level::warning;
    case event_type::lost:
      return log_level::error;
  }
  return log_level::warning;
}

observer::observer(const client_options& o)
    : on_event_(o.on_event), logger_(o.logger), min_level_(o.min_log_level) {
  if (o.collect_metrics) {
    metrics_ = std::make_unique<metrics_registry>(o.metric_prefix, o.metric_prefix_limit);
  }
  if (on_event_ || logger_) {
    queue_ = std::make_unique<callback_queue<item>>(o.event_queue_limit,
                                                    [this](item& i) { deliver(i); });
  }
}

void observer::emit(event e, bool log_it) {
  if (!queue_) return;
  e.at = std::chrono::system_clock::now();
  queue_->push({std::move(e), log_it, {}, {}});
}

void observer::log(log_level level, std::string line) {
  if (!queue_ || !logs(level)) return;
  queue_->push({std::nullopt, false, level, std::move(line)});
}

void observer::deliver(item& i) const {
  if (!i.e) {
    call_user(logger_, i.level, std::string_view(i.line));
    return;
  }
  call_user(on_event_, *i.e);
  const auto level = severity(i.e->type);
  if (i.log_event && logs(level)) {
    try {
      const auto line = describe(*i.e);
      call_user(logger_, level, std::string_view(line));
    } catch (...) {  // out of memory describing it: the event went out; the line does not
    }
  }
}

void observer::on_notice(net::notice n) {
  using kind = net::notice::kind;
  event e;
  switch (n.what) {
    case kind::connection_lost:
      connection_losses_.fetch_add(1, std::memory_order_relaxed);
      e.type = event_type::connection_lost;
      break;
    case kind::reconnected:
      reconnects_.fetch_add(1, std::memory_order_relaxed);
      e.type = event_type::reconnected;
      break;
    case kind::master_switched:
      e.type = event_type::master_switched;
      break;
    case kind::slot_moved:
      e.type = event_type::slot_moved;
      break;
  }
  if (!wants(e.type)) return;
  e.node = std::move(n.node);
  e.name = std::move(n.key);
  e.detail = std::move(n.detail);
  emit(std::move(e));
}

void observer::add_counters(client_stats& s) const noexcept {
  s.connection_losses = connection_losses_.load(std::memory_order_relaxed);
  s.reconnects = reconnects_.load(std::memory_order_relaxed);
  s.woken_without_message = woken_without_message.load(std::memory_order_relaxed);
  if (queue_) {
    s.events_delivered = queue_->delivered();
    s.events_dropped = queue_->dropped();
  }
}

std::chrono::system_clock::time_point to_system(std::chrono::steady_clock::time_point t) {
  const auto now = std::chrono::steady_clock::now();
  return std::chrono::time_point_cast<std::chrono::system_clock::duration>(
      std::chrono::system_clock::now() + (t - now));
}

}  // namespace dlock::detail
