// The lock core's I/O-thread state, shared by the files that implement it: one pending
// acquisition (op: its state machine and what the driver acts with) and the runtime (timers,
// waiter queues).
#pragma once

#include <asio/steady_timer.hpp>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "locks/runtime/lock_core.hpp"
#include "locks/sansio/acquisition_fsm.hpp"

namespace dlock::detail {

struct lock_core::op : cancellable {
  op(lock_core* c, acquire_request r, acquisition_setup setup)
      : core(c), req(std::move(r)), fsm(std::move(setup)), timer(core->io().context()) {}
  void cancel() override;  // cancel.cpp
  // Not an owner: the client's handles keep the core alive, and the core's destructor finishes
  // every acquisition still pending (with errc::client_closed) before it lets go of anything.
  // So no handler on the I/O thread ever holds the last reference to the client.
  lock_core* core;
  acquire_request req;
  acquisition_fsm fsm;  // decides; everything below is what the driver acts with
  asio::steady_timer timer;
  std::uint64_t timer_epoch = 0;
  node_id node = 0;
  lease held;                          // the grant's lease, from hand_out until delivered
  reply last_error;                    // the server's reply behind the last failed attempt, if any
  std::shared_ptr<void> settle_guard;  // while settling: a closing client waits (release_drain)
  // Events that came while the driver was carrying out this acquisition's actions (an action
  // whose callback runs inline), taken in order once it is done.
  bool driving = false;
  std::vector<acquisition_fsm::event> backlog;
  // For woken_without_message: whether the last thing that moved this acquisition was its
  // timer rather than a message or a turn, whether its last attempt left on such a move, and
  // whether it ever listened for messages.
  bool moved_by_timer = false;
  bool attempt_on_timer = false;
  bool listened = false;
  /// Notes whether `what` moved this acquisition by its timer alone, or by something that told
  /// it the lock may be free; other events leave the last word as it was.
  void note_mover(acquisition_fsm::event::type what) {
    using type = acquisition_fsm::event::type;
    if (what == type::timer) {
      moved_by_timer = true;
    } else if (what == type::woken || what == type::admitted || what == type::behind_release ||
               what == type::start || what == type::start_direct) {
      moved_by_timer = false;
    }
  }
};

struct lock_core::runtime {
  explicit runtime(asio::io_context& io) : renew_timer(io), expiry_timer(io), linger_timer(io) {}
  asio::steady_timer renew_timer;
  asio::steady_timer expiry_timer;
  asio::steady_timer linger_timer;  // ends lingering subscriptions (waiting.cpp)
  bool linger_armed = false;
  bool renew_scheduled = false;
  steady::time_point renew_due{};                 // when the scheduled round should start
  std::unordered_map<std::string, queue> queues;  // by unlock channel
  recent_unsubscribes unsubscribed;
};

}  // namespace dlock::detail
