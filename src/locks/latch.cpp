// The countdown latch (Redisson's RCountDownLatch layout): its count under NAME, its channel
// `redisson_countdownlatch__channel__{NAME}`. Every change and every read is one script
// (latch_set.lua, latch_down.lua), which refuses a name holding anything but a count. A wait is
// a subscription, a re-check timer and a deadline on the I/O thread; it does not keep the client
// open: the client's teardown ends it with client_closed (lock_core::on_close).
#include "dlock/latch.hpp"

#include <asio/steady_timer.hpp>
#include <charconv>

#include "core/one_shot.hpp"
#include "core/user_callback.hpp"
#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock_lua_scripts.hpp"
#include "locks/acquire_machine.hpp"
#include "locks/awaitable_factory.hpp"
#include "locks/lock_core.hpp"
#include "locks/one_call.hpp"

namespace dlock {

using detail::lock_core;
using detail::steady;

namespace {

// As Redisson derives it: always braced, whatever the name holds (braces included).
std::string channel_of(const std::string& name) {
  return "redisson_countdownlatch__channel__{" + name + "}";
}

const script& set_script() {
  static const script s{std::string(lua::latch_set)};
  return s;
}
const script& down_script() {
  static const script s{std::string(lua::latch_down)};
  return s;
}

// An error about the latch `name` from a call that failed with `ec`; `text` is the server's
// reply, or empty. The scripts' verdict "WRONGTYPE holds a list, not a count" reads as "latch
// 'NAME' holds a list, not a count".
error latch_error(const std::string& name, std::error_code ec, std::string_view text) {
  if (ec == errc::wrong_type) {
    if (const auto at = text.find("holds "); at != std::string_view::npos) {
      return error(ec, "latch '" + name + "' " + std::string(text.substr(at)));
    }
  }
  return error(ec, "latch '" + name + "': " + (text.empty() ? ec.message() : std::string(text)));
}

// The count a 'read' returned (nil: no latch, 0). The script has checked it is an integer.
std::int64_t count_of(const std::string& name, const reply& r) {
  if (r.is_nil()) return 0;
  std::int64_t v = 0;
  const auto& s = r.str();
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) {
    throw error(errc::wrong_type, "latch '" + name + "' holds a string that is not a count");
  }
  return v;
}

// One wait, confined to the I/O thread from `start` on. It ends exactly once: reached (the "0"
// message, or a check that finds no count), not reached (the deadline), failed (an error waiting
// cannot fix), cancelled (its acquire_handle), or closed (the client's teardown runs our on_close
// registration).
class latch_wait : public detail::cancellable {
 public:
  // `core` stays valid while the wait is unfinished: the core's destructor finishes it first
  // (on_close), and every handler here looks at `finished_` before touching the core.
  latch_wait(lock_core& core, std::string name, std::function<void(latch_wait_result)> done,
             steady::time_point deadline)
      : core_(core),
        name_(std::move(name)),
        channel_(channel_of(name_)),
        done_(std::move(done)),
        deadline_(deadline),
        recheck_(core.io().context()),
        expiry_(core.io().context()) {}

  // I/O thread, while the caller holds the core. `once`: a single check, no subscription.
  void start(bool once) {
    if (finished_) return;  // cancelled before it started
    closer_ = core_.on_close([self = self()] {
      self->finish({false, errc::client_closed,
                    "waiting for latch '" + self->name_ + "': the client was closed"});
    });
    if (once) {
      check(true);
      return;
    }
    auto& topo = core_.topo();
    std::weak_ptr<latch_wait> weak = self();
    subscription_ = topo.subscribe(
        topo.nodes_for(channel_).front(), channel_,
        [weak](std::string_view, std::string_view message) {
          // "1" (a new count was set) changes nothing for a waiter; "0" is the count reaching 0.
          auto self = weak.lock();
          if (self && message == "0") self->finish({true, {}, {}});
        },
        [weak] {
          // Confirmed (at first and after every reconnect): a count-down before it went unheard.
          if (auto self = weak.lock(); self && !self->finished_) self->check(false);
        });
    subscribed_ = true;
    // A latch that has already reached 0 ends the wait without waiting for the subscription.
    check(false);
    if (deadline_ != steady::time_point::max()) {
      expiry_.expires_at(deadline_);
      expiry_.async_wait([self = self()](std::error_code ec) {
        if (!ec) self->finish({});
      });
    }
    arm_recheck();
  }

  void cancel() override {
    finish({false, errc::cancelled, "waiting for latch '" + name_ + "': cancelled"});
  }

 private:
  std::shared_ptr<latch_wait> self() {
    return std::static_pointer_cast<latch_wait>(shared_from_this());
  }

  // A message can be lost (a reconnect, a server that drops pub/sub output): read the count
  // every max_recheck whatever happens.
  void arm_recheck() {
    recheck_.expires_after(core_.options().max_recheck);
    recheck_.async_wait([self = self()](std::error_code ec) {
      if (ec || self->finished_) return;
      self->check(false);
      self->arm_recheck();
    });
  }

  // Reads the count; `last`: a single check, which ends the wait either way.
  void check(bool last) {
    auto& topo = core_.topo();
    const std::string_view keys[] = {name_, channel_};
    const std::string_view args[] = {topo.publish_command(), "read"};
    topo.eval(topo.nodes_for(name_).front(), down_script(), keys, args,
              steady::now() + core_.options().connection.command_timeout,
              detail::durability::master,
              [self = self(), last](std::error_code ec, reply r) { self->on_count(last, ec, r); });
  }

  void on_count(bool last, std::error_code ec, const reply& r) {
    if (finished_) return;
    if (ec) {
      // A wait rides out what passes (a reconnect, a loading server): the next check tries
      // again, and the deadline bounds it.
      const bool passing =
          ec == errc::timeout || ec == errc::connection_lost || ec == errc::server_busy;
      if (passing && !last) return;
      finish(
          {false, ec, detail::bare_message(latch_error(name_, ec, r.is_error() ? r.str() : ""))});
      return;
    }
    try {
      if (count_of(name_, r) <= 0) {
        finish({true, {}, {}});
      } else if (last) {
        finish({});
      }
    } catch (const error& e) {
      finish({false, e.code(), detail::bare_message(e)});
    }
  }

  void finish(latch_wait_result result) {
    if (std::exchange(finished_, true)) return;
    const auto keep = self();  // forget_close may drop the last other reference
    recheck_.cancel();
    expiry_.cancel();
    if (subscribed_) core_.topo().unsubscribe(subscription_);
    core_.forget_close(closer_);
    auto done = std::move(done_);
    done_ = nullptr;
    detail::call_user(done, std::move(result));
  }

  lock_core& core_;
  const std::string name_, channel_;
  std::function<void(latch_wait_result)> done_;
  const steady::time_point deadline_;
  asio::steady_timer recheck_, expiry_;
  std::uint64_t subscription_ = 0, closer_ = 0;
  bool subscribed_ = false, finished_ = false;
};

// The latch needs its count and its channel on one node (one script touches both); refuses
// what cannot give it that.
void check_topology(lock_core& core, const std::string& name) {
  if (!core.options().redlock.masters.empty()) {
    throw error(errc::invalid_argument,
                "a latch cannot run over RedLock's independent masters; use a standalone, "
                "Sentinel or cluster deployment");
  }
  auto& topo = core.topo();
  const auto node = topo.nodes_for(name).front();
  if (!detail::one_script_reaches(topo.route_of(node, name),
                                  topo.route_of(node, channel_of(name)))) {
    throw error(errc::invalid_argument, "latch '" + name +
                                            "': its name and its channel fall in different "
                                            "cluster slots (a name with '{')");
  }
}

// One script call about the latch; `done` gets `value(reply)` or the error, in the latch's
// words. Throws errc::invalid_argument (check_topology), having sent nothing.
template <class T, class Value>
void run_async(lock_core& core, const std::string& name, const script& s, std::string_view arg1,
               std::string_view arg2, Value value, detail::result_callback<T> done) {
  check_topology(core, name);
  const std::string channel = channel_of(name);
  const std::string_view keys[] = {name, channel};
  const std::string_view args[] = {arg1, arg2};
  core.call_async(
      s, name, keys, args,
      detail::to_result<T>(std::move(value), [name, done = std::move(done)](call_result<T> r) {
        if (r.error) {
          r.message = detail::bare_message(latch_error(name, r.error, r.message));
        }
        detail::deliver(done, std::move(r));
      }));
}

// The script's integer reply; the count a 'read' returned.
auto integer_of(const reply& r) {
  return r.integer();
}
auto count_in(const std::string& name) {
  return [name](const reply& r) { return count_of(name, r); };
}

// A count-down: the count left (0 once reached).
void count_down_on(lock_core& core, const std::string& name,
                   detail::result_callback<std::int64_t> done) {
  run_async<std::int64_t>(core, name, down_script(), core.topo().publish_command(), "one",
                          integer_of, std::move(done));
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
  run_async<std::int64_t>(core, name, down_script(), core.topo().publish_command(), "read",
                          count_in(name), std::move(done));
}

// Deletes the latch, waking its waiters: whether it existed.
void remove_on(lock_core& core, const std::string& name, detail::result_callback<bool> done) {
  run_async<bool>(
      core, name, down_script(), core.topo().publish_command(), "all",
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

acquire_handle countdown_latch::wait_async(std::chrono::milliseconds wait,
                                           std::function<void(latch_wait_result)> done) const {
  const auto now = steady::now();
  const bool once = wait.count() <= 0;
  const auto deadline = once ? now : detail::saturating_add(now, wait);
  try {
    check_topology(*core_, name_);
  } catch (const error& e) {
    core_->io().post(
        [core = core_, done = std::move(done), ec = e.code(), what = detail::bare_message(e)] {
          detail::call_user(done, latch_wait_result{false, ec, what});
        });
    return {};
  }
  // Made here, so that the handle can reach it; it starts on the I/O thread, where a cancel
  // posted through the handle can only come after the start. The posted start holds the core
  // until the wait has registered with it (on_close): a client whose last handle goes meanwhile
  // still ends the wait, with client_closed.
  auto w = std::make_shared<latch_wait>(*core_, name_, std::move(done), deadline);
  core_->io().post([core = core_, w, once] { w->start(once); });
  return core_->handle_for(w);
}

call_awaitable<bool> countdown_latch::wait_async(std::chrono::milliseconds wait) const {
  return wait_async(wait, std::stop_token{});
}

call_awaitable<bool> countdown_latch::wait_async(std::chrono::milliseconds wait,
                                                 std::stop_token cancel) const {
  return detail::awaitable_factory::call<bool>(
      [latch = *this, wait](detail::result_callback<bool> done) {
        return latch.wait_async(wait, [done = std::move(done)](latch_wait_result r) {
          done({r.reached, r.error, std::move(r.message)});
        });
      },
      std::move(cancel));
}

bool countdown_latch::wait_for(std::chrono::milliseconds wait) const {
  core_->io().refuse_blocking("waiting for a latch", "use wait_async there");
  detail::one_shot<latch_wait_result> result;
  wait_async(wait, [&result](latch_wait_result r) { result.put(std::move(r)); });
  auto r = result.take();
  if (r.error) throw error(r.error, r.message);
  return r.reached;
}

void countdown_latch::wait() const {
  wait_for(std::chrono::milliseconds::max());
}

countdown_latch client::latch(std::string name) const {
  if (name.empty()) throw error(errc::invalid_argument, "latch name is empty");
  return countdown_latch(core_, std::move(name));
}

}  // namespace dlock
