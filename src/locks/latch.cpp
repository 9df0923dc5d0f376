// The countdown latch (Redisson's RCountDownLatch layout): its count under NAME, its channel
// `redisson_countdownlatch__channel__{NAME}`. Changes are scripts (latch_set.lua,
// latch_down.lua); a wait is a subscription, a re-check timer and a deadline, on the I/O thread.
#include "dlock/latch.hpp"

#include <asio/steady_timer.hpp>
#include <charconv>

#include "core/one_shot.hpp"
#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock_lua_scripts.hpp"
#include "locks/acquire_machine.hpp"
#include "locks/lock_core.hpp"

namespace dlock {

using detail::lock_core;
using detail::steady;

namespace {

std::string channel_of(const std::string& name) {
  return "redisson_countdownlatch__channel__{" + name + "}";
}

// The count a GET returned: 0 when the latch does not exist.
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

// One wait, on the I/O thread: reached on the "0" message or a check that finds no count;
// not reached at the deadline. It holds the client open until it ends.
struct latch_wait : std::enable_shared_from_this<latch_wait> {
  latch_wait(std::shared_ptr<lock_core> c, std::string n, std::function<void(latch_wait_result)> d,
             steady::time_point until)
      : core(std::move(c)),
        name(std::move(n)),
        channel(channel_of(name)),
        done(std::move(d)),
        deadline(until),
        recheck(core->io().context()),
        expiry(core->io().context()) {}

  std::shared_ptr<lock_core> core;
  const std::string name, channel;
  std::function<void(latch_wait_result)> done;
  const steady::time_point deadline;
  asio::steady_timer recheck, expiry;
  std::uint64_t subscription = 0;
  bool finished = false;

  void start(bool once) {
    if (once) {
      check(true);
      return;
    }
    auto& topo = core->topo();
    std::weak_ptr<latch_wait> weak = weak_from_this();
    subscription = topo.subscribe(
        topo.nodes_for(channel).front(), channel,
        [weak](std::string_view, std::string_view message) {
          auto self = weak.lock();
          if (self && message == "0") self->finish({true, {}, {}});
        },
        [weak] {
          if (auto self = weak.lock()) self->check(false);  // a count-down may have been missed
        });
    if (deadline != steady::time_point::max()) {
      expiry.expires_at(deadline);
      expiry.async_wait([self = shared_from_this()](std::error_code ec) {
        if (!ec) self->finish({});
      });
    }
    arm_recheck();
  }

  void arm_recheck() {
    recheck.expires_after(core->options().max_recheck);
    recheck.async_wait([self = shared_from_this()](std::error_code ec) {
      if (ec || self->finished) return;
      self->check(false);
      self->arm_recheck();
    });
  }

  // Reads the count; `last`: a single check, which ends the wait either way.
  void check(bool last) {
    const std::string_view args[] = {"GET", name};
    core->topo().command(name, args, steady::now() + core->options().connection.command_timeout,
                         [self = shared_from_this(), last](std::error_code ec, reply r) {
                           if (self->finished) return;
                           if (ec) {
                             // A wait rides out what passes (a reconnect, a loading server):
                             // the next check tries again.
                             const bool passing = ec == errc::timeout ||
                                                  ec == errc::connection_lost ||
                                                  ec == errc::server_busy;
                             if (passing && !last) return;
                             self->finish({false, ec, r.is_error() ? r.str() : ec.message()});
                             return;
                           }
                           try {
                             if (count_of(self->name, r) <= 0) {
                               self->finish({true, {}, {}});
                             } else if (last) {
                               self->finish({});
                             }
                           } catch (const error& e) {
                             self->finish({false, e.code(), e.what()});
                           }
                         });
  }

  void finish(latch_wait_result result) {
    if (std::exchange(finished, true)) return;
    recheck.cancel();
    expiry.cancel();
    if (subscription != 0) core->topo().unsubscribe(subscription);
    try {
      done(std::move(result));
    } catch (...) {
      // User callbacks run on the I/O thread; nothing may escape into it.
    }
    done = nullptr;
  }
};

const script& set_script() {
  static const script s{std::string(lua::latch_set)};
  return s;
}
const script& down_script() {
  static const script s{std::string(lua::latch_down)};
  return s;
}

void check_topology(lock_core& core, const std::string& name) {
  if (!core.options().redlock.masters.empty()) {
    throw error(errc::invalid_argument,
                "a latch cannot run over RedLock's independent masters; use a standalone, "
                "Sentinel or cluster deployment");
  }
  if (core.topo().route_of(core.topo().nodes_for(name).front(), name) !=
      core.topo().route_of(core.topo().nodes_for(name).front(), channel_of(name))) {
    throw error(errc::invalid_argument, "latch '" + name +
                                            "': its name and its channel fall in different "
                                            "cluster slots (a name with '{')");
  }
}

}  // namespace

countdown_latch::countdown_latch(std::shared_ptr<lock_core> core, std::string name)
    : core_(std::move(core)), name_(std::move(name)) {}

bool countdown_latch::try_set_count(std::int64_t count) {
  if (count < 1) throw error(errc::invalid_argument, "a latch's count must be at least 1");
  check_topology(*core_, name_);
  const std::string value = std::to_string(count);
  const std::string channel = channel_of(name_);
  const std::string_view keys[] = {name_, channel};
  const std::string_view args[] = {value, core_->topo().publish_command()};
  return core_->call(set_script(), name_, keys, args).integer() == 1;
}

void countdown_latch::count_down() {
  check_topology(*core_, name_);
  const std::string channel = channel_of(name_);
  const std::string_view keys[] = {name_, channel};
  const std::string_view args[] = {core_->topo().publish_command(), "one"};
  core_->call(down_script(), name_, keys, args);
}

bool countdown_latch::remove() {
  check_topology(*core_, name_);
  const std::string channel = channel_of(name_);
  const std::string_view keys[] = {name_, channel};
  const std::string_view args[] = {core_->topo().publish_command(), "all"};
  return core_->call(down_script(), name_, keys, args).integer() == 0;
}

std::int64_t countdown_latch::count() const {
  const std::string_view args[] = {"GET", name_};
  return count_of(name_, core_->command(name_, args));
}

void countdown_latch::wait_async(std::chrono::milliseconds wait,
                                 std::function<void(latch_wait_result)> done) const {
  const auto now = steady::now();
  const bool once = wait.count() <= 0;
  try {
    check_topology(*core_, name_);
  } catch (const error& e) {
    core_->io().post([done = std::move(done), ec = e.code(), what = std::string(e.what())] {
      done({false, ec, what});
    });
    return;
  }
  auto w = std::make_shared<latch_wait>(core_, name_, std::move(done),
                                        once ? now : detail::saturating_add(now, wait));
  core_->io().post([w, once] { w->start(once); });
}

bool countdown_latch::wait_for(std::chrono::milliseconds wait) const {
  if (core_->io().in_io_thread()) {
    throw error(errc::invalid_argument,
                "waiting for a latch blocks, so it cannot run on the client's I/O thread");
  }
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
