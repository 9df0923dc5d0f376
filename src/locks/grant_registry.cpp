#include "locks/grant_registry.hpp"

#include <algorithm>

namespace dlock::detail {

std::size_t grant_registry::key_hash::operator()(const key& k) const noexcept {
  const std::hash<std::string_view> hash;
  std::size_t h = hash(k.name);
  h ^= hash(k.owner) + 0x9e3779b97f4a7c15 + (h << 6) + (h >> 2);
  h ^= hash(k.kind) + 0x9e3779b97f4a7c15 + (h << 6) + (h >> 2);
  return h;
}

grant_registry::key grant_registry::key_of(const grant& g) noexcept {
  return {g.kind.name(), g.names->name, g.owner};
}

std::shared_ptr<grant> grant_registry::find_live(const lock_kind& kind, const std::string& name,
                                                 const std::string& owner) const {
  lock_guard lock(mutex_);
  auto it = grants_.find({kind.name(), name, owner});
  if (it == grants_.end()) return nullptr;
  assume_held(it->second->guard);
  return it->second->lost ? nullptr : it->second;
}

grant_registry::added grant_registry::add_hold(const acquire_request& r, bool reentry,
                                               std::uint64_t fence,
                                               steady::time_point valid_until) {
  added out;
  lock_guard lock(mutex_);
  if (auto it = grants_.find({r.kind->name(), r.names->name, r.owner}); it != grants_.end()) {
    if (reentry) {
      out.g = it->second;
    } else {
      out.stale = it->second;  // the server no longer knew it: that grant was lost
    }
  }
  if (!out.g) {
    out.g = std::make_shared<grant>(mutex_, *r.kind);
    assume_held(out.g->guard);
    out.g->names = r.names;
    out.g->owner = r.owner;
    out.g->fence = fence;
    out.g->permits = r.permits;
    out.g->lease_time = r.lease_time;
    out.g->watchdog = r.watchdog;
    out.g->valid_until = valid_until;
    if (out.stale) remove_locked(*out.stale);
    add_locked(out.g);
    out.earlier_expiry = valid_until < expiry_armed_at_;
    if (out.earlier_expiry) expiry_armed_at_ = valid_until;
  } else {
    assume_held(out.g->guard);
    out.g->valid_until = std::max(out.g->valid_until, valid_until);
  }
  assume_held(out.g->guard);
  ++out.g->holds;
  out.hold_id = next_hold_id_++;
  if (r.on_lost) out.g->on_lost.emplace_back(out.hold_id, r.on_lost);
  return out;
}

grant_registry::removed grant_registry::remove_hold(grant& g, std::uint64_t hold_id) {
  lock_guard lock(mutex_);
  assume_held(g.guard);
  std::erase_if(g.on_lost, [&](const auto& e) { return e.first == hold_id; });
  const bool last = --g.holds == 0;
  if (last) remove_locked(g);
  return {g.lost.has_value(), last};
}

std::optional<std::vector<std::function<void(lease_lost_reason)>>> grant_registry::lose(
    const std::shared_ptr<grant>& g, lease_lost_reason why) {
  lock_guard lock(mutex_);
  assume_held(g->guard);
  if (g->lost || g->holds == 0) return std::nullopt;
  g->lost = why;
  remove_locked(*g);
  std::vector<std::function<void(lease_lost_reason)>> callbacks;
  for (auto& [id, cb] : g->on_lost)
    callbacks.push_back(std::move(cb));
  g->on_lost.clear();
  return callbacks;
}

void grant_registry::renewed(grant& g, steady::time_point valid_until) {
  lock_guard lock(mutex_);
  assume_held(g.guard);
  if (g.in_table && !g.lost) g.valid_until = std::max(g.valid_until, valid_until);
}

bool grant_registry::extended(grant& g, steady::time_point valid_until,
                              std::chrono::milliseconds lease_time) {
  lock_guard lock(mutex_);
  assume_held(g.guard);
  g.valid_until = valid_until;
  if (!g.watchdog) g.lease_time = lease_time;
  if (!g.in_table || valid_until >= expiry_armed_at_) return false;
  expiry_armed_at_ = valid_until;
  return true;
}

std::vector<std::shared_ptr<grant>> grant_registry::watched() const {
  std::vector<std::shared_ptr<grant>> out;
  lock_guard lock(mutex_);
  for (const auto& [key, g] : grants_) {
    assume_held(g->guard);
    if (g->watchdog && !g->lost) out.push_back(g);
  }
  return out;
}

std::size_t grant_registry::watched_count() const {
  lock_guard lock(mutex_);
  return static_cast<std::size_t>(std::count_if(
      grants_.begin(), grants_.end(), [](const auto& kv) { return kv.second->watchdog; }));
}

std::pair<std::vector<std::shared_ptr<grant>>, steady::time_point> grant_registry::expired(
    steady::time_point now) {
  std::vector<std::shared_ptr<grant>> out;
  auto next = steady::time_point::max();
  lock_guard lock(mutex_);
  for (const auto& [key, g] : grants_) {
    assume_held(g->guard);
    if (g->lost) continue;
    if (g->valid_until <= now) {
      out.push_back(g);
    } else {
      next = std::min(next, g->valid_until);
    }
  }
  expiry_armed_at_ = next;
  return {std::move(out), next};
}

bool grant_registry::valid(const grant& g, steady::time_point now) const {
  lock_guard lock(mutex_);
  assume_held(g.guard);
  return !g.lost && now < g.valid_until;
}

bool grant_registry::is_lost(const grant& g) const {
  lock_guard lock(mutex_);
  assume_held(g.guard);
  return g.lost.has_value();
}

std::optional<lease_lost_reason> grant_registry::lost_reason(const grant& g) const {
  lock_guard lock(mutex_);
  assume_held(g.guard);
  return g.lost;
}

steady::time_point grant_registry::valid_until(const grant& g) const {
  lock_guard lock(mutex_);
  assume_held(g.guard);
  return g.valid_until;
}

std::chrono::milliseconds grant_registry::lease_time(const grant& g) const {
  lock_guard lock(mutex_);
  assume_held(g.guard);
  return g.lease_time;
}

steady::time_point grant_registry::next_expiry() const {
  lock_guard lock(mutex_);
  return expiry_armed_at_;
}

void grant_registry::add_locked(const std::shared_ptr<grant>& g) {
  // An entry left under the same key would keep a key that views the other grant's strings.
  if (auto it = grants_.find(key_of(*g)); it != grants_.end()) spare_.erase(grants_, it);
  spare_.insert(grants_, key_of(*g), g);
  assume_held(g->guard);
  g->in_table = true;
}

void grant_registry::remove_locked(grant& g) {
  assume_held(g.guard);
  if (!g.in_table) return;
  g.in_table = false;
  auto it = grants_.find(key_of(g));
  if (it != grants_.end() && it->second.get() == &g) spare_.erase(grants_, it);
}

}  // namespace dlock::detail
