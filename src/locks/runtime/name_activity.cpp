#include "locks/runtime/name_activity.hpp"

#include <functional>

namespace dlock::detail {

name_activity::table::iterator name_activity::shard::slot(const std::string& name) {
  auto it = names.find(name);
  return it != names.end() ? it : spare.insert(names, name);
}

name_activity::shard& name_activity::shard_of(const std::string& name) const {
  return shards_[std::hash<std::string>{}(name) % shard_count];
}

bool name_activity::claim_direct(const std::string& name, clock::time_point now) {
  auto& s = shard_of(name);
  lock_guard lock(s.guard);
  auto& e = s.slot(name)->second;
  if (e.local > 0 || now < e.yield_until) return false;
  e.local = 1;
  e.yield_until = {};
  return true;
}

void name_activity::publish_direct(const std::string& name, std::weak_ptr<void> attempt) {
  auto& s = shard_of(name);
  lock_guard lock(s.guard);
  s.slot(name)->second.direct = std::move(attempt);
}

std::shared_ptr<void> name_activity::direct(const std::string& name) const {
  auto& s = shard_of(name);
  lock_guard lock(s.guard);
  auto it = s.names.find(name);
  return it == s.names.end() ? nullptr : it->second.direct.lock();
}

void name_activity::add_local(const std::string& name, int delta, bool end_direct) {
  auto& s = shard_of(name);
  lock_guard lock(s.guard);
  const auto it = s.slot(name);
  auto& e = it->second;
  e.local += delta;
  if (end_direct) e.direct.reset();
  if (e.local <= 0 && e.yield_until <= clock::now()) s.spare.erase(s.names, it);
}

bool name_activity::has_local(const std::string& name) const {
  auto& s = shard_of(name);
  lock_guard lock(s.guard);
  auto it = s.names.find(name);
  return it != s.names.end() && it->second.local > 0;
}

std::optional<name_activity::clock::time_point> name_activity::yielding(
    const std::string& name, clock::time_point now) const {
  auto& s = shard_of(name);
  lock_guard lock(s.guard);
  auto it = s.names.find(name);
  if (it == s.names.end() || it->second.yield_until <= now) return std::nullopt;
  return it->second.yield_until;
}

void name_activity::set_yield(const std::string& name, clock::time_point until) {
  auto& s = shard_of(name);
  lock_guard lock(s.guard);
  s.slot(name)->second.yield_until = until;
}

void name_activity::end_yield(const std::string& name) {
  auto& s = shard_of(name);
  lock_guard lock(s.guard);
  auto it = s.names.find(name);
  if (it == s.names.end()) return;
  it->second.yield_until = {};
  if (it->second.local <= 0) s.spare.erase(s.names, it);
}

}  // namespace dlock::detail
