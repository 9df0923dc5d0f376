// Releases and extensions of holds, and what our own release means to the local waiters: its
// unlock message reaches every subscribed client, perhaps us too, and its reply says how many.
#include <algorithm>

#include "core/one_shot.hpp"
#include "core/user_callback.hpp"
#include "dlock/error.hpp"
#include "locks/runtime/core_state.hpp"

namespace dlock::detail {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

release_outcome lock_core::release(lease_state& hold) noexcept {
  try {
    if (io().in_io_thread()) {
      release_async(hold, nullptr);  // cannot wait for the reply on the thread that delivers it
      return release_outcome::released;
    }
    one_shot<release_outcome> outcome;
    release_async(hold, [&outcome](release_outcome o) { outcome.put(o); });
    return outcome.take();
  } catch (...) {
    counters.release_failures.fetch_add(1, std::memory_order_relaxed);
    return release_outcome::unconfirmed;
  }
}

void lock_core::release_async(lease_state& hold,
                              std::function<void(release_outcome)> done) noexcept {
  auto report = [&done](release_outcome o) { call_user(done, o); };
  try {
    const auto g = hold.g;
    // Taking the last hold out of the table stops its renewal before this returns: the watchdog
    // builds its rounds under the mutex of each shard of the registry in turn.
    const auto removed = grants_.remove_hold(*g, hold.hold_id);
    counters.releases.fetch_add(1, std::memory_order_relaxed);
    if (removed.lost) {
      report(release_outcome::not_held);
      return;
    }
    // With no local waiters there is nothing to note before the reply: submit from here, without
    // a hop to the I/O thread. Otherwise the I/O thread notes the release first, so the echo of
    // our own unlock message is recognised.
    const bool note_first = g->kind.release_echoes() && activity_.has_local(g->names->channel);
    const auto lease_time = grants_.lease_time(*g);
    // Counted from here until every server it went to has answered: a closing client waits for
    // it (release_drain), so a lease let go just before its client is not left to expire on the
    // server. Usually that is its reply; RedLock reports a release once a majority confirmed it,
    // and the slower masters' answers come after.
    auto settled = release_drain::track(releases_);
    // `self` is not an owner, for the reason given at lock_core::op.
    const bool frees = removed.last;
    auto send = [self = this, g, lease_time, done = std::move(done), note_first, frees,
                 since = hold.granted_at, settled = std::move(settled)]() mutable {
      const auto note =
          note_first ? self->before_release(g->names->channel) : queue::release_note{};
      const auto sent_at = steady::now();
      auto on_reply = [self, g, done = std::move(done), note, sent_at, since, settled = settled](
                          std::error_code ec, reply r) mutable {
        const auto round_trip = steady::now() - sent_at;
        if (auto* m = self->observer_.metrics(); m && !ec) {
          m->round_trip(timed_command::release, round_trip);
        }
        self->after_release(g->names->channel, note, ec ? reply() : r, round_trip);
        self->note_release(*g, since, ec, r);
        // nil: the lock was no longer ours. 0: a re-entered hold remains. n >= 1: released.
        const auto outcome = ec               ? release_outcome::unconfirmed
                             : r.is_integer() ? release_outcome::released
                                              : release_outcome::not_held;
        if (outcome != release_outcome::released) {
          self->counters.release_failures.fetch_add(1, std::memory_order_relaxed);
        }
        call_user(done, outcome);
        settled.reset();
      };
      auto call = self->call_for(*g->names, g->owner, lease_time, g->permits);
      call.settled = std::move(settled);
      g->kind.release(call, std::move(on_reply));
      if (note.tracked && frees) self->attempt_behind_release(g->names->channel, g->kind);
    };
    if (note_first && !io().in_io_thread()) {
      // Until it is sent, the release counts as local activity on the name, so that a later
      // acquisition by this client cannot overtake it with a direct first attempt (which would
      // find our own hold still there, and re-enter it).
      activity_.add_local(g->names->channel, +1);
      io().post([this, g, send = std::move(send)]() mutable {
        send();
        activity_.add_local(g->names->channel, -1);
      });
    } else {
      send();
    }
  } catch (...) {
    counters.release_failures.fetch_add(1, std::memory_order_relaxed);
    report(release_outcome::unconfirmed);
  }
}

void lock_core::extend_async(const std::shared_ptr<grant>& g, milliseconds lease_time,
                             std::function<void(call_result<bool>)>& done) {
  if (lease_time <= 0ms) throw error(errc::invalid_argument, "lease_time must be positive");
  if (!g->kind.leased()) {
    throw error(errc::invalid_argument,
                "a " + std::string(g->kind.name()) + "'s permits have no lease to extend");
  }
  if (grants_.is_lost(*g)) {
    throw error(errc::lease_lost, "lease on '" + g->names->name + "' was lost");
  }
  const renewal_item item{&g->names->name, record_key_of(*g->names), &g->owner, lease_time};
  const auto sent_at = steady::now();
  const auto c = call_for(*g->names, g->owner, lease_time);
  // `self` is not an owner, for the reason given at lock_core::op: the topology answers every
  // call in flight before the core goes.
  auto on_reply = [self = this, g, lease_time, sent_at, done = std::move(done)](std::error_code ec,
                                                                                reply r) {
    call_result<bool> result;
    const auto& name = g->names->name;
    try {
      if (ec) {
        result.error = ec;
        result.message = r.is_error() ? r.str() : "extending '" + name + "'";
      } else if (r.at(0).integer() == renewal_undecided) {
        result.error = make_error_code(errc::connection_lost);
        result.message = "extending '" + name +
                         "': too few RedLock masters answered to tell whether a majority still "
                         "holds it";
      } else if (r.at(0).integer() != 1) {
        self->lose(g, lease_lost_reason::not_held);
      } else {
        result.value = true;
        if (self->grants_.extended(*g, self->validity_end(sent_at, lease_time), lease_time)) {
          self->arm_expiry_check();
        }
      }
    } catch (const error& e) {  // a reply of the wrong shape
      result = {false, e.code(), bare_message(e)};
    }
    call_user(done, std::move(result));
  };
  g->kind.renew(c.topo, c.node, std::span(&item, 1), c.deadline, std::move(on_reply));
}

bool lock_core::extend(lease_state& hold, milliseconds lease_time) {
  one_shot<call_result<bool>> result;
  std::function<void(call_result<bool>)> done = [&result](call_result<bool> r) {
    result.put(std::move(r));
  };
  extend_async(hold.g, lease_time, done);
  auto r = result.take();
  if (r.error) throw error(r.error, r.message);
  return r.value;
}

lock_core::queue::release_note lock_core::before_release(const std::string& channel) {
  on_io_thread();
  auto it = rt_->queues.find(channel);
  if (it == rt_->queues.end() || it->second.empty()) return {};
  return it->second.release_started();
}

// A local hand-off in one round trip: when the next holder waits here and no other client was
// waiting at our last release, its attempt leaves right behind our release on the same
// connection, so the server runs it after the release and finds the lock free. If another
// client takes the lock in between, the attempt finds it held and the waiter waits on, as it
// would have anyway. With other clients waiting we yield instead (after_release).
void lock_core::attempt_behind_release(const std::string& channel, const lock_kind& kind) {
  on_io_thread();
  if (kind.max_holders() != 1) return;
  auto it = rt_->queues.find(channel);
  if (it == rt_->queues.end() || it->second.empty() || it->second.others_waited) return;
  const auto front = it->second.front();
  if (front->fsm.finished() || front->fsm.attempting()) return;
  if (activity_.yielding(channel, steady::now())) return;
  drive(front, event_for(front, acquisition_fsm::event::type::behind_release));
}

// If another client is waiting, we yield: it was just told the lock is free, and racing it would
// only cost a failed attempt on one side (and starve remote waiters, who hear of the release
// later than we do). Our front waiter and our next acquisitions hold back for a few round trips,
// long enough for that client to take the lock; its release then wakes us. When in doubt whether
// the count includes us, we assume it does: a missed yield costs at most one failed attempt, a
// yield to nobody would cost the wait. If no one else is waiting, our front waiter need not wait
// for the message's echo: it tries at once.
void lock_core::after_release(const std::string& channel, queue::release_note note, const reply& r,
                              steady::duration round_trip) {
  on_io_thread();
  const bool released = r.is_integer() && r.integer() >= 1;
  const auto receivers = released ? r.integer() - 1 : 0;
  const auto now = steady::now();
  const bool counted_us = note.requested || rt_->unsubscribed.maybe_subscribed(channel, now) ||
                          (rt_->queues.count(channel) && rt_->queues.at(channel).subscription);
  const bool others = receivers - (counted_us ? 1 : 0) > 0;
  const auto yield_for = std::clamp<steady::duration>(8 * round_trip, 2ms, options_.max_recheck);
  if (others) activity_.set_yield(channel, now + yield_for);
  auto it = rt_->queues.find(channel);
  if (it == rt_->queues.end()) return;
  if (released) it->second.others_waited = others;
  switch (it->second.release_finished(note, released, others)) {
    case queue::release_action::none:
      return;
    case queue::release_action::wake:
      wake_front(channel);
      return;
    case queue::release_action::yield: {
      auto front = it->second.front();
      auto e = event_for(front, acquisition_fsm::event::type::yield);
      e.until = now + yield_for;
      drive(front, e);
      return;
    }
  }
}

}  // namespace dlock::detail
