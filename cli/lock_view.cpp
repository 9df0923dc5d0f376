// What a lock name holds, seen from outside, as `status`, `ls` and `unlock --force` show it. A
// name's kind is recognised from its keys: the name's own key judged by lock_info, refined by the
// keys the other kinds keep beside it.
#include "lock_view.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "cli.hpp"
#include "display.hpp"
#include "dlock/keys.hpp"
#include "dlock/lock.hpp"
#include "dlock/read_write_lock.hpp"
#include "dlock/redis/client.hpp"
#include "dlock/semaphore.hpp"

namespace dlock::cli {

const char* kind_name(lock_type t) {
  switch (t) {
    case lock_type::none:
      return "free";
    case lock_type::reentrant:
      return "reentrant";
    case lock_type::simple:
      return "simple";
    case lock_type::other:
      return "other";
    case lock_type::read_write:
      return "read-write";
    case lock_type::fair:
      return "fair";
  }
  return "?";
}

std::string ttl_text(const std::optional<std::chrono::milliseconds>& ttl) {
  if (!ttl) return "-";
  if (*ttl == std::chrono::milliseconds::max()) return "no expiry";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fs", static_cast<double>(ttl->count()) / 1000.0);
  return buf;
}

namespace {

// A key derived by Redisson's suffix rule: NAME:suffix if NAME holds a '{', else {NAME}:suffix.
std::string suffixed(const std::string& name, const std::string& suffix) {
  return (name.find('{') != std::string::npos ? name : "{" + name + "}") + ":" + suffix;
}

std::optional<std::int64_t> integer_of(const std::string& text) {
  if (text.empty() || text.size() > 19) return std::nullopt;
  std::size_t i = text[0] == '-' ? 1 : 0;
  if (i == text.size()) return std::nullopt;
  for (std::size_t k = i; k < text.size(); ++k) {
    if (text[k] < '0' || text[k] > '9') return std::nullopt;
  }
  return std::stoll(text);
}

nlohmann::json owner_json(const std::string& owner) {
  nlohmann::json o = nlohmann::json::object();
  set_text(o, "owner", owner);
  return o;
}

// What a semaphore's grant or permit `id` recorded of its holder, if anything.
const holder_identity* recorded_holder(const semaphore_info& p, const std::string& id) {
  for (const auto& [grant, who] : p.holders) {
    if (grant == id) return &who;
  }
  return nullptr;
}

nlohmann::json ttl_json(std::chrono::milliseconds ttl) {
  return ttl == std::chrono::milliseconds::max() ? -1 : ttl.count();
}

}  // namespace

// Recognises the kind from the keys (docs/cli.md): a hash with a `mode` field is a read-write
// lock; a hash (or nothing) the library's snapshot judges a fair lock (its queue exists beside
// it) is one; a string holding an integer is a leased semaphore when its `{NAME}:timeout` zset
// exists, else a semaphore or a latch (Redisson keeps both as a bare count) unless it has an
// expiry, which only a lock's token has. RedLock keeps mutexes only: its snapshot is taken
// across masters.
shown inspect(const dlock::client& c, const std::string& name) {
  shown s;
  const auto snapshot = [&] { return c.reentrant(name).info(); };
  if (!c.options().redlock.masters.empty()) {
    s.info = snapshot();
  } else if (const auto type = c.command(name, {"TYPE", name}).str();
             type == "hash" || type == "none") {
    const auto mode = type == "hash" ? c.command(name, {"HGET", name, "mode"}) : reply();
    if (!mode.is_nil() && (mode.str() == "read" || mode.str() == "write")) {
      s.info = c.read_write(name).read().info();  // its waiters listen on redisson_rwlock:{NAME}
      if (s.info.type == lock_type::reentrant) {
        s.info.type = lock_type::read_write;
        s.mode = mode.str();
      }
    } else if (s.info = snapshot(); s.info.kind == lock_type::fair) {
      s.info = c.fair(name).info();  // its queue; the lock itself may be free a moment
      if (s.info.type == lock_type::none) s.kind = "fair";
    }
  } else if (const auto value =
                 type == "string" ? integer_of(c.command(name, {"GETRANGE", name, "0", "20"}).str())
                                  : std::nullopt) {
    s.info = snapshot();  // the key's TTL and the fencing counter
    const auto timeout = suffixed(name, "timeout");
    if (c.command(timeout, {"TYPE", timeout}).str() == "zset") {
      s.permits = c.leased_semaphore(name).info();
      s.kind = "leased-semaphore";
    } else if (s.info.ttl == std::chrono::milliseconds::max()) {
      s.permits = c.semaphore(name).info();
      s.count = *value;
      s.kind = "semaphore-or-latch";
    }
    if (s.permits) {
      s.info.holders.clear();
      s.info.waiters = s.permits->waiters;
    }
  } else {
    s.info = snapshot();
  }
  if (s.kind.empty()) s.kind = kind_name(s.info.type);
  return s;
}

bool in_use(const shown& s) {
  if (s.kind == "leased-semaphore") return locked(s);
  return s.info.type != lock_type::none || s.kind == "fair" || s.count;
}

namespace {

std::string duration_text(std::chrono::milliseconds d) {
  const auto s = std::max<long long>(0, d.count() / 1000);
  char buf[48];
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%llds", s);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
  } else if (s < 86400) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", s / 3600, s / 60 % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lldd%02lldh", s / 86400, s / 3600 % 24);
  }
  return buf;
}

std::string iso_utc(std::chrono::system_clock::time_point t) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch());
  const std::time_t secs = static_cast<std::time_t>(ms.count() / 1000);
  std::tm utc{};
  ::gmtime_r(&secs, &utc);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &utc);
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03lldZ", buf, static_cast<long long>(ms.count() % 1000));
  return out;
}

}  // namespace

std::string identity_text(const holder_identity& id) {
  const auto held = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now() - id.since);
  return escaped(id.user) + "@" + escaped(id.host) + " pid " + std::to_string(id.pid) + ", for " +
         duration_text(held) + ": " + escaped(id.label);
}

nlohmann::json identity_json(const holder_identity& id) {
  nlohmann::json out{
      {"pid", id.pid},
      {"since", iso_utc(id.since)},
      {"since_ms",
       std::chrono::duration_cast<std::chrono::milliseconds>(id.since.time_since_epoch()).count()}};
  set_text(out, "host", id.host);
  set_text(out, "user", id.user);
  set_text(out, "label", id.label);
  set_text(out, "client_id", id.client_id);
  return out;
}

bool locked(const shown& s) {
  if (s.kind == "leased-semaphore") return !s.permits->leased.empty();
  if (s.kind == "semaphore-or-latch") return false;
  return s.info.type != lock_type::none && s.info.type != lock_type::other;
}

std::string kind_text(const shown& s) {
  if (s.info.type == lock_type::other && !s.permits) return "not a lock: " + s.info.content;
  if (s.kind == "leased-semaphore") return "leased semaphore";
  if (s.count) return "semaphore or latch (count " + std::to_string(*s.count) + ")";
  return s.kind;
}

nlohmann::json to_json(const std::string& name, const shown& s) {
  const auto& info = s.info;
  nlohmann::json holders = nlohmann::json::array();
  for (const auto& h : info.holders) {
    auto holder = owner_json(h.owner);
    holder["holds"] = h.holds;
    if (h.identity) holder["holder"] = identity_json(*h.identity);
    holders.push_back(std::move(holder));
  }
  nlohmann::json ttl = nullptr;
  if (info.ttl) ttl = ttl_json(*info.ttl);
  nlohmann::json out{{"kind", s.kind}, {"locked", locked(s)}, {"holders", holders},
                     {"ttl_ms", ttl},  {"fence", info.fence}, {"waiters", info.waiters}};
  set_text(out, "name", name);
  if (info.type == lock_type::other && !s.permits) out["content"] = info.content;
  if (s.kind == "fair") {
    out["queue"] = nlohmann::json::array();
    for (const auto& owner : info.queue)
      out["queue"].push_back(owner_json(owner));
  }
  if (!s.mode.empty()) out["mode"] = s.mode;
  if (s.count) out["count"] = *s.count;
  if (s.kind == "leased-semaphore") {
    out["available"] = s.permits->available;
    out["permits"] = nlohmann::json::array();
    for (const auto& [id, left] : s.permits->leased) {
      nlohmann::json permit{{"id", id}, {"ttl_ms", ttl_json(left)}};
      if (const auto* who = recorded_holder(*s.permits, id)) permit["holder"] = identity_json(*who);
      out["permits"].push_back(std::move(permit));
    }
  } else if (s.permits && !s.permits->holders.empty()) {
    out["grants"] = nlohmann::json::array();
    for (const auto& [id, who] : s.permits->holders)
      out["grants"].push_back({{"id", id}, {"holder", identity_json(who)}});
  }
  return out;
}

std::string holders_text(const lock_info& info) {
  if (info.holders.empty()) return "-";
  std::string out;
  for (const auto& h : info.holders) {
    if (!out.empty()) out += ", ";
    out += h.identity ? identity_text(*h.identity) : escaped(h.owner);
    out += " (" + std::to_string(h.holds) + (h.holds == 1 ? " hold)" : " holds)");
  }
  return out;
}

std::string queue_text(const lock_info& info) {
  if (info.queue.empty()) return "-";
  std::string out;
  for (const auto& owner : info.queue)
    out += (out.empty() ? "" : ", ") + escaped(owner);
  return out;
}

std::string permits_text(const semaphore_info& p) {
  std::string out =
      std::to_string(p.available) + " free, " + std::to_string(p.leased.size()) + " leased";
  for (std::size_t i = 0; i < p.leased.size(); ++i) {
    out +=
        (i == 0 ? ": " : ", ") + p.leased[i].first + " (ttl " + ttl_text(p.leased[i].second) + ")";
    if (const auto* who = recorded_holder(p, p.leased[i].first)) out += " " + identity_text(*who);
  }
  return out;
}

std::string details_text(const shown& s) {
  if (s.kind == "leased-semaphore") return permits_text(*s.permits);
  if (s.permits && !s.permits->holders.empty()) {
    std::string out = "taken by ";
    for (std::size_t i = 0; i < s.permits->holders.size(); ++i)
      out += (i == 0 ? "" : ", ") + identity_text(s.permits->holders[i].second);
    return out;
  }
  std::string out = holders_text(s.info);
  if (!s.mode.empty()) out = s.mode + ": " + out;
  if (s.kind == "fair") out += "; queue: " + queue_text(s.info);
  return out;
}

dlock::client connect_to(const client_options& target) {
  try {
    return connect(target);
  } catch (const dlock::error& e) {
    throw failure(exit_code_for(e), message_of(e));
  }
}

// Lock names as their users wrote them, from their fencing counters: every lock dlock (or
// Redisson's fenced lock) has granted has one. Redisson's rule gives the names `a` and `{a}` the
// same counter; the one whose lock exists is meant, else the plainer `a`.
std::vector<std::string> scan_lock_names(const dlock::client& c, redis_client& node) {
  // SCAN's MATCH is a glob: escape the prefix's own special characters (it has none today).
  const std::string pattern = std::string(fence_counter_prefix) + ":*";
  std::vector<std::string> names;
  std::string cursor = "0";
  do {
    const auto r = node.command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
    cursor = r.at(0).str();
    for (const auto& k : r.at(1).elements()) {
      auto candidates = lock_names_of_fence_counter(k.str());
      // Each asked where it lives: on a cluster the two names hash to different slots.
      const auto exists = [&](const std::string& name) {
        return c.command(name, {"EXISTS", name}).integer() == 1;
      };
      if (candidates.size() == 2 && !exists(candidates[0]) && exists(candidates[1])) {
        candidates.erase(candidates.begin());
      }
      if (!candidates.empty()) names.push_back(std::move(candidates.front()));
    }
  } while (cursor != "0");
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

}  // namespace dlock::cli
