// The countdown latch (Redisson's RCountDownLatch layout): its count under NAME, its channel
// `redisson_countdownlatch__channel__{NAME}`. Every change and every read is one script
// (latch_set.lua, latch_down.lua), which refuses a name holding anything but a count; this file
// has those calls, latch_wait.cpp the wait for the count to reach 0.
#include "dlock/latch.hpp"

#include <charconv>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock_lua_scripts.hpp"
#include "locks/api/latch_protocol.hpp"
#include "locks/async/awaitable_factory.hpp"
#include "locks/async/one_call.hpp"
#include "locks/runtime/lock_core.hpp"

namespace dlock {

using detail::lock_core;

namespace detail {

std::string latch_channel(const std::string& name) {
  return "redisson_countdownlatch__channel__{" + name + "}";
}

const script& latch_down_script() {
  static const script s{std::string(lua::latch_down)};
  return s;
}

dlock::error latch_error(const std::string& name, std::error_code ec, std::string_view text) {
  if (ec == errc::wrong_type) {
    if (const auto at = text.find("holds "); at != std::string_view::npos) {
      return dlock::error(ec, "latch '" + name + "' " + std::string(text.substr(at)));
    }
  }
  return dlock::error(ec,
                      "latch '" + name + "': " + (text.empty() ? ec.message() : std::string(text)));
}

std::int64_t latch_count(const std::string& name, const reply& r) {
  if (r.is_nil()) return 0;
  std::int64_t v = 0;
  const auto& s = r.str();
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) {
    throw dlock::error(errc::wrong_type, "latch '" + name + "' holds a string that is not a count");
  }
  return v;
}

void check_latch_topology(lock_core& core, const std::string& name) {
  if (!core.options().redlock.masters.empty()) {
    throw dlock::error(errc::invalid_argument,
                       "a latch cannot run over RedLock's independent masters; use a standalone, "
                       "Sentinel or cluster deployment");
  }
  auto& topo = core.topo();
  const auto node = topo.nodes_for(name).front();
  if (!one_script_reaches(topo.route_of(node, name), topo.route_of(node, latch_channel(name)))) {
    throw dlock::error(errc::invalid_argument, "latch '" + name +
                                                   "': its name and its channel fall in different "
                                                   "cluster slots (a name with '{')");
  }
}

}  // namespace detail

namespace {

const script& set_script() {
  static const script s{std::string(lua::latch_set)};
  return s;
}

// One script call about the latch; `done` gets `value(reply)` or the error, in the latch's
// words. Throws errc::invalid_argument (check_latch_topology), having sent nothing.
template <class T, class Value>
void run_async(lock_core& core, const std::string& name, const script& s, std::string_view arg1,
               std::string_view arg2, Value value, detail::result_callback<T> done) {
  detail::check_latch_topology(core, name);
  const std::string channel = detail::latch_channel(name);
  const std::string_view keys[] = {name, channel};
  const std::string_view args[] = {arg1, arg2};
  core.call_async(
      s, name, keys, args,
      detail::to_result<T>(std::move(value), [name, done = std::move(done)](call_result<T> r) {
        if (r.error) {
          r.message = detail::bare_message(detail::latch_error(name, r.error, r.message));
        }
        detail::deliver(done, std::move(r));
      }));
}

// The script's integer reply; the count a 'read' returned.
auto integer_of(const reply& r) {
  return r.integer();
}
auto count_in(const std::string& name) {
  return [name](const reply& r) { return detail::latch_count(name, r); };
}

// A count-down: the count left (0 once reached).
void count_down_on(lock_core& core, const std::string& name,
                   detail::result_callback<std::int64_t> done) {
  run_async<std::int64_t>(core, name, detail::latch_down_script(), core.topo().publish_command(),
                          "one", integer_of, std::move(done));
}

// Sets the count if the latch does not exist: whether it did. Throws errc::invalid_argument for
// a count below 1, having sent nothing.
void set_count_on(lock_core& core, const std::string& name, std::int64_t count,
                  detail::result_callback<bool> done) {
  if (count < 1) throw error(errc::invalid_argument, "a latch's count must be at least 1");
  const std::string value = std::to_string(count);
  // latch_set.lua takes the count first, the publish command second.
  run_async<bool>(
      core, name, set_script(), value, core.topo().publish_command(),
      [](const reply& r) { return r.integer() == 1; }, std::move(done));
}

void read_count_on(lock_core& core, const std::string& name,
                   detail::result_callback<std::int64_t> done) {
  run_async<std::int64_t>(core, name, detail::latch_down_script(), core.topo().publish_command(),
                          "read", count_in(name), std::move(done));
}

// Deletes the latch, waking its waiters: whether it existed.
void remove_on(lock_core& core, const std::string& name, detail::result_callback<bool> done) {
  run_async<bool>(
      core, name, detail::latch_down_script(), core.topo().publish_command(), "all",
      [](const reply& r) { return r.integer() == 1; }, std::move(done));
}

// A call on the latch as a start (one_call.hpp): a closure that holds the latch's core and name
// and starts `call(core, name, done)`, which may throw dlock::error, having sent nothing. The
// blocking form waits for it, the callback form reports through `done`, the awaitable starts
// it when awaited.
template <class T, class Call>
auto on_latch(std::shared_ptr<lock_core> core, std::string name, Call call) {
  return [core = std::move(core), name = std::move(name), call](detail::result_callback<T> done) {
    call(*core, name, std::move(done));
  };
}

auto set_count_to(std::int64_t count) {
  return [count](lock_core& core, const std::string& name, detail::result_callback<bool> done) {
    set_count_on(core, name, count, std::move(done));
  };
}

}  // namespace

countdown_latch::countdown_latch(std::shared_ptr<lock_core> core, std::string name)
    : core_(std::move(core)), name_(std::move(name)) {}

bool countdown_latch::try_set_count(std::int64_t count) {
  return detail::wait_for_result<bool>(core_->io(),
                                       on_latch<bool>(core_, name_, set_count_to(count)));
}

void countdown_latch::try_set_count_async(
    std::int64_t count, std::function<void(call_result<bool>)> done) const noexcept {
  detail::start_or_report<bool>(core_->io(), std::move(done),
                                on_latch<bool>(core_, name_, set_count_to(count)));
}

call_awaitable<bool> countdown_latch::try_set_count_async(std::int64_t count) const {
  return detail::awaitable_factory::call<bool>(on_latch<bool>(core_, name_, set_count_to(count)));
}

void countdown_latch::count_down() {
  detail::wait_for_result<std::int64_t>(core_->io(),
                                        on_latch<std::int64_t>(core_, name_, count_down_on));
}

void countdown_latch::count_down_async(
    std::function<void(call_result<std::int64_t>)> done) const noexcept {
  detail::start_or_report<std::int64_t>(core_->io(), std::move(done),
                                        on_latch<std::int64_t>(core_, name_, count_down_on));
}

call_awaitable<std::int64_t> countdown_latch::count_down_async() const {
  return detail::awaitable_factory::call<std::int64_t>(
      on_latch<std::int64_t>(core_, name_, count_down_on));
}

std::int64_t countdown_latch::count() const {
  return detail::wait_for_result<std::int64_t>(core_->io(),
                                               on_latch<std::int64_t>(core_, name_, read_count_on));
}

void countdown_latch::count_async(
    std::function<void(call_result<std::int64_t>)> done) const noexcept {
  detail::start_or_report<std::int64_t>(core_->io(), std::move(done),
                                        on_latch<std::int64_t>(core_, name_, read_count_on));
}

call_awaitable<std::int64_t> countdown_latch::count_async() const {
  return detail::awaitable_factory::call<std::int64_t>(
      on_latch<std::int64_t>(core_, name_, read_count_on));
}

bool countdown_latch::remove() {
  return detail::wait_for_result<bool>(core_->io(), on_latch<bool>(core_, name_, remove_on));
}

void countdown_latch::remove_async(std::function<void(call_result<bool>)> done) const noexcept {
  detail::start_or_report<bool>(core_->io(), std::move(done),
                                on_latch<bool>(core_, name_, remove_on));
}

call_awaitable<bool> countdown_latch::remove_async() const {
  return detail::awaitable_factory::call<bool>(on_latch<bool>(core_, name_, remove_on));
}

}  // namespace dlock
