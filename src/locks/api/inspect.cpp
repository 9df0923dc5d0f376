// Looking at a lock from the outside: who holds it, its TTL, fence and waiters, a consistent
// snapshot (lock_info.lua), and deleting it whoever holds it (force_unlock.lua). Both scripts
// judge the key by every kind's layout, so a key that is not a lock is reported as such.
#include <charconv>
#include <optional>

#include "core/thread_number.hpp"
#include "dlock/error.hpp"
#include "dlock/keys.hpp"
#include "dlock/lock.hpp"
#include "dlock_lua_scripts.hpp"
#include "locks/async/awaitable_factory.hpp"
#include "locks/async/one_call.hpp"
#include "locks/runtime/lock_core.hpp"
#include "locks/sansio/holder_record.hpp"

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

// The kinds that share a layout, told apart by what the snapshot found beside the lock's key: a
// reentrant lock's hash with a `mode` field is a read-write lock's; a fair lock keeps a queue of
// waiters beside its hash, which may be free a moment between two holders.
lock_type kind_by_keys(lock_type type, std::string_view mode, bool queued) {
  if (type == lock_type::reentrant && !mode.empty()) return lock_type::read_write;
  if (queued && (type == lock_type::reentrant || type == lock_type::none)) return lock_type::fair;
  return type;
}

// Reads the state array of _snapshot.lua: {type, layout, pttl, fence, mode, queued, owner1,
// holds1, identity1, ...}; an identity that is not a holder record (a key someone else wrote)
// is left out.
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
  info.kind = kind_by_keys(info.type, r.at(4).str(), r.at(5).integer() == 1);
  const auto& e = r.elements();
  for (std::size_t i = 6; i + 2 < e.size(); i += 3)
    info.holders.push_back({e[i].str(), e[i + 1].integer(), detail::decode_holder(e[i + 2].str())});
  return info;
}

// A script's WRONGTYPE verdict ("WRONGTYPE holds a list, not a lock") in words naming the lock.
std::string not_a_lock(const std::string& name, std::string_view verdict) {
  const auto at = verdict.find("holds ");
  return "'" + name + "' " +
         std::string(at == std::string_view::npos ? verdict : verdict.substr(at));
}

const script& lock_info_script() {
  static const script s{std::string(lua::lock_info)};
  return s;
}

const script& force_unlock_script() {
  static const script s{std::string(lua::force_unlock)};
  return s;
}

using info_callback = detail::result_callback<lock_info>;

// RedLock's answers, one per master: the first master's that shows a lock, else the first
// answer; errors only count when no master answered.
call_result<lock_info> first_lock_shown(std::vector<std::pair<std::error_code, reply>>& answers) {
  call_result<lock_info> failure;
  std::optional<lock_info> first;
  for (auto& [ec, r] : answers) {
    if (ec) {
      if (!failure.error) failure = {{}, ec, r.is_error() ? r.str() : ec.message()};
      continue;
    }
    try {
      auto info = parse_snapshot(r);
      if (info.type != lock_type::none) return {std::move(info), {}, {}};
      if (!first) first = std::move(info);
    } catch (const error& e) {
      if (!failure.error) failure = {{}, e.code(), detail::bare_message(e)};
    }
  }
  if (first) return {std::move(*first), {}, {}};
  return failure;
}

// A script that reads or removes one lock, run where the lock is: on every RedLock master (a
// force-unlock must remove it from each).
void snapshot_across(lock_core& core, const script& s, const std::string& name,
                     std::span<const std::string_view> keys, std::span<const std::string_view> args,
                     info_callback done) {
  if (core.topo().nodes_for(name).size() == 1) {
    core.call_async(s, name, keys, args,
                    detail::to_result<lock_info>(parse_snapshot, std::move(done)));
    return;
  }
  core.call_each_async(
      s, name, keys, args,
      [done = std::move(done)](std::vector<std::pair<std::error_code, reply>> all) {
        detail::deliver(done, first_lock_shown(all));
      });
}

lock_info snapshot_across(lock_core& core, const script& s, const std::string& name,
                          std::span<const std::string_view> keys,
                          std::span<const std::string_view> args) {
  return detail::wait_for_result<lock_info>(core.io(), [&](info_callback done) {
    snapshot_across(core, s, name, keys, args, std::move(done));
  });
}

// `info` with its waiters: a fair lock's queue (each waiter listens on its own channel), or the
// clients subscribed to the lock's channel (sharded channels on a cluster, counted on the slot's
// node).
void add_waiters(const std::shared_ptr<detail::lock_handle>& h, lock_info info,
                 info_callback done) {
  const auto& n = *h->names;
  if (h->kind->keeps_waiter_place() && !n.aux_key1.empty() &&
      h->kind->public_type() == lock_type::fair) {
    const std::string_view args[] = {"LRANGE", n.aux_key1, "0", "-1"};
    h->core->command_async(n.aux_key1, args,
                           detail::to_result<lock_info>(
                               [info = std::move(info)](const reply& queue) {
                                 auto out = info;
                                 for (const auto& e : queue.elements())
                                   out.queue.push_back(e.str());
                                 if (out.type == lock_type::reentrant) out.type = lock_type::fair;
                                 out.waiters = static_cast<std::int64_t>(out.queue.size());
                                 return out;
                               },
                               std::move(done)));
    return;
  }
  const std::string_view args[] = {"PUBSUB", h->core->topo().numsub_command(), n.channel};
  h->core->command_async(n.channel, args,
                         detail::to_result<lock_info>(
                             [info = std::move(info)](const reply& numsub) {
                               auto out = info;
                               out.waiters = numsub.at(1).integer();
                               return out;
                             },
                             std::move(done)));
}

void read_info(const std::shared_ptr<detail::lock_handle>& h, info_callback done) {
  const auto& n = *h->names;
  const auto queue = derived_key("redisson_lock_queue", n.name);
  const std::string_view keys[] = {n.name, n.fence_key, queue, n.holder_key};
  const bool records = !h->core->holder_record().empty();
  snapshot_across(*h->core, lock_info_script(), n.name, std::span(keys, records ? 4 : 3), {},
                  [h, done = std::move(done)](call_result<lock_info> r) {
                    if (r.error) return detail::deliver(done, std::move(r));
                    add_waiters(h, std::move(r.value), std::move(done));
                  });
}

void read_is_locked(const std::shared_ptr<detail::lock_handle>& h,
                    detail::result_callback<bool> done) {
  const std::string_view args[] = {"EXISTS", h->names->name};
  h->core->command_async(
      h->names->name, args,
      detail::to_result<bool>([](const reply& r) { return r.integer() == 1; }, std::move(done)));
}

// Deletes the lock whoever holds it (force_unlock.lua judges the key first, and wakes a fair
// lock's first waiter on its own channel whatever kind this lock object is).
void remove_lock(const std::shared_ptr<detail::lock_handle>& h, force_unlock_check check,
                 info_callback done) {
  const auto& n = *h->names;
  const std::string_view confirmed =
      check == force_unlock_check::confirmed_kind ? h->kind->redis_type() : "";
  const auto queue = derived_key("redisson_lock_queue", n.name);
  const auto deadlines = derived_key("redisson_lock_timeout", n.name);
  const std::string_view all_keys[] = {n.name, n.fence_key, n.channel,
                                       queue,  deadlines,   n.holder_key};
  const auto keys = std::span(all_keys, h->core->holder_record().empty() ? 5 : 6);
  const std::string_view args[] = {detail::unlock_message, confirmed,
                                   h->core->topo().publish_command()};
  snapshot_across(*h->core, force_unlock_script(), n.name, keys, args,
                  [h, done = std::move(done)](call_result<lock_info> removed) {
                    if (removed.error == errc::wrong_type) {
                      removed.message = not_a_lock(h->names->name, removed.message);
                    }
                    detail::deliver(done, std::move(removed));
                  });
}

// A call on the lock as a start (one_call.hpp): a closure that holds the lock's handle and
// starts `call(handle, done)`. The blocking form waits for it, the callback form reports through
// `done`, the awaitable starts it when awaited.
template <class T, class Call>
auto on_lock(std::shared_ptr<detail::lock_handle> h, Call call) {
  return [h = std::move(h), call](detail::result_callback<T> done) { call(h, std::move(done)); };
}

auto remove_checking(force_unlock_check check) {
  return [check](const std::shared_ptr<detail::lock_handle>& h, info_callback done) {
    remove_lock(h, check, std::move(done));
  };
}

}  // namespace

bool basic_lock::is_locked() const {
  return detail::wait_for_result<bool>(handle_->core->io(), on_lock<bool>(handle_, read_is_locked));
}

void basic_lock::is_locked_async(std::function<void(call_result<bool>)> done) const noexcept {
  detail::start_or_report<bool>(handle_->core->io(), std::move(done),
                                on_lock<bool>(handle_, read_is_locked));
}

call_awaitable<bool> basic_lock::is_locked_async() const {
  return detail::awaitable_factory::call<bool>(on_lock<bool>(handle_, read_is_locked));
}

lock_info basic_lock::info() const {
  return detail::wait_for_result<lock_info>(handle_->core->io(),
                                            on_lock<lock_info>(handle_, read_info));
}

void basic_lock::info_async(std::function<void(call_result<lock_info>)> done) const noexcept {
  detail::start_or_report<lock_info>(handle_->core->io(), std::move(done),
                                     on_lock<lock_info>(handle_, read_info));
}

call_awaitable<lock_info> basic_lock::info_async() const {
  return detail::awaitable_factory::call<lock_info>(on_lock<lock_info>(handle_, read_info));
}

lock_info basic_lock::force_unlock(force_unlock_check check) const {
  return detail::wait_for_result<lock_info>(handle_->core->io(),
                                            on_lock<lock_info>(handle_, remove_checking(check)));
}

void basic_lock::force_unlock_async(
    force_unlock_check check, std::function<void(call_result<lock_info>)> done) const noexcept {
  detail::start_or_report<lock_info>(handle_->core->io(), std::move(done),
                                     on_lock<lock_info>(handle_, remove_checking(check)));
}

call_awaitable<lock_info> basic_lock::force_unlock_async(force_unlock_check check) const {
  return detail::awaitable_factory::call<lock_info>(
      on_lock<lock_info>(handle_, remove_checking(check)));
}

std::optional<lock_holder> basic_lock::holder() const {
  const auto& n = *handle_->names;
  const auto queue = derived_key("redisson_lock_queue", n.name);
  const std::string_view keys[] = {n.name, n.fence_key, queue};
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

std::vector<std::string> fair_lock::queue() const {
  const auto& key = handle_->names->aux_key1;
  const std::string_view args[] = {"LRANGE", key, "0", "-1"};
  const auto queue = handle_->core->command(key, args);  // outlives the loop
  std::vector<std::string> out;
  for (const auto& e : queue.elements())
    out.push_back(e.str());
  return out;
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
