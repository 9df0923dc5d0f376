// dlock/observe.hpp: events as text, and metrics in Prometheus's text exposition format.
#include "dlock/observe.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <functional>
#include <span>

#include "core/utf8.hpp"

namespace dlock {

std::string_view to_string(event_type t) noexcept {
  switch (t) {
    case event_type::acquired:
      return "acquired";
    case event_type::released:
      return "released";
    case event_type::release_failed:
      return "release_failed";
    case event_type::lost:
      return "lost";
    case event_type::renewal_failed:
      return "renewal_failed";
    case event_type::grant_undone:
      return "grant_undone";
    case event_type::connection_lost:
      return "connection_lost";
    case event_type::reconnected:
      return "reconnected";
    case event_type::master_switched:
      return "master_switched";
    case event_type::slot_moved:
      return "slot_moved";
    case event_type::woken_without_message:
      return "woken_without_message";
  }
  return "unknown";
}

std::string_view to_string(log_level l) noexcept {
  switch (l) {
    case log_level::debug:
      return "debug";
    case log_level::info:
      return "info";
    case log_level::warning:
      return "warning";
    case log_level::error:
      return "error";
  }
  return "unknown";
}

namespace {

std::string seconds_text(std::chrono::microseconds d) {
  char buf[32];
  const double s = static_cast<double>(d.count()) / 1e6;
  std::snprintf(buf, sizeof buf, s < 1 ? "%.1f ms" : "%.1f s", s < 1 ? s * 1e3 : s);
  return buf;
}

// A name as it reads in a log line: quoted, its control characters and bytes that are not UTF-8
// escaped, so that a name cannot forge a line of its own.
std::string quoted(std::string_view name) {
  std::string out = "'";
  for (std::size_t i = 0; i < name.size();) {
    const auto n = detail::utf8_sequence(name, i);
    const auto b = static_cast<unsigned char>(name[i]);
    if (n == 0 || b < 0x20 || b == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", b);
      out += buf;
      ++i;
    } else {
      out.append(name.substr(i, n));
      i += n;
    }
  }
  return out + "'";
}

std::string with_detail(std::string line, const std::string& detail) {
  if (!detail.empty()) line.append(": ").append(detail);
  return line;
}

}  // namespace

std::string describe(const event& e) {
  // "reentrant lock 'a'", "leased semaphore 'b'".
  std::string lock(e.kind);
  std::replace(lock.begin(), lock.end(), '_', ' ');
  if (!lock.ends_with("semaphore")) lock += " lock";
  lock.append(" ").append(quoted(e.name));
  switch (e.type) {
    case event_type::acquired:
      return lock + " acquired after " + seconds_text(e.waited) + ", fence " +
             std::to_string(e.fence) + ", owner " + e.owner;
    case event_type::released:
      return lock + " released after " + seconds_text(e.held);
    case event_type::release_failed:
      return with_detail(lock + " release not confirmed after " + seconds_text(e.held), e.detail);
    case event_type::lost:
      return with_detail(
          lock + " LOST (" +
              (e.lost_reason == lease_lost_reason::not_held ? "not held" : "expired") + ") after " +
              seconds_text(e.held),
          e.detail);
    case event_type::renewal_failed: {
      const auto left = std::chrono::duration_cast<std::chrono::microseconds>(e.valid_until - e.at);
      return with_detail(lock + " renewal failed, lease valid for " + seconds_text(left) + " more",
                         e.detail);
    }
    case event_type::grant_undone:
      return lock + " grant undone (" +
             (e.undone_because == undo_cause::not_replicated
                  ? "too few replicas acknowledged it"
                  : "its reply came after its validity ran out") +
             "); waiting on";
    case event_type::connection_lost:
      return with_detail("connection to " + e.node + " lost", e.detail);
    case event_type::reconnected:
      return "reconnected to " + e.node;
    case event_type::master_switched:
      return with_detail("master switched to " + e.node, e.detail);
    case event_type::slot_moved:
      return "slot of " + quoted(e.name) + " moved to " + e.node;
    case event_type::woken_without_message:
      return lock + " found free by a re-check, no unlock message heard";
  }
  return std::string(to_string(e.type));
}

namespace {

// Writes Prometheus's text format (exposition format 0.0.4), one family at a time.
class exposition {
 public:
  explicit exposition(std::ostream& out) : out_(out) {}

  void family(std::string_view name, std::string_view type, std::string_view help) {
    out_ << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
  }
  void sample(std::string_view name, std::string_view labels, double value) {
    out_ << name;
    if (!labels.empty()) out_ << '{' << labels << '}';
    out_ << ' ' << number(value) << '\n';
  }
  void counter(std::string_view name, std::string_view help, std::uint64_t value) {
    family(name, "counter", help);
    sample(name, {}, static_cast<double>(value));
  }
  void histogram(std::string_view name, std::string labels, const histogram_snapshot& h) {
    const std::string bucket = std::string(name) + "_bucket";
    const std::string before_le = labels.empty() ? std::string() : labels + ',';
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < h.counts.size(); ++i) {
      cumulative += h.counts[i];
      const auto le = i < h.upper_bounds.size() ? number(h.upper_bounds[i]) : "+Inf";
      sample(bucket, before_le + "le=\"" + le + '"', static_cast<double>(cumulative));
    }
    sample(std::string(name) + "_sum", labels, h.sum_seconds);
    sample(std::string(name) + "_count", labels, static_cast<double>(cumulative));
  }

  /// `key="value"` with the value escaped as the format asks and made valid UTF-8.
  static std::string label(std::string_view key, std::string_view value) {
    std::string out(key);
    out += "=\"";
    for (std::size_t i = 0; i < value.size();) {
      const auto n = detail::utf8_sequence(value, i);
      const char c = value[i];
      if (n == 0) {
        out += "\xEF\xBF\xBD";  // U+FFFD
        ++i;
        continue;
      }
      if (c == '\\') {
        out += "\\\\";
      } else if (c == '"') {
        out += "\\\"";
      } else if (c == '\n') {
        out += "\\n";
      } else {
        out.append(value.substr(i, n));
      }
      i += n;
    }
    return out + '"';
  }

 private:
  static std::string number(double v) {
    char buf[400];  // the longest fixed form of a double
    // Fixed notation, as Prometheus's own clients write bucket bounds ("0.0001", not "1e-04").
    const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
    return std::string(buf, r.ptr);
  }
  std::ostream& out_;
};

std::string kind_and_prefix(const lock_metrics& l) {
  return exposition::label("kind", l.kind) + ',' + exposition::label("prefix", l.prefix);
}

// One family over every lock series, a counter per series and label value.
void lock_counter(exposition& x, const metrics_snapshot& m, std::string_view name,
                  std::string_view help, std::string_view label,
                  std::span<const std::pair<std::string_view, std::uint64_t lock_metrics::*>> of) {
  if (m.locks.empty()) return;
  x.family(name, "counter", help);
  for (const auto& l : m.locks) {
    for (const auto& [value, field] : of) {
      auto labels = kind_and_prefix(l);
      if (!label.empty()) labels += ',' + exposition::label(label, value);
      x.sample(name, labels, static_cast<double>(l.*field));
    }
  }
}

void write_locks(exposition& x, const metrics_snapshot& m) {
  using field = std::pair<std::string_view, std::uint64_t lock_metrics::*>;
  const field outcomes[] = {{"granted", &lock_metrics::granted},
                            {"not_acquired", &lock_metrics::not_acquired},
                            {"cancelled", &lock_metrics::cancelled},
                            {"failed", &lock_metrics::failed}};
  lock_counter(x, m, "dlock_acquisitions_total",
               "Acquisitions by lock kind, name prefix and how they ended.", "outcome", outcomes);
  const field released[] = {{"", &lock_metrics::released}};
  lock_counter(x, m, "dlock_holds_released_total",
               "Holds released (confirmed by the server or not), by lock kind and name prefix.", "",
               released);
  const field lost[] = {{"expired", &lock_metrics::lost_expired},
                        {"not_held", &lock_metrics::lost_not_held}};
  lock_counter(x, m, "dlock_holds_lost_total",
               "Holds lost before their release, by lock kind, name prefix and reason.", "reason",
               lost);
  if (m.locks.empty()) return;
  x.family("dlock_acquire_wait_seconds", "histogram",
           "Time from the call to the grant, for granted acquisitions.");
  for (const auto& l : m.locks)
    x.histogram("dlock_acquire_wait_seconds", kind_and_prefix(l), l.wait);
  x.family("dlock_hold_seconds", "histogram",
           "Time from the grant to the release or loss, per hold.");
  for (const auto& l : m.locks)
    x.histogram("dlock_hold_seconds", kind_and_prefix(l), l.hold);
}

void write_counters(exposition& x, const client_stats& s) {
  const std::pair<std::string_view, std::string_view> help[] = {
      {"dlock_grants_total", "Grants handed out, re-entries included."},
      {"dlock_attempts_total", "Acquire scripts sent."},
      {"dlock_releases_total", "Holds released."},
      {"dlock_release_failures_total", "Releases the server did not confirm."},
      {"dlock_leases_lost_total", "Leases lost before their release."},
      {"dlock_renewal_rounds_total", "Watchdog rounds that renewed at least one lease."},
      {"dlock_renewal_calls_total", "Renewal scripts sent."},
      {"dlock_leases_renewed_total", "Lease renewals that succeeded."},
      {"dlock_unlock_messages_total", "Unlock messages heard by waiters."},
      {"dlock_grants_born_dead_total", "Grants undone because their reply came too late."},
      {"dlock_not_replicated_total", "Writes fewer replicas acknowledged than asked."},
      {"dlock_slot_map_refreshes_total", "Cluster slot maps fetched."},
      {"dlock_master_switches_total", "Sentinel master changes followed."},
      {"dlock_redlock_misses_total", "RedLock attempts no majority granted."},
      {"dlock_redlock_late_answers_total", "RedLock answers after their round was decided."},
      {"dlock_redlock_fence_raises_total", "RedLock fence write-backs sent."},
      {"dlock_connection_losses_total", "Connections that dropped."},
      {"dlock_reconnects_total", "Connections back after a drop."},
      {"dlock_woken_without_message_total",
       "Waiters that found the lock free on a re-check, without an unlock message."},
      {"dlock_events_delivered_total", "Events and log lines handed to their callbacks."},
      {"dlock_events_dropped_total", "Events and log lines dropped: the queue was full."},
  };
  const std::uint64_t values[] = {s.grants,
                                  s.attempts,
                                  s.releases,
                                  s.release_failures,
                                  s.leases_lost,
                                  s.renewal_rounds,
                                  s.renewal_calls,
                                  s.leases_renewed,
                                  s.unlock_messages,
                                  s.grants_born_dead,
                                  s.not_replicated,
                                  s.slot_map_refreshes,
                                  s.master_switches,
                                  s.redlock_misses,
                                  s.redlock_late_answers,
                                  s.redlock_fence_raises,
                                  s.connection_losses,
                                  s.reconnects,
                                  s.woken_without_message,
                                  s.events_delivered,
                                  s.events_dropped};
  static_assert(std::size(help) == std::size(values));
  for (std::size_t i = 0; i < std::size(values); ++i)
    x.counter(help[i].first, help[i].second, values[i]);
  x.family("dlock_redirects_total", "counter", "Cluster redirects followed, by type.");
  x.sample("dlock_redirects_total", "type=\"moved\"", static_cast<double>(s.moved_redirects));
  x.sample("dlock_redirects_total", "type=\"ask\"", static_cast<double>(s.ask_redirects));
  x.family("dlock_watched_leases", "gauge", "Leases the watchdog renews now.");
  x.sample("dlock_watched_leases", {}, static_cast<double>(s.watched_leases));
}

}  // namespace

void write_prometheus(const metrics_snapshot& m, std::ostream& out) {
  exposition x(out);
  write_locks(x, m);
  if (!m.round_trips.empty()) {
    x.family("dlock_round_trip_seconds", "histogram",
             "Script round trips, from the send to the reply, by command kind.");
    for (const auto& r : m.round_trips)
      x.histogram("dlock_round_trip_seconds", exposition::label("command", r.command), r.seconds);
    x.family("dlock_renewal_lag_seconds", "histogram",
             "How late each watchdog round started behind its schedule.");
    x.histogram("dlock_renewal_lag_seconds", {}, m.renewal_lag);
  }
  write_counters(x, m.counters);
}

}  // namespace dlock
