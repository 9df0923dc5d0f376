// The driver of acquisitions: it feeds each one's state machine (acquisition_fsm.hpp) the events
// that reach it (replies, timers, unlock messages, its turn in the queue, a cancel) and carries
// out the actions the machine returns, with the client's connections, timers, waiter queues and
// grants table. Every decision is the machine's; this file only acts.
#include "core/user_callback.hpp"
#include "dlock/error.hpp"
#include "locks/runtime/core_state.hpp"

namespace dlock::detail {

using event = acquisition_fsm::event;
using action = acquisition_fsm::action;

acquire_handle lock_core::acquire(acquire_request r) {
  // A single attempt barges, as std::mutex::try_lock does; a re-entry must not queue behind
  // waiters that are waiting for this very owner.
  acquisition_setup setup;
  setup.limits = r.limits;
  setup.reentry = r.kind->reentrant() && grants_.find_live(*r.kind, r.names->name, r.owner);
  setup.keeps_waiter_place = r.kind->keeps_waiter_place();
  setup.one_holder = r.kind->max_holders() == 1;
  setup.validity = validity_end(steady::time_point{}, r.lease_time) - steady::time_point{};
  auto o = std::make_shared<op>(this, std::move(r), std::move(setup));
  auto handle = handle_for(o);
  o->node = topology_->nodes_for(o->req.names->name).front();
  {
    lock_guard lock(ops_mutex_);
    spare_op_nodes_.insert(pending_ops_, o);
  }
  const auto now = steady::now();
  // The first attempt leaves from this thread when it can overtake no one here (no local
  // waiter or attempt on this name, no yield in force): a free lock then costs one round trip
  // and no hop through the I/O thread. The reply, and anything after it, runs on the I/O thread,
  // which may see the acquisition as soon as it is published or sent: nothing here touches it
  // after that.
  if (!io().in_io_thread() &&
      (!o->fsm.may_queue() || activity_.claim_direct(o->req.names->channel, now))) {
    const auto first = o->fsm.resume(event::of(event::type::start_direct, now));
    if (first.publish_direct) activity_.publish_direct(o->req.names->channel, o);
    submit_attempt(o, first.at);
    return handle;
  }
  io().post([o] { o->core->drive(o, event::of(event::type::start, steady::now())); });
  return handle;
}

event lock_core::event_for(const std::shared_ptr<op>& o, event::type what) const {
  return event::of(what, steady::now(), o->fsm.queued() && admitted(o));
}

void lock_core::drive(const std::shared_ptr<op>& o, event e) {
  on_io_thread();
  if (o->driving) {
    o->backlog.push_back(std::move(e));
    return;
  }
  o->driving = true;
  for (;;) {
    o->note_mover(e.what);
    for (auto a = o->fsm.resume(e); a.what != action::type::wait; a = o->fsm.resume(e)) {
      e = carry_out(o, a);
    }
    if (o->backlog.empty()) break;
    e = std::move(o->backlog.front());
    o->backlog.erase(o->backlog.begin());
  }
  o->driving = false;
}

event lock_core::carry_out(const std::shared_ptr<op>& o, const action& a) {
  using type = action::type;
  auto done = event::of(event::type::carried_out, {});
  switch (a.what) {
    case type::wait:
      break;
    case type::send_attempt:
      o->attempt_on_timer = o->moved_by_timer;
      submit_attempt(o, a.at);
      break;
    case type::arm_timer:
      arm_op_timer(o, a.at);
      break;
    case type::join_queue: {
      if (a.direct_first) queue_direct_first(o->req.names->channel);
      const auto& q = join_queue(o);
      done = event::of(event::type::queue_joined, {}, q.admitted(o));
      done.yield_until = activity_.yielding(o->req.names->channel, steady::now());
      break;
    }
    case type::listen: {
      auto& q = rt_->queues.at(o->req.names->channel);
      subscribe(q, o->req.names->channel);
      done = event::of(event::type::listening, {});
      done.message_waiting = a.take_message && std::exchange(q.unclaimed_message, false);
      if (done.message_waiting) o->moved_by_timer = false;
      o->listened = true;
      break;
    }
    case type::leave_queue:
      leave_queue(o, a.granted);
      break;
    case type::undo_grant:
      undo_grant(o->req, a.how, a.born_dead, a.unreplicated);
      break;
    case type::hand_out:
      o->held = hand_out(o->req, a.reentry, a.fence, validity_end(a.sent_at, o->req.lease_time));
      if (o->listened && o->attempt_on_timer) note_woken_without_message(o->req);
      break;
    case type::end_direct_claim:
      activity_.add_local(o->req.names->channel, -1, true);
      break;
    case type::begin_settling:
      o->settle_guard = release_drain::track(releases_);
      break;
    case type::end_settling:
      o->settle_guard.reset();
      break;
    case type::give_back_place:
      // Hands back a waiter's place on the server at once, rather than leaving the others to
      // wait out its waiter lease.
      o->req.kind->abandon(call_for(*o->req.names, o->req.owner, o->req.lease_time),
                           [o](std::error_code, reply) {
                             o->core->drive(o, event::of(event::type::place_given_back, {}));
                           });
      break;
    case type::retire: {
      lock_guard lock(ops_mutex_);
      if (auto it = pending_ops_.find(o); it != pending_ops_.end()) {
        spare_op_nodes_.erase(pending_ops_, it);
      }
      ++o->timer_epoch;
      o->timer.cancel();
      break;
    }
    case type::deliver:
      deliver(*o, a);
      break;
  }
  return done;
}

// Changes nothing in the op: a first attempt sent directly may already be visible to the I/O
// thread when this runs.
void lock_core::submit_attempt(const std::shared_ptr<op>& o, steady::time_point until) {
  counters.attempts.fetch_add(1, std::memory_order_relaxed);
  const auto sent_at = steady::now();
  o->req.kind->attempt({*topology_, o->node, *o->req.names, o->req.owner, o->req.lease_time, until,
                        options_.fair_waiter_lease, o->req.permits, o->fsm.may_queue(),
                        o->fsm.reentry(), nullptr, holder_record_},
                       [o, sent_at](std::error_code ec, reply r) {
                         if (auto* m = o->core->observer_.metrics();
                             m && ec != errc::client_closed) {
                           m->round_trip(timed_command::acquire, steady::now() - sent_at);
                         }
                         o->core->on_attempt_reply(o, ec, r, sent_at);
                       });
}

void lock_core::on_attempt_reply(const std::shared_ptr<op>& o, std::error_code ec, const reply& r,
                                 steady::time_point sent_at) {
  auto e = event_for(o, event::type::reply);
  auto& read = e.reply;
  read.sent_at = sent_at;
  read.error = ec;
  using type = attempt_reply::type;
  if (ec && ec != errc::not_replicated) {
    read.what = type::failed;  // not_replicated: the master's answer is there all the same
  } else {
    const auto outcome = o->req.kind->decode_attempt(r);
    read.fence = outcome.fence;
    read.pttl = outcome.pttl;
    switch (outcome.what) {
      case attempt_outcome::type::malformed:
        read.what = type::malformed;
        break;
      case attempt_outcome::type::granted:
        read.what = type::granted;
        break;
      case attempt_outcome::type::reentered:
        read.what = type::reentered;
        read.joined_hold = joined_hold(o->req, e.now);
        break;
      case attempt_outcome::type::busy:
        read.what = type::busy;
        break;
    }
  }
  if (read.what == type::failed || read.what == type::malformed) o->last_error = r;
  drive(o, std::move(e));
}

attempt_reply::joined lock_core::joined_hold(const acquire_request& r,
                                             steady::time_point now) const {
  const auto held = grants_.find_live(*r.kind, r.names->name, r.owner);
  if (!held) return attempt_reply::joined::none;
  return grants_.valid(*held, now) ? attempt_reply::joined::valid : attempt_reply::joined::expired;
}

void lock_core::undo_grant(const acquire_request& r, acquisition_fsm::undo how, bool born_dead,
                           bool unreplicated) {
  if (born_dead) counters.grants_born_dead.fetch_add(1, std::memory_order_relaxed);
  if (born_dead || unreplicated) {
    note_undone(r, born_dead ? undo_cause::born_dead : undo_cause::not_replicated);
  }
  const auto call = call_for(*r.names, r.owner, r.lease_time, r.permits);
  using undo = acquisition_fsm::undo;
  switch (how) {
    case undo::release_added:
      r.kind->release(call, undo_tracked());
      return;
    case undo::drop_if_fresh:
      // A re-entry must not drop the holds its owner already has; its count may stay one too
      // high, which the lease's expiry resolves once the owner releases the rest.
      if (r.kind->reentrant() && grants_.find_live(*r.kind, r.names->name, r.owner)) return;
      break;
    case undo::lose_joined:
      if (auto held = grants_.find_live(*r.kind, r.names->name, r.owner)) {
        lose(held, lease_lost_reason::expired);  // which ends the owner's hold on the server
        return;
      }
      break;
    case undo::drop:
      break;
  }
  r.kind->drop(call, undo_tracked());
}

void lock_core::arm_op_timer(const std::shared_ptr<op>& o, steady::time_point at) {
  const auto epoch = ++o->timer_epoch;
  if (at == steady::time_point::max()) {
    o->timer.cancel();
    return;
  }
  o->timer.expires_at(at);
  o->timer.async_wait([o, epoch](std::error_code ec) {
    if (ec || epoch != o->timer_epoch || o->fsm.finished()) return;
    o->core->drive(o, o->core->event_for(o, event::type::timer));
  });
}

void lock_core::deliver(op& o, const action& a) {
  acquire_result result;
  result.error = a.error;
  if (a.end == acquisition_fsm::ending::granted) {
    result.held = std::move(o.held);
  } else if (a.error) {
    result.message = failure_message(o, a.error, a.with_server_reply ? o.last_error : reply{});
  }
  if (a.end != acquisition_fsm::ending::granted) note_not_granted(o.req, a.error, result.message);
  auto done = std::move(o.req.done);  // the op may outlive this; the callback's captures not
  call_user(done, std::move(result));
}

std::string lock_core::failure_message(const op& o, std::error_code ec,
                                       const reply& server_reply) const {
  const auto& name = o.req.names->name;
  if (ec == errc::cancelled) return "acquiring lock '" + name + "': cancelled";
  if (ec == errc::not_replicated) {
    return "lock '" + name + "' was granted, but fewer than " +
           std::to_string(options_.min_replica_acks) + " replicas acknowledged it within " +
           std::to_string(options_.replica_ack_timeout.count()) +
           " ms, each time the wait allowed; it was undone";
  }
  if (ec == errc::wrong_type && server_reply.is_error()) {
    const auto& text = server_reply.str();
    // Our scripts' verdict on a name that holds something else: "holds a list, not a lock"; or
    // on a key the lock keeps beside its name: "its fencing counter holds a hash, not a count".
    if (text.starts_with("WRONGTYPE holds ")) return "lock '" + name + "' " + text.substr(10);
    if (text.starts_with("WRONGTYPE its ")) return "lock '" + name + "': " + text.substr(10);
  }
  std::string message = "acquiring lock '" + name + "': ";
  message.append(server_reply.is_error() ? server_reply.str() : ec.message());
  // The one key an ACL written for Redisson's layout does not know about. A key refused: "...
  // one of the keys used as arguments" (Redis), "No permissions to access a key" (Valkey).
  if (ec == errc::permission_denied && !holder_record_.empty() &&
      (message.find("keys used as arguments") != std::string::npos ||
       message.find("permissions to access a key") != std::string::npos)) {
    message.append(
        " (besides Redisson's keys, dlock records the holder in dlock_holder:{NAME}: "
        "allow the user ~dlock_holder:*, or set client_options::record_holder = false)");
  }
  return message;
}

net::reply_callback lock_core::undo_tracked() const {
  return [settled = release_drain::track(releases_)](std::error_code, reply) {};
}

lease lock_core::hand_out(const acquire_request& r, bool reentry, std::uint64_t fence,
                          steady::time_point valid_until) {
  counters.grants.fetch_add(1, std::memory_order_relaxed);
  const auto now = steady::now();
  note_grant(r, fence, now);
  const auto added = grants_.add_hold(r, reentry, fence, valid_until);
  if (added.stale) lose(added.stale, lease_lost_reason::not_held);
  after_grant(added);
  auto state = std::make_shared<lease_state>();
  state->core = shared_from_this();
  state->g = added.g;
  state->hold_id = added.hold_id;
  state->granted_at = now;
  return lease_state::make(std::move(state));
}

void lock_core::lose(const std::shared_ptr<grant>& g, lease_lost_reason why) {
  auto callbacks = grants_.lose(g, why);
  if (!callbacks) return;
  counters.leases_lost.fetch_add(1, std::memory_order_relaxed);
  note_loss(*g, why);
  for (auto& cb : *callbacks)
    call_user(cb, why);
  g->stop.request_stop();
  if (why == lease_lost_reason::expired) {
    // We told the holder it no longer holds the lock; make that true on the server too, in
    // case the lease is in fact still there, so it cannot block others for nothing.
    g->kind.drop(call_for(*g->names, g->owner, std::chrono::milliseconds(0), g->permits),
                 [](std::error_code, reply) {});
  }
}

}  // namespace dlock::detail
