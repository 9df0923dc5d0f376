// dlock::lease: one hold of a grant, over the lock core and its grant registry.
#include "dlock/lease.hpp"

#include "core/user_callback.hpp"
#include "dlock/error.hpp"
#include "locks/async/awaitable_factory.hpp"
#include "locks/async/one_call.hpp"
#include "locks/runtime/lock_core.hpp"

namespace dlock {

using detail::steady;

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
    detail::call_user(done, false);
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
  return state_ && state_->core->grants().valid(*state_->g, steady::now());
}

std::stop_token lease::stop_token() const noexcept {
  return state_ ? state_->g->stop.get_token() : std::stop_token{};
}

std::optional<lease_lost_reason> lease::lost_reason() const noexcept {
  if (!state_) return std::nullopt;
  return state_->core->grants().lost_reason(*state_->g);
}

std::uint64_t lease::fence() const noexcept {
  return state_ ? state_->g->fence : 0;
}

const std::string& lease::name() const noexcept {
  static const std::string empty;
  return state_ ? state_->g->names->name : empty;
}

std::string lease::permit_id() const {
  return state_ ? state_->g->kind.permit_id(state_->g->owner) : std::string();
}

std::int64_t lease::permits() const noexcept {
  return state_ ? state_->g->permits : 0;
}

steady::time_point lease::valid_until() const noexcept {
  if (!state_) return {};
  return state_->core->grants().valid_until(*state_->g);
}

bool lease::watchdog() const noexcept {
  return state_ && state_->g->watchdog;
}

bool lease::extend(std::chrono::milliseconds lease_time) {
  if (!state_) throw error(errc::lease_lost, "extend: the lease holds nothing");
  state_->core->io().refuse_blocking("lease::extend", "use extend_async there");
  return state_->core->extend(*state_, lease_time);
}

void lease::extend_async(std::chrono::milliseconds lease_time,
                         std::function<void(call_result<bool>)> done) noexcept {
  if (!state_) {
    // No client to report through: at once, here.
    detail::deliver<bool>(
        done, {false, make_error_code(errc::lease_lost), "extend: the lease holds nothing"});
    return;
  }
  detail::start_or_report<bool>(state_->core->io(), std::move(done),
                                [&](detail::result_callback<bool> d) {
                                  state_->core->extend_async(state_->g, lease_time, d);
                                });
}

call_awaitable<bool> lease::extend_async(std::chrono::milliseconds lease_time) {
  // The hold, weakly: a lease released before the co_await has nothing to extend.
  return detail::awaitable_factory::call<bool>(
      [hold = std::weak_ptr(state_), lease_time](detail::result_callback<bool> done) {
        const auto s = hold.lock();
        if (!s) throw error(errc::lease_lost, "extend: the lease holds nothing");
        s->core->extend_async(s->g, lease_time, done);
      });
}

std::vector<reply> lease::write_while_held(const std::vector<std::vector<std::string>>& writes) {
  if (!state_) throw error(errc::lease_lost, "write_while_held: the lease holds nothing");
  return detail::wait_for_result<std::vector<reply>>(
      state_->core->io(), [&](detail::result_callback<std::vector<reply>> done) {
        state_->core->write_under_hold(*state_, writes, false, done);
      });
}

void lease::write_while_held_async(
    std::vector<std::vector<std::string>> writes,
    std::function<void(call_result<std::vector<reply>>)> done) noexcept {
  if (!state_) {
    detail::deliver<std::vector<reply>>(
        done, {{}, make_error_code(errc::lease_lost), "write_while_held: the lease holds nothing"});
    return;
  }
  detail::start_or_report<std::vector<reply>>(
      state_->core->io(), std::move(done), [&](detail::result_callback<std::vector<reply>> d) {
        state_->core->write_under_hold(*state_, writes, false, d);
      });
}

call_awaitable<std::vector<reply>> lease::write_while_held_async(
    std::vector<std::vector<std::string>> writes) {
  // The hold, weakly: a lease released before the co_await has nothing to write under.
  return detail::awaitable_factory::call<std::vector<reply>>(
      [hold = std::weak_ptr(state_),
       writes = std::move(writes)](detail::result_callback<std::vector<reply>> done) {
        const auto s = hold.lock();
        if (!s) throw error(errc::lease_lost, "write_while_held: the lease holds nothing");
        s->core->write_under_hold(*s, writes, false, done);
      });
}

std::vector<reply> lease::write_and_release(const std::vector<std::vector<std::string>>& writes) {
  if (!state_) throw error(errc::lease_lost, "write_and_release: the lease holds nothing");
  const auto s = state_;
  return detail::wait_for_result<std::vector<reply>>(
      s->core->io(), [&](detail::result_callback<std::vector<reply>> done) {
        s->core->write_under_hold(*s, writes, true, done);
        state_.reset();  // the call released it
      });
}

void lease::write_and_release_async(
    std::vector<std::vector<std::string>> writes,
    std::function<void(call_result<std::vector<reply>>)> done) noexcept {
  if (!state_) {
    detail::deliver<std::vector<reply>>(
        done,
        {{}, make_error_code(errc::lease_lost), "write_and_release: the lease holds nothing"});
    return;
  }
  const auto s = state_;
  detail::start_or_report<std::vector<reply>>(s->core->io(), std::move(done),
                                              [&](detail::result_callback<std::vector<reply>> d) {
                                                s->core->write_under_hold(*s, writes, true, d);
                                                state_.reset();  // the call released it
                                              });
}

}  // namespace dlock
