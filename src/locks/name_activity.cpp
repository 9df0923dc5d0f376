#include "locks/name_activity.hpp"

namespace dlock::detail {

name_activity::table::iterator name_activity::slot(const std::string& name) {
  auto it = names_.find(name);
  return it != names_.end() ? it : spare_.insert(names_, name);
}

bool name_activity::claim_direct(const std::string& name, clock::time_point now) {
  lock_guard lock(mutex_);
  auto& e = slot(name)->second;
  if (e.local > 0 || now < e.yield_until) return false;
  e.local = 1;
  e.yield_until = {};
  return true;
}

void name_activity::publish_direct(const std::string& name, std::weak_ptr<void> attempt) {
  lock_guard lock(mutex_);
  slot(name)->second.direct = std::move(attempt);
}

std::shared_ptr<void> name_activity::direct(const std::string& name) const {
  lock_guard lock(mutex_);
  auto it = names_.find(name);
  return it == names_.end() ? nullptr : it->second.direct.lock();
}

void name_activity::add_local(const std::string& name, int delta, bool end_direct) {
  lock_guard lock(mutex_);
  const auto it = slot(name);
  auto& e = it->second;
  e.local += delta;
  if (end_direct) e.direct.reset();
  if (e.local <= 0 && e.yield_until <= clock::now()) spare_.erase(names_, it);
}

bool name_activity::has_local(const std::string& name) const {
  lock_guard lock(mutex_);
  auto it = names_.find(name);
  return it != names_.end() && it->second.local > 0;
}

std::optional<name_activity::clock::time_point> name_activity::yielding(
    const std::string& name, clock::time_point now) const {
  lock_guard lock(mutex_);
  auto it = names_.find(name);
  if (it == names_.end() || it->second.yield_until <= now) return std::nullopt;
  return it->second.yield_until;
}

void name_activity::set_yield(const std::string& name, clock::time_point until) {
  lock_guard lock(mutex_);
  slot(name)->second.yield_until = until;
}

void name_activity::end_yield(const std::string& name) {
  lock_guard lock(mutex_);
  auto it = names_.find(name);
  if (it == names_.end()) return;
  it->second.yield_until = {};
  if (it->second.local <= 0) spare_.erase(names_, it);
}

}  // namespace dlock::detail
