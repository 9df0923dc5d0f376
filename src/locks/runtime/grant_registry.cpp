#include "locks/runtime/grant_registry.hpp"

#include <algorithm>
#include <cstdlib>

namespace dlock::detail {

namespace {

constexpr steady::duration::rep ticks(steady::time_point t) noexcept {
  return t.time_since_epoch().count();
}
constexpr steady::time_point from_ticks(steady::duration::rep r) noexcept {
  return steady::time_point(steady::duration(r));
}

}  // namespace

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

grant_registry::shard& grant_registry::shard_of(const key& k) const noexcept {
  // The hash's high bits: the tables index their buckets by its low ones.
  return shards_[(key_hash{}(k) >> (8 * sizeof(std::size_t) - 4)) % shard_count];
}

grant_registry::shard& grant_registry::shard_holding(const grant& g) const noexcept {
  for (auto& s : shards_) {
    if (&s.m == &g.guard) return s;
  }
  std::abort();  // every grant is made with its shard's mutex as its guard
}

bool grant_registry::arm_earlier(steady::time_point t) noexcept {
  auto armed = expiry_armed_at_.load();
  while (ticks(t) < armed) {
    if (expiry_armed_at_.compare_exchange_weak(armed, ticks(t))) return true;
  }
  return false;
}

std::shared_ptr<grant> grant_registry::find_live(const lock_kind& kind, const std::string& name,
                                                 const std::string& owner) const {
  const key k{kind.name(), name, owner};
  auto& s = shard_of(k);
  lock_guard lock(s.m);
  auto it = s.grants.find(k);
  if (it == s.grants.end()) return nullptr;
  assume_held(it->second->guard);
  return it->second->lost ? nullptr : it->second;
}

grant_registry::added grant_registry::add_hold(const acquire_request& r, bool reentry,
                                               std::uint64_t fence,
                                               steady::time_point valid_until) {
  added out;
  const key k{r.kind->name(), r.names->name, r.owner};
  auto& s = shard_of(k);
  lock_guard lock(s.m);
  if (auto it = s.grants.find(k); it != s.grants.end()) {
    if (reentry) {
      out.g = it->second;
    } else {
      out.stale = it->second;  // the server no longer knew it: that grant was lost
    }
  }
  if (!out.g) {
    out.g = std::make_shared<grant>(s.m, *r.kind);
    assume_held(out.g->guard);
    out.g->names = r.names;
    out.g->owner = r.owner;
    out.g->fence = fence;
    out.g->permits = r.permits;
    out.g->lease_time = r.lease_time;
    out.g->watchdog = r.watchdog;
    out.g->series = r.series;
    out.g->granted_at = steady::now();
    out.g->valid_until = valid_until;
    if (out.stale) s.remove_locked(*out.stale);
    s.add_locked(out.g);
    // After the insertion: see expired().
    out.earlier_expiry = arm_earlier(valid_until);
  } else {
    assume_held(out.g->guard);
    out.g->valid_until = std::max(out.g->valid_until, valid_until);
  }
  assume_held(out.g->guard);
  ++out.g->holds;
  out.hold_id = s.next_hold_id++;  // unique within the grant, which never leaves its shard
  if (r.on_lost) out.g->on_lost.emplace_back(out.hold_id, r.on_lost);
  return out;
}

grant_registry::removed grant_registry::remove_hold(grant& g, std::uint64_t hold_id) {
  lock_guard lock(g.guard);
  std::erase_if(g.on_lost, [&](const auto& e) { return e.first == hold_id; });
  const bool last = --g.holds == 0;
  if (last) remove_locked(g);
  return {g.lost.has_value(), last};
}

std::optional<std::vector<std::function<void(lease_lost_reason)>>> grant_registry::lose(
    const std::shared_ptr<grant>& g, lease_lost_reason why) {
  lock_guard lock(g->guard);
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
  lock_guard lock(g.guard);
  if (g.in_table && !g.lost) g.valid_until = std::max(g.valid_until, valid_until);
}

bool grant_registry::extended(grant& g, steady::time_point valid_until,
                              std::chrono::milliseconds lease_time) {
  lock_guard lock(g.guard);
  g.valid_until = valid_until;
  if (!g.watchdog) g.lease_time = lease_time;
  return g.in_table && arm_earlier(valid_until);
}

std::vector<std::shared_ptr<grant>> grant_registry::watched() const {
  std::vector<std::shared_ptr<grant>> out;
  for (auto& s : shards_) {
    lock_guard lock(s.m);
    for (const auto& [key, g] : s.grants) {
      assume_held(g->guard);
      if (g->watchdog && !g->lost) out.push_back(g);
    }
  }
  return out;
}

std::size_t grant_registry::watched_count() const {
  std::size_t n = 0;
  for (auto& s : shards_) {
    lock_guard lock(s.m);
    n += static_cast<std::size_t>(std::count_if(
        s.grants.begin(), s.grants.end(), [](const auto& kv) { return kv.second->watchdog; }));
  }
  return n;
}

// A grant added to a shard after the scan below has passed it is not in `out` or `next`, so the
// watch must not end up armed later than its validity. Disarming first ensures that: such a
// grant's arm_earlier comes after its insertion, which comes after the scan of its shard, which
// comes after the disarming, so it finds the watch no earlier than `next` and lowers it (its
// caller then re-arms the timer) if its validity ends sooner.
std::pair<std::vector<std::shared_ptr<grant>>, steady::time_point> grant_registry::expired(
    steady::time_point now) {
  std::vector<std::shared_ptr<grant>> out;
  auto next = steady::time_point::max();
  expiry_armed_at_.store(ticks(steady::time_point::max()));
  for (auto& s : shards_) {
    lock_guard lock(s.m);
    for (const auto& [key, g] : s.grants) {
      assume_held(g->guard);
      if (g->lost) continue;
      if (g->valid_until <= now) {
        out.push_back(g);
      } else {
        next = std::min(next, g->valid_until);
      }
    }
  }
  arm_earlier(next);
  return {std::move(out), next};
}

bool grant_registry::valid(const grant& g, steady::time_point now) const {
  lock_guard lock(g.guard);
  return !g.lost && now < g.valid_until;
}

bool grant_registry::is_lost(const grant& g) const {
  lock_guard lock(g.guard);
  return g.lost.has_value();
}

std::optional<lease_lost_reason> grant_registry::lost_reason(const grant& g) const {
  lock_guard lock(g.guard);
  return g.lost;
}

steady::time_point grant_registry::valid_until(const grant& g) const {
  lock_guard lock(g.guard);
  return g.valid_until;
}

std::chrono::milliseconds grant_registry::lease_time(const grant& g) const {
  lock_guard lock(g.guard);
  return g.lease_time;
}

steady::time_point grant_registry::next_expiry() const {
  return from_ticks(expiry_armed_at_.load());
}

void grant_registry::shard::add_locked(const std::shared_ptr<grant>& g) {
  // An entry left under the same key would keep a key that views the other grant's strings.
  if (auto it = grants.find(key_of(*g)); it != grants.end()) spare.erase(grants, it);
  spare.insert(grants, key_of(*g), g);
  assume_held(g->guard);
  g->in_table = true;
}

void grant_registry::shard::remove_locked(grant& g) {
  assume_held(g.guard);
  if (!g.in_table) return;
  g.in_table = false;
  auto it = grants.find(key_of(g));
  if (it != grants.end() && it->second.get() == &g) spare.erase(grants, it);
}

void grant_registry::remove_locked(grant& g) {
  auto& s = shard_holding(g);
  assume_held(s.m);  // it is g.guard, which the caller holds
  s.remove_locked(g);
}

}  // namespace dlock::detail
