// dlock status, ls and unlock --force: looking at locks from the outside.
#include <fnmatch.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli.hpp"
#include "display.hpp"
#include "dlock/keys.hpp"
#include "dlock/lock.hpp"
#include "dlock/redis/client.hpp"

namespace dlock::cli {
namespace {

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

// The kind column: a key that is not a lock says what it holds instead.
std::string kind_text(const lock_info& info) {
  if (info.type != lock_type::other) return kind_name(info.type);
  return "not a lock: " + info.content;
}

// The documented JSON form of one lock (docs/cli.md).
nlohmann::json to_json(const std::string& name, const lock_info& info) {
  nlohmann::json holders = nlohmann::json::array();
  for (const auto& h : info.holders) {
    nlohmann::json holder{{"holds", h.holds}};
    set_text(holder, "owner", h.owner);
    holders.push_back(std::move(holder));
  }
  nlohmann::json ttl = nullptr;
  if (info.ttl) ttl = *info.ttl == std::chrono::milliseconds::max() ? -1 : info.ttl->count();
  nlohmann::json out{
      {"kind", kind_name(info.type)},
      {"locked", info.type != lock_type::none && info.type != lock_type::other},
      {"holders", holders},
      {"ttl_ms", ttl},
      {"fence", info.fence},
      {"waiters", info.waiters}};
  set_text(out, "name", name);
  if (info.type == lock_type::other) out["content"] = info.content;
  return out;
}

std::string holders_text(const lock_info& info) {
  if (info.holders.empty()) return "-";
  std::string out;
  for (const auto& h : info.holders) {
    if (!out.empty()) out += ", ";
    out +=
        escaped(h.owner) + " (" + std::to_string(h.holds) + (h.holds == 1 ? " hold)" : " holds)");
  }
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
std::vector<std::string> scan_lock_names(redis_client& redis) {
  // SCAN's MATCH is a glob: escape the prefix's own special characters (it has none today).
  const std::string pattern = std::string(fence_counter_prefix) + ":*";
  std::vector<std::string> names;
  std::string cursor = "0";
  do {
    const auto r = redis.command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
    cursor = r.at(0).str();
    for (const auto& k : r.at(1).elements()) {
      auto candidates = lock_names_of_fence_counter(k.str());
      if (candidates.size() == 2 && redis.command({"EXISTS", candidates[0]}).integer() == 0 &&
          redis.command({"EXISTS", candidates[1]}).integer() == 1) {
        candidates.erase(candidates.begin());
      }
      if (!candidates.empty()) names.push_back(std::move(candidates.front()));
    }
  } while (cursor != "0");
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

}  // namespace

int status(const client_options& target, const std::string& name, bool json) {
  const auto c = connect_to(target);
  const auto info = c.reentrant(name).info();
  if (json) {
    std::cout << to_json(name, info).dump() << "\n";
    return exit_ok;
  }
  std::cout << "lock     " << escaped(name) << "\n"
            << "kind     " << kind_text(info) << "\n"
            << "holders  " << holders_text(info) << "\n"
            << "ttl      " << ttl_text(info.ttl) << "\n"
            << "fence    " << info.fence << "\n"
            << "waiters  " << info.waiters << "\n";
  return exit_ok;
}

int list(const client_options& target, const std::string& pattern, bool json) {
  const auto c = connect_to(target);
  nlohmann::json all = nlohmann::json::array();
  std::vector<std::pair<std::string, lock_info>> rows;
  std::vector<std::string> names;
  // RedLock keeps every lock on every master: a master that is down hides nothing, and each
  // name is listed once.
  const bool redlock = !target.redlock.masters.empty();
  std::optional<dlock::error> unreachable;
  std::size_t scanned = 0;
  for (auto* master : c.masters()) {
    try {
      auto more = scan_lock_names(*master);
      names.insert(names.end(), more.begin(), more.end());
      ++scanned;
    } catch (const dlock::error& e) {
      if (!redlock) throw;
      if (!unreachable) unreachable = e;
    }
  }
  if (scanned == 0 && unreachable) throw *unreachable;
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  for (const auto& name : names) {
    if (::fnmatch(pattern.c_str(), name.c_str(), 0) != 0) continue;
    rows.emplace_back(name, c.reentrant(name).info());
  }
  if (json) {
    for (const auto& [name, info] : rows)
      all.push_back(to_json(name, info));
    std::cout << nlohmann::json{{"locks", all}}.dump() << "\n";
    return exit_ok;
  }
  std::size_t width = 4;
  for (const auto& [name, info] : rows)
    width = std::max(width, escaped(name).size());
  std::printf("%-*s  %-9s  %-9s  %16s  %7s  %s\n", static_cast<int>(width), "NAME", "KIND", "TTL",
              "FENCE", "WAITERS", "HOLDERS");
  for (const auto& [name, info] : rows) {
    std::printf("%-*s  %-9s  %-9s  %16llu  %7lld  %s\n", static_cast<int>(width),
                escaped(name).c_str(), kind_text(info).c_str(), ttl_text(info.ttl).c_str(),
                static_cast<unsigned long long>(info.fence), static_cast<long long>(info.waiters),
                holders_text(info).c_str());
  }
  return exit_ok;
}

int force_unlock(const client_options& target, const std::string& name, const std::string& kind) {
  const auto c = connect_to(target);
  lock_info removed;
  try {
    // The kind confirms what a lock left without an expiry is; without it only unambiguous locks
    // are deleted (and the lock object's kind does not matter: the script judges the key).
    const auto check =
        kind.empty() ? force_unlock_check::layout_and_expiry : force_unlock_check::confirmed_kind;
    removed = kind == "simple" ? c.simple(name).force_unlock(check)
                               : c.reentrant(name).force_unlock(check);
  } catch (const dlock::error& e) {
    if (e.code() != errc::wrong_type) throw;
    throw failure(exit_not_a_lock, message_of(e) + "; nothing was deleted");
  }
  if (removed.type == lock_type::none) {
    std::cout << "no lock named " << escaped(name) << ": nothing removed\n";
    return exit_ok;
  }
  std::cout << "removed " << kind_name(removed.type) << " lock " << escaped(name) << " held by "
            << holders_text(removed) << ", ttl " << ttl_text(removed.ttl) << ", fence "
            << removed.fence << "; waiters woken\n";
  return exit_ok;
}

}  // namespace dlock::cli
