// The state behind `dlock watch`: snapshots of names, what is derived between them, and the
// events found by diffing two snapshots of one name.
#include "watch_model.hpp"

#include <fnmatch.h>

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "display.hpp"

namespace dlock::cli {
namespace {

using std::chrono::milliseconds;

// A lease this close to its end when its holder vanished without an unlock message ran out.
constexpr milliseconds expiry_margin{300};
constexpr auto rate_window = std::chrono::seconds(10);

// One holder of a snapshot: its owner (a permit's id for a leased semaphore) and who it is.
struct holder_ref {
  std::string owner;
  std::optional<holder_identity> identity;
};

std::vector<holder_ref> holders_of(const shown& s) {
  std::vector<holder_ref> out;
  if (s.kind == "leased-semaphore" && s.permits) {
    for (const auto& [id, ttl] : s.permits->leased) {
      holder_ref h{id, std::nullopt};
      for (const auto& [grant, who] : s.permits->holders) {
        if (grant == id) h.identity = who;
      }
      out.push_back(std::move(h));
    }
    return out;
  }
  if (!locked(s)) return out;
  for (const auto& h : s.info.holders)
    out.push_back({h.owner, h.identity});
  return out;
}

nlohmann::json holder_json(const holder_ref& h) {
  nlohmann::json out = h.identity ? identity_json(*h.identity) : nlohmann::json::object();
  set_text(out, "owner", h.owner);
  return out;
}

std::string key_of(const std::vector<holder_ref>& hs) {
  std::string key;
  for (const auto& h : hs)
    key.append(h.owner).push_back('\n');
  return key;
}

bool has_owner(const std::vector<holder_ref>& hs, const std::string& owner) {
  return std::any_of(hs.begin(), hs.end(), [&](const holder_ref& h) { return h.owner == owner; });
}

std::string iso_ms(wall_time t) {
  const auto ms = std::chrono::duration_cast<milliseconds>(t.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm utc{};
  ::gmtime_r(&secs, &utc);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &utc);
  char out[56];
  std::snprintf(out, sizeof out, "%s.%03lldZ", buf, static_cast<long long>(ms % 1000));
  return out;
}

// The holder column: host:pid and the command when the holder recorded who it is, else the
// owner; semaphores show permits in use.
std::string holder_cell(const shown& s) {
  if (s.kind == "leased-semaphore" && s.permits) {
    const auto used = static_cast<std::int64_t>(s.permits->leased.size());
    return std::to_string(used) + "/" + std::to_string(used + s.permits->available) + " used";
  }
  if (s.count) return std::string("count ").append(std::to_string(*s.count));
  const auto hs = holders_of(s);
  if (hs.empty()) return "-";
  const auto& h = hs.front();
  std::string out = h.identity ? escaped(h.identity->host) + ":" + std::to_string(h.identity->pid) +
                                     " " + escaped(h.identity->label)
                               : escaped(h.owner);
  if (!s.mode.empty()) out = std::string(s.mode).append(" ").append(out);
  if (hs.size() > 1) out.append(" +").append(std::to_string(hs.size() - 1));
  return out;
}

std::string kind_cell(const shown& s) {
  if (s.kind == "leased-semaphore") return "semaphore";
  if (s.kind == "semaphore-or-latch") return "sem/latch";
  if (s.info.type == lock_type::other && !s.permits) return "not a lock";
  return s.kind;
}

}  // namespace

const char* sort_label(watch_sort s) {
  switch (s) {
    case watch_sort::name:
      return "name";
    case watch_sort::held_for:
      return "held";
    case watch_sort::waiters:
      return "waiters";
  }
  return "?";
}

nlohmann::json event_json(const watch_event& e) {
  nlohmann::json out{{"event", e.type},    {"kind", e.kind},   {"time", iso_ms(e.time)},
                     {"holder", e.holder}, {"fence", e.fence}, {"waiters", e.waiters}};
  set_text(out, "name", e.name);
  if (!e.previous.is_null()) out["previous"] = e.previous;
  return out;
}

std::vector<watch_event> watch_model::update(const std::string& name, shown s, steady_time now,
                                             wall_time wall, bool baseline) {
  const auto inserted = entries_.try_emplace(name);
  const bool fresh = inserted.second;  // a plain bool: clang 14 cannot capture a binding
  auto& e = inserted.first->second;
  const auto before = fresh ? std::vector<holder_ref>{} : holders_of(e.s);
  const auto after = holders_of(s);
  const auto old_ttl = fresh ? std::nullopt : ttl_now(e, now);
  const auto old_waiters = fresh ? std::int64_t{0} : e.s.info.waiters;
  std::vector<watch_event> out;
  const auto event = [&](const char* type, nlohmann::json holder) {
    // A name gone free keeps the kind it had in its events.
    const auto& kind = fresh || s.kind != "free" ? s.kind : e.s.kind;
    watch_event ev{type,    name,         kind,          wall, std::move(holder),
                   nullptr, s.info.fence, s.info.waiters};
    out.push_back(std::move(ev));
    return &out.back();
  };
  if (!baseline) {
    std::vector<const holder_ref*> left, joined;
    for (const auto& h : before) {
      if (!has_owner(after, h.owner)) left.push_back(&h);
    }
    for (const auto& h : after) {
      if (!has_owner(before, h.owner)) joined.push_back(&h);
    }
    // One holder replaced by another between two snapshots is one hand-off.
    if (left.size() == 1 && joined.size() == 1 && after.size() == 1) {
      event("handoff", holder_json(*joined.front()))->previous = holder_json(*left.front());
    } else {
      const bool ran_out = e.expiry_at > e.read_at || (old_ttl && *old_ttl <= expiry_margin);
      const char* gone = e.unlock_at > e.read_at ? "released"
                         : ran_out               ? "expired"
                         : releases_heard_       ? "lost"
                                                 : "ended";
      for (const auto* h : left)
        event(gone, holder_json(*h));
      for (const auto* h : joined)
        event("acquired", holder_json(*h));
    }
    if (s.info.waiters > old_waiters) event("waiter_joined", nullptr);
    if (s.info.waiters < old_waiters) event("waiter_left", nullptr);
    for (auto& ev : out) {
      if (ev.holder.is_null() && !after.empty()) ev.holder = holder_json(after.front());
    }
  }
  const auto key = key_of(after);
  if (fresh || key != e.holders_key) {
    e.held_seen = after.empty() ? std::nullopt : std::optional<wall_time>(wall);
    e.holders_key = key;
  }
  if (e.fences.empty() || e.fences.back().second != s.info.fence)
    e.fences.emplace_back(now, s.info.fence);
  while (e.fences.size() > 1 && e.fences[1].first <= now - rate_window)
    e.fences.pop_front();
  e.s = std::move(s);
  e.read_at = now;
  return out;
}

void watch_model::note_unlock(const std::string& name, steady_time now) {
  if (auto it = entries_.find(name); it != entries_.end()) it->second.unlock_at = now;
}

void watch_model::note_expiry(const std::string& name, steady_time now) {
  if (auto it = entries_.find(name); it != entries_.end()) it->second.expiry_at = now;
}

std::vector<std::string> watch_model::names() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& [name, e] : entries_)
    out.push_back(name);
  return out;
}

bool watch_model::visible(const watch_entry& e) const {
  return all_ || in_use(e.s);
}

std::size_t watch_model::shown_count() const {
  return static_cast<std::size_t>(std::count_if(
      entries_.begin(), entries_.end(), [&](const auto& kv) { return visible(kv.second); }));
}

watch_row watch_model::row_of(const std::string& name, const watch_entry& e, steady_time now,
                              wall_time wall) const {
  watch_row r;
  r.name = escaped(name);
  r.kind = kind_cell(e.s);
  r.holder = holder_cell(e.s);
  std::optional<wall_time> since = e.held_seen;
  for (const auto& h : holders_of(e.s)) {
    if (h.identity && h.identity->since.time_since_epoch().count() != 0) {
      since = h.identity->since;
      break;
    }
  }
  std::optional<milliseconds> held;
  if (since)
    held = std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(wall - *since));
  r.held_for = held.value_or(milliseconds(0));
  r.held = held_text(held);
  r.ttl = ttl_text(ttl_now(e, now));
  r.waiting = e.s.info.waiters;
  r.waiters = std::to_string(e.s.info.waiters);
  r.fence = std::to_string(e.s.info.fence);
  char rate[32];
  std::snprintf(rate, sizeof rate, "%.1f", handoffs_per_second(e, now));
  r.handoffs = rate;
  return r;
}

std::vector<watch_row> watch_model::rows(const std::string& filter, watch_sort sort,
                                         steady_time now, wall_time wall) const {
  std::vector<watch_row> out;
  for (const auto& [name, e] : entries_) {
    if (!visible(e)) continue;
    if (!filter.empty() && ::fnmatch(filter.c_str(), name.c_str(), 0) != 0) continue;
    out.push_back(row_of(name, e, now, wall));
  }
  // Rows come in name order from the map; a stable sort keeps it among equals.
  if (sort == watch_sort::held_for) {
    std::stable_sort(out.begin(), out.end(), [](const watch_row& a, const watch_row& b) {
      return a.held_for > b.held_for;
    });
  } else if (sort == watch_sort::waiters) {
    std::stable_sort(out.begin(), out.end(),
                     [](const watch_row& a, const watch_row& b) { return a.waiting > b.waiting; });
  }
  return out;
}

std::optional<milliseconds> ttl_now(const watch_entry& e, steady_time now) {
  auto ttl = e.s.info.ttl;
  // A leased semaphore's count never expires; its permits do: the first to run out counts.
  if (e.s.kind == "leased-semaphore" && e.s.permits) {
    ttl.reset();
    for (const auto& [id, left] : e.s.permits->leased)
      ttl = ttl ? std::min(*ttl, left) : left;
  }
  if (!ttl || *ttl == milliseconds::max()) return ttl;
  const auto left = *ttl - std::chrono::duration_cast<milliseconds>(now - e.read_at);
  return std::max(milliseconds(0), left);
}

double handoffs_per_second(const watch_entry& e, steady_time now) {
  // Fences are not consecutive (a grant may take a token far above the last), so what counts is
  // how often the fence rose, not by how much: grants between two reads count once.
  std::size_t rises = 0;
  for (std::size_t i = 1; i < e.fences.size(); ++i) {
    if (e.fences[i].first > now - rate_window) ++rises;
  }
  const std::chrono::duration<double> watched = now - e.fences.front().first;
  return static_cast<double>(rises) / std::clamp(watched.count(), 1.0, 10.0);
}

std::string held_text(std::optional<milliseconds> held) {
  if (!held) return "-";
  const auto s = held->count() / 1000;
  char buf[40];
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(s));
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60));
  }
  return buf;
}

namespace {

// `rest` is what follows a derived key's "prefix:": "{NAME}" (maybe followed by ":more", as a
// fair waiter's channel is), or a NAME that holds a '{'.
std::vector<std::string> names_after_prefix(std::string_view rest) {
  std::vector<std::string> out;
  if (rest.size() > 2 && rest.front() == '{') {
    const auto close = rest.find('}');
    const auto inner = rest.substr(1, close == std::string_view::npos ? 0 : close - 1);
    if (close != std::string_view::npos && !inner.empty() &&
        inner.find('{') == std::string_view::npos) {
      out.emplace_back(inner);
    }
  }
  if (rest.find('{') != std::string_view::npos) out.emplace_back(rest);
  return out;
}

std::vector<std::string> strip_prefixes(std::string_view s,
                                        std::initializer_list<std::string_view> prefixes) {
  for (const auto p : prefixes) {
    if (s.starts_with(p)) return names_after_prefix(s.substr(p.size()));
  }
  return {};
}

}  // namespace

std::vector<std::string> names_of_channel(std::string_view channel) {
  return strip_prefixes(channel, {"redisson_lock__channel:", "redisson_rwlock:", "redisson_sc:",
                                  "redisson_countdownlatch__channel__"});
}

std::vector<std::string> names_of_key(std::string_view key) {
  auto out = strip_prefixes(
      key,
      {"redisson_lock_token:", "dlock_holder:", "redisson_lock_queue:", "redisson_lock_timeout:"});
  // A leased semaphore's permits: `{NAME}:timeout`.
  if (out.empty() && key.starts_with("{") && key.ends_with("}:timeout")) {
    out = names_after_prefix(key.substr(0, key.size() - 8));
  }
  return out;
}

}  // namespace dlock::cli
