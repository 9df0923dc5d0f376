// One acquisition from start to finish: the first attempt (sent directly from the caller's
// thread when it can overtake no one here), the replies, waiting for a turn and for the lock,
// grants that were dead on arrival, and the end (granted, not acquired, failed). The timing
// decisions are acquire_machine's; the waiter queue's are waiter_queue's.
#include "core/user_callback.hpp"
#include "dlock/error.hpp"
#include "locks/core_state.hpp"

namespace dlock::detail {

acquire_handle lock_core::acquire(acquire_request r) {
  auto o = std::make_shared<op>(this, std::move(r));
  auto handle = handle_for(o);
  o->node = topology_->nodes_for(o->req.names->name).front();
  {
    lock_guard lock(ops_mutex_);
    spare_op_nodes_.insert(pending_ops_, o);
  }
  const auto now = steady::now();
  // A single attempt barges, as std::mutex::try_lock does; a re-entry must not queue behind
  // waiters that are waiting for this very owner.
  o->reentry =
      o->req.kind->reentrant() && grants_.find_live(*o->req.kind, o->req.names->name, o->req.owner);
  o->may_queue = !o->req.limits.single_attempt && !o->reentry;
  // The first attempt leaves from this thread when it can overtake no one here (no local
  // waiter or attempt on this name, no yield in force): a free lock then costs one round trip
  // and no hop through the I/O thread. The reply, and anything after it, runs on the I/O thread.
  if (!io().in_io_thread() &&
      (!o->may_queue || activity_.claim_direct(o->req.names->channel, now))) {
    // Every field of the op is set before the I/O thread can see it: through the activity
    // table (publish_direct) or through the attempt's reply.
    const auto step = o->machine.start(now);
    o->attempting = true;
    o->direct_claim = o->may_queue;
    if (o->direct_claim) activity_.publish_direct(o->req.names->channel, o);
    submit_attempt(o, step.until);
    return handle;
  }
  io().post([o] { o->core->start(o); });
  return handle;
}

void lock_core::start(const std::shared_ptr<op>& o) {
  // Cancelled before it started: a cancel posted from another thread can overtake this start
  // when the acquisition was made on the I/O thread (asio runs posts made inside a handler after
  // it returns).
  if (o->finished) return;
  const auto now = steady::now();
  if (!o->may_queue) {
    run_step(o, o->machine.start(now));
    return;
  }
  queue_direct_first(o->req.names->channel);
  auto& q = join_queue(o);
  if (!q.admitted(o)) {
    arm_op_timer(o, o->req.limits.deadline);  // until it is our turn, only the deadline matters
  } else if (const auto until = activity_.yielding(o->req.names->channel, now)) {
    subscribe(q, o->req.names->channel);  // hear when the waiter we yielded to releases
    arm_op_timer(o, std::min(*until, o->req.limits.deadline));
  } else {
    run_step(o, o->machine.start(now));
  }
}

void lock_core::send_attempt(const std::shared_ptr<op>& o, steady::time_point until) {
  o->attempting = true;
  o->woken_during_attempt = false;
  submit_attempt(o, until);
}

// Changes nothing in the op: a first attempt sent directly may already be visible to the I/O
// thread when this runs.
void lock_core::submit_attempt(const std::shared_ptr<op>& o, steady::time_point until) {
  counters.attempts.fetch_add(1, std::memory_order_relaxed);
  const auto sent_at = steady::now();
  o->req.kind->attempt(
      {*topology_, o->node, *o->req.names, o->req.owner, o->req.lease_time, until,
       options_.fair_waiter_lease, o->req.permits, o->may_queue, o->reentry},
      [o, sent_at](std::error_code ec, reply r) { o->core->on_attempt_reply(o, ec, r, sent_at); });
}

void lock_core::on_attempt_reply(const std::shared_ptr<op>& o, std::error_code ec, const reply& r,
                                 steady::time_point sent_at) {
  o->attempting = false;
  // The claim of a direct first attempt covers the name until the op is queued or finished;
  // run below, it ends once either has happened (join_queue counts the op itself).
  struct release_claim {
    name_activity& activity;
    op& o;
    void end() {
      if (std::exchange(o.direct_claim, false)) activity.add_local(o.req.names->channel, -1, true);
    }
    ~release_claim() { end(); }
  } claim{activity_, *o};
  if (o->finished) {
    // Cancelled while this attempt was out: whatever it brings back is undone (cancel.cpp).
    if (o->settling) settle_cancelled(o, ec, r);
    return;
  }
  const auto now = steady::now();
  o->machine.note_round_trip(now - sent_at);
  if (ec == errc::not_replicated) {
    on_unreplicated_grant(o, r, now);
    return;
  }
  if (ec) {
    // Without a reply we cannot know whether the script ran: undo a grant it may have made.
    if (ec == errc::timeout || ec == errc::connection_lost) discard_uncertain_grant(*o);
    o->last_error = r;
    run_step(o, o->machine.on_error(ec, now));
    return;
  }
  const auto outcome = o->req.kind->decode_attempt(r);
  using type = attempt_outcome::type;
  switch (outcome.what) {
    case type::malformed:
      fail(o, errc::unexpected_reply, r);
      return;
    case type::granted:
    case type::reentered: {
      const bool reentry = outcome.what == type::reentered;
      if (born_dead(*o, reentry, sent_at, now)) {
        // The grant's validity ran out before its reply arrived (the server stalled, or the
        // reply was held up): it is not handed out, it was undone, and the wait goes on if
        // time remains.
        run_step(o, o->machine.on_wake(now));
        return;
      }
      counters.grants.fetch_add(1, std::memory_order_relaxed);
      auto held = grant_hold(*o, reentry, outcome.fence, sent_at);
      // Ended before the caller wakes: a release it sends at once must find no local activity
      // on the name, or it takes a hop through this thread (release_async).
      claim.end();
      finish(o, {std::move(held), {}, {}});
      return;
    }
    case type::busy:
      on_busy(o, outcome.pttl, now);
      return;
  }
}

// The master granted it but too few replicas acknowledged in time: a failover now could promote a
// replica that never saw the grant, and hand the lock to someone else. It is undone, not handed
// out, and the wait goes on; if the wait ends this way, the caller hears errc::not_replicated.
void lock_core::on_unreplicated_grant(const std::shared_ptr<op>& o, const reply& r,
                                      steady::time_point now) {
  const auto outcome = o->req.kind->decode_attempt(r);
  using type = attempt_outcome::type;
  if (outcome.what == type::granted || outcome.what == type::reentered) {
    o->unreplicated = true;
    const auto call = call_for(*o->req.names, o->req.owner, o->req.lease_time, o->req.permits);
    if (outcome.what == type::reentered) {
      o->req.kind->release(call, undo_tracked());  // only the re-entry's count
    } else {
      o->req.kind->drop(call, undo_tracked());
    }
    run_step(o, o->machine.on_wake(now));
    return;
  }
  if (outcome.what == type::busy) {
    on_busy(o, outcome.pttl, now);  // nothing was written; the WAIT was moot
    return;
  }
  fail(o, errc::unexpected_reply, r);
}

void lock_core::on_busy(const std::shared_ptr<op>& o, std::int64_t pttl, steady::time_point now) {
  auto step = o->machine.on_busy(pttl, now);
  if (step.kind == acquire_machine::step_kind::wait && o->may_queue) {
    // Held by someone else: now it is worth queueing (if the first attempt went out directly)
    // and listening for the release (an uncontended acquisition never subscribes). The
    // subscription's confirmation triggers one more attempt, covering a release that happened
    // before it was live.
    auto& q = o->queued ? rt_->queues.at(o->req.names->channel) : join_queue(o);
    if (!q.admitted(o)) {
      arm_op_timer(o, o->req.limits.deadline);  // others were waiting first: our turn comes
      return;
    }
    subscribe(q, o->req.names->channel);
    // A lingering subscription may have heard the release meant for this waiter before the
    // waiter was back in its queue.
    if (std::exchange(q.unclaimed_message, false)) o->woken_during_attempt = true;
  }
  // An unlock message arrived while we were asking: the answer may already be stale.
  if (step.kind == acquire_machine::step_kind::wait && o->woken_during_attempt) {
    step = o->machine.on_wake(now);
  }
  run_step(o, step);
}

void lock_core::run_step(const std::shared_ptr<op>& o, acquire_machine::step s) {
  using kind = acquire_machine::step_kind;
  switch (s.kind) {
    case kind::attempt:
      send_attempt(o, s.until);
      return;
    case kind::wait:
      arm_op_timer(o, o->queued && !admitted(o) ? o->req.limits.deadline : s.until);
      return;
    case kind::granted:  // produced only by on_granted, which the driver does not use
    case kind::not_acquired:
      finish(o, {});
      return;
    case kind::failed:
      fail(o, s.error, o->last_error);
      return;
  }
}

void lock_core::arm_op_timer(const std::shared_ptr<op>& o, steady::time_point at) {
  const auto epoch = ++o->timer_epoch;
  if (at == steady::time_point::max()) {
    o->timer.cancel();
    return;
  }
  o->timer.expires_at(at);
  o->timer.async_wait([o, epoch](std::error_code ec) {
    if (ec || epoch != o->timer_epoch || o->finished) return;
    auto& core = *o->core;
    if (o->queued && !core.admitted(o)) {
      // Not our turn: only the deadline can end this wait.
      if (steady::now() >= o->req.limits.deadline) {
        core.finish(o, {});
      } else {
        core.arm_op_timer(o, o->req.limits.deadline);
      }
      return;
    }
    core.wake(o);
  });
}

void lock_core::wake(const std::shared_ptr<op>& o) {
  if (o->finished) return;
  if (o->attempting) {
    o->woken_during_attempt = true;
    return;
  }
  run_step(o, o->machine.on_wake(steady::now()));
}

void lock_core::finish(const std::shared_ptr<op>& o, acquire_result result) {
  if (o->finished) return;
  // An attempt still out may yet bring back a grant, whatever ended the acquisition (a cancel,
  // its deadline passing meanwhile): it keeps its place until that reply is in, and what the
  // reply brings is undone (settle_cancelled). A first attempt sent directly holds the name
  // without a place in the queue: it takes one, so that waiters arriving now queue behind the
  // undo.
  if (o->attempting && !result.held) {
    o->settling = true;
    // A client closing before the reply is in waits for it, and for the undo, as for a release:
    // the attempt may have been granted (its WAIT for replicas still running, say).
    o->settle_guard = release_drain::track(releases_);
    if (o->direct_claim && !o->queued) join_queue(o);
  }
  o->finished = true;
  {
    lock_guard lock(ops_mutex_);
    if (auto it = pending_ops_.find(o); it != pending_ops_.end()) {
      spare_op_nodes_.erase(pending_ops_, it);
    }
  }
  ++o->timer_epoch;
  o->timer.cancel();
  if (!result.held && !result.error && o->unreplicated) {
    result.error = errc::not_replicated;
    result.message = "lock '" + o->req.names->name + "' was granted, but fewer than " +
                     std::to_string(options_.min_replica_acks) +
                     " replicas acknowledged it within " +
                     std::to_string(options_.replica_ack_timeout.count()) +
                     " ms, each time the wait allowed; it was undone";
  }
  const bool held = static_cast<bool>(result.held);
  const auto deliver = [](acquire_callback& done, acquire_result& r) noexcept {
    call_user(done, std::move(r));
  };
  // A cancelled acquisition whose attempt is still out steps aside once its reply is in
  // (settle_cancelled): a waiter behind it must not overtake the undo of what it brings.
  // Without a place on the server to give back, the caller hears at once (every grant).
  if (o->settling || !keeps_place(*o, held)) {
    if (!o->settling) step_aside(o, held);
    auto done = std::move(o->req.done);  // the op may outlive this; the callback's captures not
    deliver(done, result);
    return;
  }
  // A waiter that gave up hears so once its place on the server is gone: whoever it tells next
  // (another client reading the queue) must not still find it there. Shared: std::function
  // needs a copyable target, and a lease is move-only.
  step_aside(
      o, held,
      [done = std::move(o->req.done), result = std::make_shared<acquire_result>(std::move(result)),
       deliver]() mutable { deliver(done, *result); });
}

bool lock_core::keeps_place(const op& o, bool held) {
  return !held && o.may_queue && o.req.kind->keeps_waiter_place() && o.machine.attempts() > 0;
}

// Hands back a waiter's place on the server at once, rather than leaving the others to wait out
// its waiter lease.
void lock_core::step_aside(const std::shared_ptr<op>& o, bool held, std::function<void()> then) {
  if (o->queued) leave_queue(o, held);
  if (keeps_place(*o, held)) {
    o->req.kind->abandon(call_for(*o->req.names, o->req.owner, o->req.lease_time),
                         [then = std::move(then)](std::error_code, reply) {
                           if (then) then();
                         });
    return;
  }
  if (then) then();
}

void lock_core::fail(const std::shared_ptr<op>& o, std::error_code ec, const reply& server_reply) {
  std::string message = "acquiring lock '" + o->req.names->name + "': ";
  if (ec == errc::wrong_type && server_reply.is_error() &&
      server_reply.str().starts_with("WRONGTYPE holds ")) {
    // Our scripts' verdict on a name that holds something else: "holds a list, not a lock".
    message = "lock '" + o->req.names->name + "' " + server_reply.str().substr(10);
  } else if (ec == errc::wrong_type && server_reply.is_error() &&
             server_reply.str().starts_with("WRONGTYPE its ")) {
    // On a key the lock keeps beside its name: "its fencing counter holds a hash, not a count".
    message = "lock '" + o->req.names->name + "': " + server_reply.str().substr(10);
  } else if (server_reply.is_error()) {
    message += server_reply.str();  // the server's own words
  } else {
    message += ec.message();
  }
  finish(o, {{}, ec, std::move(message)});
}

// A grant is born dead when its validity, counted from when the attempt was sent, has already
// passed as its reply arrives: handing it out would give the caller a lease that is lost at once
// while someone else may take the lock. It is undone on the server instead (ending our hold,
// which wakes waiters); a re-entry whose grant has run out too means that grant is lost.
bool lock_core::born_dead(const op& o, bool reentry, steady::time_point sent_at,
                          steady::time_point now) {
  if (validity_end(sent_at, o.req.lease_time) > now) return false;
  if (reentry) {
    if (auto held = grants_.find_live(*o.req.kind, o.req.names->name, o.req.owner)) {
      if (grants_.valid(*held, now)) return false;  // the hold it joins is still good
      counters.grants_born_dead.fetch_add(1, std::memory_order_relaxed);
      lose(held, lease_lost_reason::expired);  // which ends the owner's hold on the server
      return true;
    }
  }
  counters.grants_born_dead.fetch_add(1, std::memory_order_relaxed);
  o.req.kind->drop(call_for(*o.req.names, o.req.owner, o.req.lease_time, o.req.permits),
                   undo_tracked());
  return true;
}

void lock_core::discard_uncertain_grant(const op& o) {
  // A re-entry must not drop the holds its owner already has; its count may stay one too
  // high, which the lease's expiry resolves once the owner releases the rest.
  if (o.req.kind->reentrant() && grants_.find_live(*o.req.kind, o.req.names->name, o.req.owner)) {
    return;
  }
  o.req.kind->drop(call_for(*o.req.names, o.req.owner, o.req.lease_time, o.req.permits),
                   undo_tracked());
}

net::reply_callback lock_core::undo_tracked() const {
  return [settled = release_drain::track(releases_)](std::error_code, reply) {};
}

lease lock_core::grant_hold(const op& o, bool reentry, std::uint64_t fence,
                            steady::time_point sent_at) {
  const auto added =
      grants_.add_hold(o.req, reentry, fence, validity_end(sent_at, o.req.lease_time));
  if (added.stale) lose(added.stale, lease_lost_reason::not_held);
  after_grant(added);
  auto state = std::make_shared<lease_state>();
  state->core = shared_from_this();
  state->g = added.g;
  state->hold_id = added.hold_id;
  return lease_state::make(std::move(state));
}

void lock_core::lose(const std::shared_ptr<grant>& g, lease_lost_reason why) {
  auto callbacks = grants_.lose(g, why);
  if (!callbacks) return;
  counters.leases_lost.fetch_add(1, std::memory_order_relaxed);
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
