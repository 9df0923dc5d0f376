#include "locks/sansio/acquisition_fsm.hpp"

#include <algorithm>

#include "dlock/error.hpp"

namespace dlock::detail {

using action = acquisition_fsm::action;
using event = acquisition_fsm::event;

acquisition_fsm::acquisition_fsm(acquisition_setup setup)
    : timing_(setup.limits, setup.uniform),
      setup_(std::move(setup)),
      may_queue_(!setup_.limits.single_attempt && !setup_.reentry) {}

action acquisition_fsm::resume(const event& e) {
  if (e.what == event::type::carried_out) return next();
  if (e.what == event::type::queue_joined || e.what == event::type::listening) {
    on_answer(e);
  } else {
    now_ = e.now;
    if (queued_) admitted_ = e.admitted;
    on_event(e);
  }
  // The claim of a direct first attempt covers the name until its reply's handling is done:
  // whatever that handling queued or sent counts the name as busy here before the claim ends.
  if (claim_ends_ && awaiting_ == answer::none) {
    claim_ends_ = false;
    if (std::exchange(direct_claim_, false)) push(action::type::end_direct_claim);
  }
  return next();
}

action acquisition_fsm::next() {
  if (pending_.empty()) return {};
  const auto a = pending_.front();
  pending_.pop_front();
  return a;
}

void acquisition_fsm::on_event(const event& e) {
  using type = event::type;
  switch (e.what) {
    case type::start_direct:
      // From the caller's thread: the driver sends this attempt and touches nothing more, since
      // the I/O thread may see the acquisition as soon as it is sent.
      direct_claim_ = may_queue_;
      attempt(timing_.start(e.now).until, may_queue_);
      return;
    case type::start:
      if (finished()) return;  // cancelled before it started
      if (!may_queue_) {
        run(timing_.start(e.now));
        return;
      }
      push({.what = action::type::join_queue, .direct_first = true});
      awaiting_ = answer::start_joined;
      return;
    case type::reply:
      claim_ends_ = true;
      on_reply(e.reply, e.now);
      return;
    case type::timer:
      if (finished()) return;
      if (queued_ && !admitted_) {
        // Not our turn: only the deadline can end this wait.
        if (e.now >= limits().deadline) {
          finish(ending::not_acquired);
        } else {
          arm(limits().deadline);
        }
        return;
      }
      wake(e.now);
      return;
    case type::woken:
      wake(e.now);
      return;
    case type::admitted:
      if (finished() || !admitted_) return;
      // The waiter ahead left holding a mutex: it is held now, for up to that lease, unless an
      // attempt of ours, sent behind the release, answers for itself.
      if (e.predecessor_granted && setup_.one_holder) {
        if (!attempting_) run(timing_.on_busy(e.predecessor_lease.count(), e.now));
      } else {
        wake(e.now);
      }
      return;
    case type::behind_release:
      if (!finished() && !attempting_) run(timing_.on_wake(e.now));
      return;
    case type::yield:
      if (!finished() && !attempting_) {
        push({.what = action::type::arm_timer, .at = std::min(e.until, limits().deadline)});
      }
      return;
    case type::cancel:
      finish(ending::failed, errc::cancelled);
      return;
    case type::close:
      finish(ending::failed, errc::client_closed);
      return;
    case type::queued:
      queued_ = true;
      return;
    case type::place_given_back:
      if (after_place_ == action::type::deliver) {
        push(ending_);
      } else if (after_place_ == action::type::end_settling) {
        push(action::type::end_settling);
      }
      after_place_ = action::type::wait;
      return;
    case type::queue_joined:
    case type::listening:
    case type::carried_out:
      return;  // answers, handled by resume
  }
}

void acquisition_fsm::on_answer(const event& e) {
  const auto awaited = std::exchange(awaiting_, answer::none);
  if (e.what == event::type::queue_joined) {
    queued_ = true;
    admitted_ = e.admitted;
  }
  switch (awaited) {
    case answer::none:
      return;
    case answer::start_joined:
      if (!admitted_) {
        arm(limits().deadline);  // until it is our turn, only the deadline matters
      } else if (e.yield_until) {
        yield_until_ = e.yield_until;  // hear when the waiter we yielded to releases
        push({.what = action::type::listen});
        awaiting_ = answer::start_listening;
      } else {
        run(timing_.start(now_));
      }
      return;
    case answer::start_listening:
      push({.what = action::type::arm_timer, .at = std::min(*yield_until_, limits().deadline)});
      state_ = state::waiting;
      return;
    case answer::busy_joined:
      if (!admitted_) {
        arm(limits().deadline);  // others were waiting first: our turn comes
        return;
      }
      push({.what = action::type::listen, .take_message = true});
      awaiting_ = answer::busy_listening;
      return;
    case answer::busy_listening:
      after_busy_listening(e.message_waiting, now_);
      return;
    case answer::settle_joined:
      finish_rest();
      return;
  }
}

void acquisition_fsm::on_reply(const attempt_reply& r, steady::time_point now) {
  if (state_ == state::done || !attempting_) return;
  attempting_ = false;
  if (state_ == state::settling) {
    on_settled(r);
    return;
  }
  timing_.note_round_trip(now - r.sent_at);
  using type = attempt_reply::type;
  if (r.error == errc::not_replicated) {
    on_unreplicated(r, now);
  } else if (r.what == type::failed) {
    // Without a reply we cannot know whether the script ran: undo a grant it may have made.
    if (r.error == errc::timeout || r.error == errc::connection_lost)
      push_undo(undo::drop_if_fresh);
    run(timing_.on_error(r.error, now));
  } else if (r.what == type::malformed) {
    finish(ending::failed, errc::unexpected_reply, true);
  } else if (r.what == type::busy) {
    on_busy(r.pttl, now);
  } else {
    on_granted(r, now);
  }
}

std::optional<acquisition_fsm::undo> acquisition_fsm::undo_if_dead(const attempt_reply& r,
                                                                   steady::duration validity,
                                                                   steady::time_point now) {
  if (r.sent_at + validity > now) return std::nullopt;
  if (r.what != attempt_reply::type::reentered) return undo::drop;
  switch (r.joined_hold) {
    case attempt_reply::joined::valid:
      return std::nullopt;
    case attempt_reply::joined::expired:
      return undo::lose_joined;
    case attempt_reply::joined::none:
      break;
  }
  return undo::drop;
}

// A grant born dead is undone (which wakes waiters) and the wait goes on if time remains.
void acquisition_fsm::on_granted(const attempt_reply& r, steady::time_point now) {
  if (const auto how = undo_if_dead(r, setup_.validity, now)) {
    push_undo(*how, true);
    run(timing_.on_wake(now));
    return;
  }
  const bool reentry = r.what == attempt_reply::type::reentered;
  push(
      {.what = action::type::hand_out, .reentry = reentry, .fence = r.fence, .sent_at = r.sent_at});
  // Ended before the caller hears: a release it sends at once must find no local activity on
  // the name, or it takes a hop through the I/O thread.
  if (std::exchange(direct_claim_, false)) push(action::type::end_direct_claim);
  finish(ending::granted);
}

// The master granted it but too few replicas acknowledged in time: a failover now could promote a
// replica that never saw the grant, and hand the lock to someone else. It is undone, not handed
// out, and the wait goes on; if the wait ends this way, the caller hears errc::not_replicated.
void acquisition_fsm::on_unreplicated(const attempt_reply& r, steady::time_point now) {
  using type = attempt_reply::type;
  if (r.what == type::granted || r.what == type::reentered) {
    unreplicated_ = true;
    push_undo(r.what == type::reentered ? undo::release_added : undo::drop, false, true);
    run(timing_.on_wake(now));
  } else if (r.what == type::busy) {
    on_busy(r.pttl, now);  // nothing was written; the WAIT was moot
  } else {
    finish(ending::failed, errc::unexpected_reply, true);
  }
}

// Held by someone else: now it is worth queueing (if the first attempt went out directly) and
// listening for the release (an uncontended acquisition never subscribes). The subscription's
// confirmation wakes us for one more attempt, covering a release before it was live.
void acquisition_fsm::on_busy(std::int64_t pttl, steady::time_point now) {
  busy_step_ = timing_.on_busy(pttl, now);
  if (busy_step_.kind != attempt_timing::step_kind::wait || !may_queue_) {
    after_busy_listening(false, now);
  } else if (!queued_) {
    push({.what = action::type::join_queue});
    awaiting_ = answer::busy_joined;
  } else if (!admitted_) {
    arm(limits().deadline);
  } else {
    push({.what = action::type::listen, .take_message = true});
    awaiting_ = answer::busy_listening;
  }
}

void acquisition_fsm::after_busy_listening(bool message_waiting, steady::time_point now) {
  // A lingering subscription may have heard the release meant for this waiter before it was
  // back in its queue; and an unlock message during the attempt may have made its answer stale.
  if (message_waiting) woken_during_attempt_ = true;
  auto step = busy_step_;
  if (step.kind == attempt_timing::step_kind::wait && woken_during_attempt_) {
    step = timing_.on_wake(now);
  }
  run(step);
}

// The reply to the attempt that was out when the acquisition ended without the lock. Exactly the
// hold it added goes, as a release would: a re-entry's count, or the lock if it was a fresh
// grant. Not a drop, which ends the owner's hold whatever its count: another acquisition by the
// same owner may have re-entered this grant since, and its hold must stay.
void acquisition_fsm::on_settled(const attempt_reply& r) {
  state_ = state::done;
  using type = attempt_reply::type;
  if (r.what == type::granted || r.what == type::reentered) {
    push_undo(undo::release_added);
    // The release has gone out (and handed the lock on); the next waiter here tries after it.
    if (queued_) leave_queue(false);
    push(action::type::end_settling);
    return;
  }
  if (r.error == errc::timeout || r.error == errc::connection_lost) {
    push_undo(undo::drop_if_fresh);  // the script may have run
  }
  if (queued_) leave_queue(false);
  if (keeps_place(false)) {
    push(action::type::give_back_place);
    after_place_ = action::type::end_settling;
  } else {
    push(action::type::end_settling);
  }
}

void acquisition_fsm::wake(steady::time_point now) {
  if (finished()) return;
  if (attempting_) {
    woken_during_attempt_ = true;
    return;
  }
  run(timing_.on_wake(now));
}

void acquisition_fsm::run(attempt_timing::step s) {
  using kind = attempt_timing::step_kind;
  switch (s.kind) {
    case kind::attempt:
      attempt(s.until);
      return;
    case kind::wait:
      arm(queued_ && !admitted_ ? limits().deadline : s.until);
      return;
    case kind::granted:  // produced only by attempt_timing::on_granted, unused here
    case kind::not_acquired:
      finish(ending::not_acquired);
      return;
    case kind::failed:
      finish(ending::failed, s.error, true);
      return;
  }
}

void acquisition_fsm::attempt(steady::time_point until, bool publish_direct) {
  attempting_ = true;
  woken_during_attempt_ = false;
  state_ = state::attempting;
  push({.what = action::type::send_attempt, .at = until, .publish_direct = publish_direct});
}

void acquisition_fsm::arm(steady::time_point at) {
  state_ = queued_ && !admitted_ ? state::waiting_turn : state::waiting;
  push({.what = action::type::arm_timer, .at = at});
}

void acquisition_fsm::leave_queue(bool granted) {
  queued_ = false;
  push({.what = action::type::leave_queue, .granted = granted});
}

void acquisition_fsm::push_undo(undo how, bool born_dead, bool unreplicated) {
  push({.what = action::type::undo_grant,
        .how = how,
        .born_dead = born_dead,
        .unreplicated = unreplicated});
}

bool acquisition_fsm::keeps_place(bool held) const noexcept {
  return !held && may_queue_ && setup_.keeps_waiter_place && timing_.attempts() > 0;
}

void acquisition_fsm::finish(ending end, std::error_code ec, bool with_server_reply) {
  if (finished()) return;
  ending_ = {.what = action::type::deliver,
             .end = end,
             .error = ec,
             .with_server_reply = with_server_reply};
  // An attempt still out may yet bring back a grant, whatever ended the acquisition (a cancel,
  // its deadline passing meanwhile): it keeps its place until that reply is in, and what the
  // reply brings is undone (on_settled); a closing client waits for that. A first attempt sent
  // directly holds the name without a place in the queue: it takes one, so that waiters
  // arriving now queue behind the undo.
  if (attempting_ && end != ending::granted) {
    state_ = state::settling;
    push(action::type::begin_settling);
    if (direct_claim_ && !queued_) {
      push({.what = action::type::join_queue});
      awaiting_ = answer::settle_joined;
      return;
    }
  }
  finish_rest();
}

void acquisition_fsm::finish_rest() {
  const bool settling = state_ == state::settling;
  if (!settling) state_ = state::done;
  push(action::type::retire);
  const bool held = ending_.end == ending::granted;
  if (!held && !ending_.error && unreplicated_) {
    ending_.end = ending::failed;
    ending_.error = errc::not_replicated;
  }
  // A settling acquisition steps aside once its reply is in (on_settled): a waiter behind it
  // must not overtake the undo of what it brings. Without a place on the server to give back,
  // the caller hears at once.
  if (settling || !keeps_place(held)) {
    if (!settling && queued_) leave_queue(held);
    push(ending_);
    return;
  }
  // A waiter that gave up hears so once its place on the server is gone: whoever it tells next
  // (another client reading the queue) must not still find it there.
  if (queued_) leave_queue(false);
  push(action::type::give_back_place);
  after_place_ = action::type::deliver;
}

}  // namespace dlock::detail
