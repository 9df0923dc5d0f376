// The public lock, lease and client types: thin handles over lock_core.
#include <charconv>
#include <future>

#include "core/one_shot.hpp"
#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/lock.hpp"
#include "locks/lock_core.hpp"

namespace dlock {

using detail::lock_core;
using detail::lock_kind;
using detail::steady;

namespace {

void forbid_io_thread(lock_core& core, const char* what) {
  if (core.io().in_io_thread()) {
    throw error(errc::invalid_argument,
                std::string(what) +
                    " blocks, so it cannot run on the client's I/O thread (inside a callback)");
  }
}

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

}  // namespace

// ---- client ----

client_options client_options::from_url(std::string_view url) {
  client_options o;
  o.connection = connection_options::from_url(url);
  return o;
}

client::client(client_options options) : core_(lock_core::create(std::move(options))) {}
client::client(std::string_view url) : client(client_options::from_url(url)) {}

reentrant_lock client::reentrant(std::string name) const {
  if (name.empty()) throw error(errc::invalid_argument, "lock name is empty");
  return reentrant_lock(core_, std::move(name));
}

simple_lock client::simple(std::string name) const {
  if (name.empty()) throw error(errc::invalid_argument, "lock name is empty");
  return simple_lock(core_, std::move(name));
}

const std::string& client::id() const noexcept {
  return core_->id();
}
redis_client& client::redis() const noexcept {
  return core_->redis();
}
client_stats client::stats() const noexcept {
  return core_->stats();
}
const client_options& client::options() const noexcept {
  return core_->options();
}

// ---- basic_lock ----

basic_lock::basic_lock(std::shared_ptr<lock_core> core, std::string name, kind k)
    : handle_(std::make_shared<detail::lock_handle>()) {
  handle_->core = std::move(core);
  handle_->names = std::make_shared<const detail::lock_names>(
      std::move(name), handle_->core->options().fence_counter);
  handle_->kind = k == kind::reentrant ? lock_kind::reentrant : lock_kind::simple;
}

const std::string& basic_lock::name() const noexcept {
  return handle_->names->name;
}

lease basic_lock::try_acquire_until(steady::time_point deadline, const lease_options& options) {
  auto& core = *handle_->core;
  forbid_io_thread(core, "acquiring a lock synchronously");
  detail::acquire_limits limits;
  limits.deadline = deadline;
  limits.single_attempt = deadline <= steady::now();
  detail::one_shot<acquire_result> result;
  core.acquire(core.make_request(*handle_, options, limits,
                                 [&result](acquire_result r) { result.put(std::move(r)); }));
  auto r = result.take();
  if (r.error) throw error(r.error, r.message);
  return std::move(r.held);
}

lease basic_lock::try_acquire(const lease_options& options) {
  return try_acquire_until(steady::time_point::min(), options);
}

lease basic_lock::try_acquire_for(std::chrono::milliseconds wait, const lease_options& options) {
  if (wait.count() <= 0) return try_acquire(options);
  return try_acquire_until(detail::saturating_add(steady::now(), wait), options);
}

lease basic_lock::acquire(const lease_options& options) {
  return try_acquire_until(steady::time_point::max(), options);
}

void basic_lock::acquire_async(std::chrono::milliseconds wait, acquire_callback done,
                               lease_options options) {
  auto& core = *handle_->core;
  detail::acquire_limits limits;
  const auto now = steady::now();
  limits.single_attempt = wait.count() <= 0;
  limits.deadline = limits.single_attempt ? now : detail::saturating_add(now, wait);
  try {
    core.acquire(core.make_request(*handle_, options, limits, done));
  } catch (const error& e) {
    core.io().post([done = std::move(done), ec = e.code(), what = std::string(e.what())] {
      done({{}, ec, what});
    });
  }
}

std::future<lease> basic_lock::acquire_future(std::chrono::milliseconds wait,
                                              lease_options options) {
  auto result = std::make_shared<std::promise<lease>>();
  auto future = result->get_future();
  acquire_async(
      wait,
      [result](acquire_result r) {
        if (!r.error) {
          result->set_value(std::move(r.held));
          return;
        }
        result->set_exception(std::make_exception_ptr(error(r.error, r.message)));
      },
      std::move(options));
  return future;
}

bool basic_lock::is_locked() const {
  return handle_->core->redis().command({"EXISTS", name()}).integer() == 1;
}

std::optional<lock_holder> basic_lock::holder() const {
  auto& redis = handle_->core->redis();
  if (handle_->kind == lock_kind::simple) {
    const auto r = redis.command({"GET", name()});
    if (r.is_nil()) return std::nullopt;
    return lock_holder{r.str(), 1};
  }
  const auto r = redis.command({"HGETALL", name()});
  if (r.elements().size() < 2) return std::nullopt;
  const auto& count = r.at(1).str();
  std::int64_t holds = 0;
  std::from_chars(count.data(), count.data() + count.size(), holds);
  return lock_holder{r.at(0).str(), holds};
}

std::optional<std::chrono::milliseconds> basic_lock::remaining_ttl() const {
  const auto ms = handle_->core->redis().command({"PTTL", name()}).integer();
  if (ms == -2) return std::nullopt;
  if (ms == -1) return std::chrono::milliseconds::max();
  return std::chrono::milliseconds(ms);
}

std::uint64_t basic_lock::fence() const {
  return parse_u64(handle_->core->redis().command({"GET", handle_->names->fence_key}));
}

std::int64_t basic_lock::waiting_clients() const {
  const auto r = handle_->core->redis().command({"PUBSUB", "NUMSUB", handle_->names->channel});
  return r.at(1).integer();
}

namespace {

// Reads the state array of _snapshot.lua: {type, layout, pttl, fence, owner1, holds1, ...}.
lock_info parse_snapshot(const reply& r) {
  lock_info info;
  const auto& type = r.at(0).str();
  const auto& layout = r.at(1).str();
  const bool lock = layout == "lock" || layout == "lock_no_ttl";
  if (type == "none") {
    info.type = lock_type::none;
  } else if (lock && type == "hash") {
    info.type = lock_type::reentrant;
  } else if (lock && type == "string") {
    info.type = lock_type::simple;
  } else {
    info.type = lock_type::other;
    info.content = layout;
  }
  const auto pttl = r.at(2).integer();
  if (pttl == -1) info.ttl = std::chrono::milliseconds::max();
  if (pttl >= 0) info.ttl = std::chrono::milliseconds(pttl);
  info.fence = parse_u64(r.at(3));
  const auto& e = r.elements();
  for (std::size_t i = 4; i + 1 < e.size(); i += 2) {
    info.holders.push_back({e[i].str(), e[i + 1].integer()});
  }
  return info;
}

// A script's WRONGTYPE verdict ("WRONGTYPE holds a list, not a lock") as an error naming the lock.
[[noreturn]] void throw_not_a_lock(const std::string& name, const error& e) {
  std::string what = e.what();
  if (const auto at = what.find("holds "); at != std::string::npos) what = what.substr(at);
  throw error(errc::wrong_type, "'" + name + "' " + what);
}

}  // namespace

lock_info basic_lock::info() const {
  auto& core = *handle_->core;
  const auto& n = *handle_->names;
  auto info = parse_snapshot(core.redis().eval(core.lock_info, {n.name, n.fence_key}, {}));
  info.waiters = waiting_clients();
  return info;
}

lock_info basic_lock::force_unlock(force_unlock_check check) const {
  auto& core = *handle_->core;
  const auto& n = *handle_->names;
  const std::string_view confirmed = check == force_unlock_check::layout_and_expiry ? ""
                                     : handle_->kind == lock_kind::reentrant        ? "hash"
                                                                                    : "string";
  try {
    return parse_snapshot(core.redis().eval(core.force_unlock, {n.name, n.fence_key, n.channel},
                                            {detail::unlock_message, confirmed}));
  } catch (const error& e) {
    if (e.code() == errc::wrong_type) throw_not_a_lock(name(), e);
    throw;
  }
}

// ---- Lockable ----

bool basic_lock::keep(lease l) {
  if (!l) return false;
  std::lock_guard lock(handle_->mutex);
  handle_->holds_by_thread[detail::current_thread_number()].push_back(std::move(l));
  return true;
}

void basic_lock::lock() {
  keep(acquire());
}

bool basic_lock::try_lock() {
  return keep(try_acquire());
}

void basic_lock::unlock() noexcept {
  lease l;
  {
    std::lock_guard lock(handle_->mutex);
    auto it = handle_->holds_by_thread.find(detail::current_thread_number());
    if (it == handle_->holds_by_thread.end() || it->second.empty()) {
      handle_->core->counters.release_failures.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    l = std::move(it->second.back());
    it->second.pop_back();
    if (it->second.empty()) handle_->holds_by_thread.erase(it);
  }
  l.release();
}

std::size_t basic_lock::local_holds() const noexcept {
  std::lock_guard lock(handle_->mutex);
  auto it = handle_->holds_by_thread.find(detail::current_thread_number());
  return it == handle_->holds_by_thread.end() ? 0 : it->second.size();
}

// ---- reentrant_lock ----

std::int64_t reentrant_lock::hold_count(const std::string& owner) const {
  auto& core = *handle_->core;
  const auto r = core.redis().command({"HGET", name(), core.id() + ":" + owner});
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

// ---- lease ----

lease& lease::operator=(lease&& other) noexcept {
  if (this != &other) {
    release();
    state_ = std::move(other.state_);
  }
  return *this;
}

lease::~lease() {
  release();
}

bool lease::release() noexcept {
  return release_checked() == release_outcome::released;
}

release_outcome lease::release_checked() noexcept {
  if (!state_) return release_outcome::not_held;
  auto s = std::move(state_);
  return s->core->release(*s);
}

void lease::release_async(std::function<void(bool)> done) noexcept {
  if (!state_) {
    if (done) {
      try {
        done(false);
      } catch (...) {
      }
    }
    return;
  }
  auto s = std::move(state_);
  if (!done) {
    s->core->release_async(*s, nullptr);
    return;
  }
  s->core->release_async(
      *s, [done = std::move(done)](release_outcome o) { done(o == release_outcome::released); });
}

bool lease::valid() const noexcept {
  if (!state_) return false;
  return state_->core->with_grant(
      *state_->g, [](const detail::grant& g) { return !g.lost && steady::now() < g.valid_until; });
}

std::stop_token lease::stop_token() const noexcept {
  return state_ ? state_->g->stop.get_token() : std::stop_token{};
}

std::optional<lease_lost_reason> lease::lost_reason() const noexcept {
  if (!state_) return std::nullopt;
  return state_->core->with_grant(*state_->g, [](const detail::grant& g) { return g.lost; });
}

std::uint64_t lease::fence() const noexcept {
  return state_ ? state_->g->fence : 0;
}

const std::string& lease::name() const noexcept {
  static const std::string empty;
  return state_ ? state_->g->names->name : empty;
}

steady::time_point lease::valid_until() const noexcept {
  if (!state_) return {};
  return state_->core->with_grant(*state_->g, [](const detail::grant& g) { return g.valid_until; });
}

bool lease::watchdog() const noexcept {
  return state_ && state_->g->watchdog;
}

bool lease::extend(std::chrono::milliseconds lease_time) {
  if (!state_) throw error(errc::lease_lost, "extend: the lease holds nothing");
  forbid_io_thread(*state_->core, "lease::extend");
  return state_->core->extend(*state_, lease_time);
}

}  // namespace dlock
