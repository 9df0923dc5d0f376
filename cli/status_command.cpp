// dlock status, ls and unlock --force: looking at locks from the outside.
#include <fnmatch.h>

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "dlock/lock.hpp"
#include "dlock/redis_client.hpp"

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

// The documented JSON form of one lock (docs/cli.md).
nlohmann::json to_json(const std::string& name, const lock_info& info) {
  nlohmann::json holders = nlohmann::json::array();
  for (const auto& h : info.holders)
    holders.push_back({{"owner", h.owner}, {"holds", h.holds}});
  nlohmann::json ttl = nullptr;
  if (info.ttl) ttl = *info.ttl == std::chrono::milliseconds::max() ? -1 : info.ttl->count();
  return {{"name", name},
          {"kind", kind_name(info.type)},
          {"locked", info.type == lock_type::reentrant || info.type == lock_type::simple},
          {"holders", holders},
          {"ttl_ms", ttl},
          {"fence", info.fence},
          {"waiters", info.waiters}};
}

std::string holders_text(const lock_info& info) {
  if (info.holders.empty()) return "-";
  std::string out;
  for (const auto& h : info.holders) {
    if (!out.empty()) out += ", ";
    out += h.owner + " (" + std::to_string(h.holds) + (h.holds == 1 ? " hold)" : " holds)");
  }
  return out;
}

dlock::client connect_to(const std::string& url) {
  try {
    return connect(client_options::from_url(url));
  } catch (const dlock::error& e) {
    throw failure(exit_code_for(e), e.what());
  }
}

// Lock names from their fencing counters, "redisson_lock_token:{NAME}" (or ":NAME" when the name
// carries its own hash tag): every lock dlock (or Redisson's fenced lock) has granted has one.
std::vector<std::string> scan_lock_names(redis_client& redis) {
  static const std::string prefix = "redisson_lock_token:";
  std::vector<std::string> names;
  std::string cursor = "0";
  do {
    const auto r = redis.command({"SCAN", cursor, "MATCH", prefix + "*", "COUNT", "1000"});
    cursor = r.at(0).str();
    for (const auto& k : r.at(1).elements()) {
      std::string name = k.str().substr(prefix.size());
      if (name.size() > 2 && name.front() == '{' && name.back() == '}' &&
          name.find_first_of("{}", 1) == name.size() - 1) {
        name = name.substr(1, name.size() - 2);
      }
      names.push_back(std::move(name));
    }
  } while (cursor != "0");
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

}  // namespace

int status(const std::string& url, const std::string& name, bool json) {
  const auto c = connect_to(url);
  const auto info = c.reentrant(name).info();
  if (json) {
    std::cout << to_json(name, info).dump() << "\n";
    return exit_ok;
  }
  std::cout << "lock     " << name << "\n"
            << "kind     " << kind_name(info.type) << "\n"
            << "holders  " << holders_text(info) << "\n"
            << "ttl      " << ttl_text(info.ttl) << "\n"
            << "fence    " << info.fence << "\n"
            << "waiters  " << info.waiters << "\n";
  return exit_ok;
}

int list(const std::string& url, const std::string& pattern, bool json) {
  const auto c = connect_to(url);
  nlohmann::json all = nlohmann::json::array();
  std::vector<std::pair<std::string, lock_info>> rows;
  for (const auto& name : scan_lock_names(c.redis())) {
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
    width = std::max(width, name.size());
  std::printf("%-*s  %-9s  %-9s  %6s  %7s  %s\n", static_cast<int>(width), "NAME", "KIND", "TTL",
              "FENCE", "WAITERS", "HOLDERS");
  for (const auto& [name, info] : rows) {
    std::printf("%-*s  %-9s  %-9s  %6llu  %7lld  %s\n", static_cast<int>(width), name.c_str(),
                kind_name(info.type), ttl_text(info.ttl).c_str(),
                static_cast<unsigned long long>(info.fence), static_cast<long long>(info.waiters),
                holders_text(info).c_str());
  }
  return exit_ok;
}

int force_unlock(const std::string& url, const std::string& name) {
  const auto c = connect_to(url);
  lock_info removed;
  try {
    removed = c.reentrant(name).force_unlock();
  } catch (const dlock::error& e) {
    if (e.code() == errc::wrong_type) throw failure(exit_usage, e.what());
    throw;
  }
  if (removed.type == lock_type::none) {
    std::cout << "no lock named " << name << ": nothing removed\n";
    return exit_ok;
  }
  std::cout << "removed " << kind_name(removed.type) << " lock " << name << " held by "
            << holders_text(removed) << ", ttl " << ttl_text(removed.ttl) << ", fence "
            << removed.fence << "; waiters woken\n";
  return exit_ok;
}

}  // namespace dlock::cli
