// A countdown latch's wait: a subscription to its channel, a re-check timer and a deadline on the
// I/O thread. It does not keep the client open: the client's teardown ends it with client_closed
// (lock_core::on_close).
#include <asio/steady_timer.hpp>

#include "core/one_shot.hpp"
#include "core/user_callback.hpp"
#include "dlock/error.hpp"
#include "dlock/latch.hpp"
#include "locks/api/latch_protocol.hpp"
#include "locks/async/awaitable_factory.hpp"
#include "locks/async/one_call.hpp"
#include "locks/runtime/lock_core.hpp"
#include "locks/sansio/attempt_timing.hpp"

namespace dlock {

using detail::lock_core;
using detail::steady;

namespace {

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
        channel_(detail::latch_channel(name_)),
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
    topo.eval(topo.nodes_for(name_).front(), detail::latch_down_script(), keys, args,
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
      finish({false, ec,
              detail::bare_message(detail::latch_error(name_, ec, r.is_error() ? r.str() : ""))});
      return;
    }
    try {
      if (detail::latch_count(name_, r) <= 0) {
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

}  // namespace

acquire_handle countdown_latch::wait_async(std::chrono::milliseconds wait,
                                           std::function<void(latch_wait_result)> done) const {
  const auto now = steady::now();
  const bool once = wait.count() <= 0;
  const auto deadline = once ? now : detail::saturating_add(now, wait);
  try {
    detail::check_latch_topology(*core_, name_);
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

}  // namespace dlock
