// Local waiters: each lock name's queue (by unlock channel), its subscription, and what unlock
// messages do to it. waiter_queue.hpp decides; this file acts on the decisions.
#include "locks/runtime/core_state.hpp"

namespace dlock::detail {

lock_core::queue& lock_core::join_queue(const std::shared_ptr<op>& o) {
  on_io_thread();
  const auto& channel = o->req.names->channel;
  auto it = rt_->queues.find(channel);
  if (it == rt_->queues.end()) {
    it = rt_->queues.emplace(channel, queue(o->req.kind->max_holders())).first;
  }
  it->second.push(o);
  activity_.add_local(channel, +1);
  return it->second;
}

// The next waiter to be admitted tries at once if the lock may be free (its predecessor gave up
// or failed); if the predecessor was granted, the lock is held, and the newcomer waits for the
// unlock message or the lease. Posted rather than called: the next waiter may be finishing too
// (its deadline passed), and the one after it... each in its own turn of the loop, never one
// deep recursion.
void lock_core::leave_queue(const std::shared_ptr<op>& o, bool granted) {
  on_io_thread();
  const auto& channel = o->req.names->channel;
  auto it = rt_->queues.find(channel);
  if (it == rt_->queues.end()) return;
  auto& q = it->second;
  const bool was_admitted = q.admitted(o);
  q.remove(o);
  activity_.add_local(channel, -1);
  if (q.empty() && q.subscription != 0 && o->req.kind->lingers()) {
    q.idle_since = steady::now();
    q.unclaimed_message = false;
    arm_linger_sweep();
    return;
  }
  if (q.empty()) {
    if (q.subscription != 0) {
      topology_->unsubscribe(q.subscription);
      rt_->unsubscribed.note(channel, steady::now());
    }
    rt_->queues.erase(it);
    return;
  }
  const auto* next = was_admitted ? q.newly_admitted() : nullptr;
  if (!next) return;
  io().post([next = *next, granted, lease = o->req.lease_time] {
    auto& core = *next->core;
    if (next->fsm.finished() || !core.admitted(next)) return;
    auto e = core.event_for(next, acquisition_fsm::event::type::admitted);
    e.predecessor_granted = granted;
    e.predecessor_lease = lease;
    core.drive(next, e);
  });
}

bool lock_core::admitted(const std::shared_ptr<op>& o) const {
  on_io_thread();
  auto it = rt_->queues.find(o->req.names->channel);
  return it != rt_->queues.end() && it->second.admitted(o);
}

// An acquisition that arrives while a direct first attempt on its name is in flight queues
// behind it: the direct one, which came first, takes its place in the queue now.
void lock_core::queue_direct_first(const std::string& channel) {
  auto first = std::static_pointer_cast<op>(activity_.direct(channel));
  if (first && first->fsm.direct_claim() && !first->fsm.queued() && !first->fsm.finished()) {
    join_queue(first);
    drive(first, acquisition_fsm::event::of(acquisition_fsm::event::type::queued, steady::now()));
  }
}

void lock_core::subscribe(queue& q, const std::string& channel) {
  if (q.subscription != 0 || q.empty()) return;
  q.subscription =
      topology_->subscribe(q.front()->node, channel,
                           unowned([this, channel](std::string_view, std::string_view message) {
                             on_unlock_message(channel, message);
                           }),
                           unowned([this, channel] { on_subscribed(channel); }));
}

void lock_core::wake(const std::shared_ptr<op>& o) {
  drive(o, event_for(o, acquisition_fsm::event::type::woken));
}

void lock_core::wake_front(const std::string& channel, std::size_t how_many) {
  on_io_thread();
  auto it = rt_->queues.find(channel);
  if (it == rt_->queues.end() || it->second.empty()) return;
  // Copies: waking may change the queue.
  for (const auto& o : it->second.front_waiters(how_many))
    wake(o);
}

// A lingering subscription ends once nobody has waited on it for a while.
void lock_core::arm_linger_sweep() {
  on_io_thread();
  if (std::exchange(rt_->linger_armed, true)) return;
  rt_->linger_timer.expires_after(linger_time);
  rt_->linger_timer.async_wait(unowned([this](std::error_code ec) {
    if (!ec) end_idle_subscriptions();
  }));
}

void lock_core::end_idle_subscriptions() {
  on_io_thread();
  rt_->linger_armed = false;
  const auto now = steady::now();
  bool lingering = false;
  for (auto it = rt_->queues.begin(); it != rt_->queues.end();) {
    auto& q = it->second;
    if (!q.empty() || q.subscription == 0) {
      ++it;
    } else if (now - q.idle_since < linger_time) {
      lingering = true;
      ++it;
    } else {
      topology_->unsubscribe(q.subscription);
      rt_->unsubscribed.note(it->first, now);
      it = rt_->queues.erase(it);
    }
  }
  if (lingering) arm_linger_sweep();
}

void lock_core::on_unlock_message(const std::string& channel, std::string_view message) {
  on_io_thread();
  counters.unlock_messages.fetch_add(1, std::memory_order_relaxed);
  auto it = rt_->queues.find(channel);
  if (it == rt_->queues.end()) return;
  if (it->second.empty()) {
    it->second.unclaimed_message = true;  // for the waiter whose attempt is on its way back
    return;
  }
  if (it->second.message_arrived() != queue::message_action::wake) return;
  activity_.end_yield(channel);  // someone else released: our turn to compete again
  wake_front(channel, it->second.front()->req.kind->woken_by(message));
}

void lock_core::on_subscribed(const std::string& channel) {
  on_io_thread();
  auto it = rt_->queues.find(channel);
  if (it == rt_->queues.end()) return;
  it->second.confirmed = true;
  // A lingering queue may have emptied before its subscription was confirmed (its waiter was
  // cancelled, or its wait ended): nobody to wake.
  if (it->second.empty()) return;
  // While we yield, the waiter we yielded to holds or is taking the lock; its release will be
  // heard now that we listen.
  if (activity_.yielding(channel, steady::now())) return;
  // Messages sent before the subscription was live (or while it was down) are lost: check now.
  wake_front(channel, it->second.front()->req.kind->max_holders());
}

}  // namespace dlock::detail
