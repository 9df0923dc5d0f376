// What the lock core tells its observer (observer.hpp): the events of grants, releases, losses,
// failed renewals and re-checks, the log lines of failed acquisitions, and the metrics of how
// each ended. Nothing here decides anything; it only reports.
#include "dlock/error.hpp"
#include "locks/runtime/core_state.hpp"

namespace dlock::detail {

namespace {
std::chrono::microseconds micros(steady::duration d) {
  return std::chrono::duration_cast<std::chrono::microseconds>(d);
}
event lock_event(event_type t, const grant& g) {
  event e;
  e.type = t;
  e.name = g.names->name;
  e.kind = metric_kind(g.kind);
  e.owner = g.owner;
  return e;
}

event request_event(event_type t, const acquire_request& r) {
  event e;
  e.type = t;
  e.name = r.names->name;
  e.kind = metric_kind(*r.kind);
  e.owner = r.owner;
  return e;
}
}  // namespace

void lock_core::note_grant(const acquire_request& r, std::uint64_t fence, steady::time_point now) {
  if (r.series) {
    r.series->granted.fetch_add(1, std::memory_order_relaxed);
    r.series->wait.observe(now - r.started_at);
  }
  if (!observer_.wants(event_type::acquired)) return;
  auto e = request_event(event_type::acquired, r);
  e.fence = fence;
  e.waited = micros(now - r.started_at);
  observer_.emit(std::move(e));
}

void lock_core::note_undone(const acquire_request& r, undo_cause why) {
  if (!observer_.wants(event_type::grant_undone)) return;
  auto e = request_event(event_type::grant_undone, r);
  e.undone_because = why;
  observer_.emit(std::move(e));
}

void lock_core::note_not_granted(const acquire_request& r, std::error_code ec,
                                 const std::string& message) {
  if (r.series) {
    auto& counter = !ec                     ? r.series->not_acquired
                    : ec == errc::cancelled ? r.series->cancelled
                                            : r.series->failed;
    counter.fetch_add(1, std::memory_order_relaxed);
  }
  // A caller's own cancel, or its client closing, is nothing an operator needs to read about.
  if (!ec || ec == errc::cancelled || ec == errc::client_closed) return;
  if (observer_.logs(log_level::error)) observer_.log(log_level::error, message);
}

void lock_core::note_release(const grant& g, steady::time_point since, std::error_code ec,
                             const reply& r) {
  const auto now = steady::now();
  if (g.series) {
    g.series->released.fetch_add(1, std::memory_order_relaxed);
    g.series->hold.observe(now - since);
  }
  const bool confirmed = !ec && r.is_integer();
  const auto type = confirmed ? event_type::released : event_type::release_failed;
  if (!observer_.wants(type)) return;
  auto e = lock_event(type, g);
  e.held = micros(now - since);
  if (ec) {
    e.detail = r.is_error() ? r.str() : ec.message();
  } else if (!confirmed) {
    e.detail = "no longer held by this owner when the release arrived";
  }
  observer_.emit(std::move(e));
}

void lock_core::note_loss(const grant& g, lease_lost_reason why) {
  const auto now = steady::now();
  if (g.series) {
    auto& counter =
        why == lease_lost_reason::expired ? g.series->lost_expired : g.series->lost_not_held;
    counter.fetch_add(1, std::memory_order_relaxed);
    g.series->hold.observe(now - g.granted_at);
  }
  if (!observer_.wants(event_type::lost)) return;
  auto e = lock_event(event_type::lost, g);
  e.held = micros(now - g.granted_at);
  e.lost_reason = why;
  e.detail = why == lease_lost_reason::expired
                 ? "no renewal succeeded before the lease's validity ran out (server unreachable "
                   "or too slow, or this process paused)"
                 : "a renewal found the lock no longer held by this owner (it expired and was "
                   "taken, or was deleted or force-unlocked)";
  observer_.emit(std::move(e));
}

// An event per lease, but one log line per batch: a server that stops answering fails every
// lease's renewal at once, and a client may hold thousands.
void lock_core::note_renewal_failure(const std::vector<std::shared_ptr<grant>>& grants,
                                     const std::string& why) {
  const bool events = observer_.has_event_callback();
  const bool log = observer_.logs(severity(event_type::renewal_failed));
  if (!events && !log) return;
  const auto now = steady::now();
  std::optional<event> first;
  std::size_t valid = 0;
  for (const auto& g : grants) {
    if (!grants_.valid(*g, now)) continue;  // the expiry check reports it lost
    auto e = lock_event(event_type::renewal_failed, *g);
    e.valid_until = to_system(grants_.valid_until(*g));
    e.held = micros(now - g->granted_at);
    e.detail = why;
    if (++valid == 1 && log) first = e;
    if (events) observer_.emit(std::move(e), false);
  }
  if (!first) return;
  first->at = std::chrono::system_clock::now();
  auto line = describe(*first);
  if (valid > 1) line += " (and " + std::to_string(valid - 1) + " more leases in the same batch)";
  observer_.log(severity(event_type::renewal_failed), std::move(line));
}

void lock_core::note_woken_without_message(const acquire_request& r) {
  observer_.woken_without_message.fetch_add(1, std::memory_order_relaxed);
  if (!observer_.wants(event_type::woken_without_message)) return;
  observer_.emit(request_event(event_type::woken_without_message, r));
}

}  // namespace dlock::detail
