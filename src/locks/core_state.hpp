// The lock core's I/O-thread state, shared by the files that implement it: one pending
// acquisition (op) and the runtime (timers, waiter queues).
#pragma once

#include <asio/steady_timer.hpp>
#include <memory>
#include <string>
#include <unordered_map>

#include "locks/lock_core.hpp"

namespace dlock::detail {

struct lock_core::op : cancellable {
  op(lock_core* c, acquire_request r)
      : core(c), req(std::move(r)), machine(req.limits), timer(core->io().context()) {}
  void cancel() override;  // cancel.cpp
  // Not an owner: the client's handles keep the core alive, and the core's destructor finishes
  // every acquisition still pending (with errc::client_closed) before it lets go of anything.
  // So no handler on the I/O thread ever holds the last reference to the client.
  lock_core* core;
  acquire_request req;
  acquire_machine machine;
  asio::steady_timer timer;
  std::uint64_t timer_epoch = 0;
  node_id node = 0;
  bool may_queue = true;      // false: a single attempt, or a re-entry
  bool reentry = false;       // the owner held this lock here when the acquisition began
  bool direct_claim = false;  // its first attempt went out directly (see claim_direct)
  bool queued = false;
  bool attempting = false;
  bool woken_during_attempt = false;
  bool finished = false;
  bool unreplicated = false;  // a grant was undone because too few replicas acknowledged it
  // Cancelled with an attempt out: finished for its caller, but it keeps its place in the local
  // queue until the attempt's reply is in and any grant it brings is undone (cancel.cpp).
  bool settling = false;
  std::shared_ptr<void> settle_guard;  // while settling: a closing client waits (release_drain)
  reply last_error;  // the server's error reply behind the last failed attempt, if any
};

struct lock_core::runtime {
  explicit runtime(asio::io_context& io) : renew_timer(io), expiry_timer(io), linger_timer(io) {}
  asio::steady_timer renew_timer;
  asio::steady_timer expiry_timer;
  asio::steady_timer linger_timer;  // ends lingering subscriptions (waiting.cpp)
  bool linger_armed = false;
  bool renew_scheduled = false;
  std::unordered_map<std::string, queue> queues;  // by unlock channel
  recent_unsubscribes unsubscribed;
};

}  // namespace dlock::detail
