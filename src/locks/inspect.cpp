// Looking at a lock from the outside: who holds it, its TTL, fence and waiters, a consistent
// snapshot (lock_info.lua), and deleting it whoever holds it (force_unlock.lua). Both scripts
// judge the key by every kind's layout, so a key that is not a lock is reported as such.
#include <charconv>
#include <optional>

#include "core/thread_number.hpp"
#include "dlock/error.hpp"
#include "dlock/lock.hpp"
#include "dlock_lua_scripts.hpp"
#include "locks/lock_core.hpp"

namespace dlock {

using detail::lock_core;

namespace {

std::uint64_t parse_u64(const reply& r) {
  if (r.is_nil()) return 0;
  const auto& s = r.str();
  std::uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) {
    throw error(errc::unexpected_reply, "not a counter: " + r.to_string());
  }
  return v;
}

// Reads the state array of _snapshot.lua: {type, layout, pttl, fence, owner1, holds1, ...}.
lock_info parse_snapshot(const reply& r) {
  lock_info info;
  const auto& type = r.at(0).str();
  const auto& layout = r.at(1).str();
  const bool lock = layout == "lock" || layout == "lock_no_ttl";
  info.type = type == "none" ? lock_type::none : lock_type::other;
  if (lock) info.type = type == "hash" ? lock_type::reentrant : lock_type::simple;
  if (info.type == lock_type::other) info.content = layout;
  const auto pttl = r.at(2).integer();
  if (pttl == -1) info.ttl = std::chrono::milliseconds::max();
  if (pttl >= 0) info.ttl = std::chrono::milliseconds(pttl);
  info.fence = parse_u64(r.at(3));
  const auto& e = r.elements();
  for (std::size_t i = 4; i + 1 < e.size(); i += 2) {
    if (info.type == lock_type::reentrant && e[i].str() == "mode") {
      // Redisson's read-write lock: `mode` says which side holds it; the rest are holders.
      info.type = lock_type::read_write;
      info.queue.push_back(e[i + 1].str());
      continue;
    }
    info.holders.push_back({e[i].str(), e[i + 1].integer()});
  }
  return info;
}

// A script's WRONGTYPE verdict ("WRONGTYPE holds a list, not a lock") as an error naming the lock.
[[noreturn]] void throw_not_a_lock(const std::string& name, const error& e) {
  std::string what = e.what();
  if (const auto at = what.find("holds "); at != std::string::npos) what = what.substr(at);
  if (const auto suffix = what.rfind(": " + e.code().message()); suffix != std::string::npos) {
    what.resize(suffix);
  }
  throw error(errc::wrong_type, "'" + name + "' " + what);
}

const script& lock_info_script() {
  static const script s{std::string(lua::lock_info)};
  return s;
}

const script& force_unlock_script() {
  static const script s{std::string(lua::force_unlock)};
  return s;
}

// A script that reads or removes one lock, run where the lock is: on every RedLock master (a
// force-unlock must remove it from each). The answer is the first master's that shows a lock,
// else the first answer; errors only count when no master answered.
lock_info snapshot_across(detail::lock_core& core, const script& s, const std::string& name,
                          std::span<const std::string_view> keys,
                          std::span<const std::string_view> args) {
  if (core.topo().nodes_for(name).size() == 1)
    return parse_snapshot(core.call(s, name, keys, args));
  std::optional<lock_info> first;
  std::optional<error> failure;
  for (auto& [ec, r] : core.call_each(s, name, keys, args)) {
    if (ec) {
      if (!failure) failure.emplace(ec, r.is_error() ? r.str() : ec.message());
      continue;
    }
    auto info = parse_snapshot(r);
    if (info.type != lock_type::none) return info;
    if (!first) first = std::move(info);
  }
  if (first) return *first;
  throw *failure;
}

}  // namespace

bool basic_lock::is_locked() const {
  const std::string_view args[] = {"EXISTS", name()};
  return handle_->core->command(name(), args).integer() == 1;
}

std::optional<lock_holder> basic_lock::holder() const {
  const auto& n = *handle_->names;
  const std::string_view keys[] = {n.name, n.fence_key};
  const auto i = snapshot_across(*handle_->core, lock_info_script(), n.name, keys, {});
  if (i.type == lock_type::none) return std::nullopt;
  const auto expected = handle_->kind->public_type();
  if (i.type != expected && !(expected == lock_type::fair && i.type == lock_type::reentrant)) {
    throw error(errc::wrong_type,
                "'" + name() + "' is not a " + std::string(handle_->kind->name()) + " lock");
  }
  if (i.holders.empty()) return std::nullopt;
  return i.holders.front();
}

std::optional<std::chrono::milliseconds> basic_lock::remaining_ttl() const {
  const std::string_view args[] = {"PTTL", name()};
  const auto ms = handle_->core->command(name(), args).integer();
  if (ms == -2) return std::nullopt;
  if (ms == -1) return std::chrono::milliseconds::max();
  return std::chrono::milliseconds(ms);
}

std::uint64_t basic_lock::fence() const {
  const std::string_view args[] = {"GET", handle_->names->fence_key};
  return parse_u64(handle_->core->command(handle_->names->fence_key, args));
}

std::int64_t basic_lock::waiting_clients() const {
  auto& core = *handle_->core;
  if (handle_->kind->public_type() == lock_type::fair) {
    // Each fair waiter listens on its own channel; the queue says how many there are.
    const std::string_view args[] = {"LLEN", handle_->names->aux_key1};
    return core.command(handle_->names->aux_key1, args).integer();
  }
  // Sharded channels on a cluster (PUBSUB SHARDNUMSUB), counted on the slot's node.
  const std::string_view args[] = {"PUBSUB", core.topo().numsub_command(), handle_->names->channel};
  return core.command(handle_->names->channel, args).at(1).integer();
}

lock_info basic_lock::info() const {
  const auto& n = *handle_->names;
  const std::string_view keys[] = {n.name, n.fence_key};
  auto info = snapshot_across(*handle_->core, lock_info_script(), n.name, keys, {});
  if (handle_->kind->keeps_waiter_place() && !n.aux_key1.empty() &&
      handle_->kind->public_type() == lock_type::fair) {
    // A fair lock's waiters each listen on their own channel: its queue says who waits.
    const std::string_view args[] = {"LRANGE", n.aux_key1, "0", "-1"};
    const auto queue = handle_->core->command(n.aux_key1, args);  // outlives the loop
    for (const auto& e : queue.elements())
      info.queue.push_back(e.str());
    if (info.type == lock_type::reentrant) info.type = lock_type::fair;
    info.waiters = static_cast<std::int64_t>(info.queue.size());
    return info;
  }
  info.waiters = waiting_clients();
  return info;
}

std::vector<std::string> fair_lock::queue() const {
  const auto& key = handle_->names->aux_key1;
  const std::string_view args[] = {"LRANGE", key, "0", "-1"};
  const auto queue = handle_->core->command(key, args);  // outlives the loop
  std::vector<std::string> out;
  for (const auto& e : queue.elements())
    out.push_back(e.str());
  return out;
}

lock_info basic_lock::force_unlock(force_unlock_check check) const {
  const auto& n = *handle_->names;
  const std::string_view confirmed =
      check == force_unlock_check::confirmed_kind ? handle_->kind->redis_type() : "";
  const std::string_view keys[] = {n.name, n.fence_key, n.channel};
  const std::string_view args[] = {detail::unlock_message, confirmed,
                                   handle_->core->topo().publish_command()};
  lock_info removed;
  try {
    removed = snapshot_across(*handle_->core, force_unlock_script(), n.name, keys, args);
  } catch (const error& e) {
    if (e.code() == errc::wrong_type) throw_not_a_lock(name(), e);
    throw;
  }
  if (handle_->kind->public_type() == lock_type::fair) {
    // Fair waiters each listen on their own channel: tell the first in line.
    static const script wake{std::string(lua::fair_wake)};
    const std::string_view wake_keys[] = {n.name, n.aux_key1, n.aux_key2, n.publish_channel};
    const std::string_view wake_args[] = {detail::unlock_message,
                                          handle_->core->topo().publish_command()};
    handle_->core->call(wake, n.name, wake_keys, wake_args);
  }
  return removed;
}

std::int64_t reentrant_lock::hold_count(const std::string& owner) const {
  auto& core = *handle_->core;
  const std::string field = core.id() + ":" + owner;
  const std::string_view args[] = {"HGET", name(), field};
  const auto r = core.command(name(), args);
  if (r.is_nil()) return 0;
  return static_cast<std::int64_t>(parse_u64(r));
}

std::int64_t reentrant_lock::hold_count() const {
  return hold_count(std::to_string(detail::current_thread_number()));
}

bool reentrant_lock::held_by_current_thread() const {
  try {
    return hold_count() > 0;
  } catch (const error& e) {
    if (e.code() == errc::wrong_type) return false;  // a simple lock holds the name
    throw;
  }
}

}  // namespace dlock
