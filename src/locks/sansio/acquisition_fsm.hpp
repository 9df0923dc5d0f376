// One acquisition's life, sans-io: when it attempts, waits, queues behind this client's other
// waiters, listens for unlock messages, undoes a grant nobody may be handed, gives back its place
// on the server, and ends. It owns no socket, timer, queue or clock: the driver (lock_core, in
// acquire_driver.cpp) feeds it events and carries out the actions it returns, so every path,
// including the races a live server only hits by chance (a cancel while an attempt is out, an
// unlock message during an attempt, a grant that arrives dead), is unit-tested with made-up
// times (tests/unit/acquisition_fsm_test.cpp).
//
// Protocol: resume(event) returns the first action the event calls for; the driver carries it
// out and calls resume again with the answer the action asks for (queue_joined after
// join_queue, listening after listen, place_given_back after give_back_place) or with
// carried_out, until the action is `wait` (nothing more until the next outside event). Events
// that arrive while the driver is carrying out actions wait their turn (the driver queues them).
// give_back_place is not waited for: the server's answer comes later as place_given_back.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <system_error>
#include <utility>

#include "locks/sansio/attempt_timing.hpp"

namespace dlock::detail {

/// What an acquisition knows of itself when it begins.
struct acquisition_setup {
  acquire_limits limits;
  /// The owner already holds this (re-entrant) lock here: one attempt that never queues behind
  /// waiters, since they may be waiting for this very owner.
  bool reentry = false;
  /// The kind keeps a waiter's place on the server (the fair lock's queue), to be given back
  /// when a wait ends without the lock.
  bool keeps_waiter_place = false;
  /// The kind admits one holder at a time (a mutex), not several (permits, readers).
  bool one_holder = true;
  /// How long a grant stays valid counted from its attempt's send (the lease less the
  /// clock-drift allowance).
  steady::duration validity{0};
  /// The jitter's draws (attempt_timing); empty: a per-thread PRNG.
  std::function<double()> uniform;
};

/// An attempt's reply as the driver read it.
struct attempt_reply {
  enum class type { granted, reentered, busy, malformed, failed };
  type what = type::failed;
  /// type::failed: what failed. Granted or busy with errc::not_replicated: the master answered,
  /// but too few replicas acknowledged the script within the wait.
  std::error_code error{};
  std::int64_t pttl = 0;    // busy: the holder's remaining lease (-1 none, -2 gone meanwhile)
  std::uint64_t fence = 0;  // granted, reentered
  steady::time_point sent_at{};
  /// reentered: the hold this re-entry joins, as the grant registry sees it now; a re-entry
  /// whose own grant arrived dead keeps going on a valid one.
  enum class joined { none, valid, expired };
  joined joined_hold = joined::none;
};

class acquisition_fsm {
 public:
  /// Where the acquisition is. `settling`: ended for its caller while an attempt was out; the
  /// attempt's reply is still awaited, and what it brings is undone.
  enum class state { created, attempting, waiting, waiting_turn, settling, done };

  struct event {
    enum class type {
      start,             // begin on the I/O thread
      start_direct,      // begin on the caller's thread, whose first attempt goes out at once
      reply,             // the attempt's reply
      timer,             // the timer armed last went off
      woken,             // an unlock message, or a subscription confirmed: the lock may be free
      admitted,          // the waiter ahead in the local queue left: our turn
      behind_release,    // a release of ours just left: an attempt sent now runs right after it
      yield,             // another client was told the lock is free: hold back until `until`
      cancel,            // the caller cancelled
      close,             // the client is closing
      queued,            // a later acquisition put this one's direct attempt in the queue first
      place_given_back,  // the server answered give_back_place
      queue_joined,      // answer to join_queue
      listening,         // answer to listen
      carried_out,       // any other action is done
    };
    type what = type::carried_out;
    steady::time_point now{};
    /// Its turn in the local queue has come (meaningful while queued: the queue's own view).
    bool admitted = false;
    attempt_reply reply;                              // reply
    std::optional<steady::time_point> yield_until{};  // queue_joined at start: a yield in force
    bool message_waiting = false;      // listening: a message came while no waiter was queued
    bool predecessor_granted = false;  // admitted: the waiter ahead left with the lock...
    std::chrono::milliseconds predecessor_lease{0};  // ...for this long a lease
    steady::time_point until{};                      // yield

    static event of(type t, steady::time_point now, bool admitted = false) {
      event e;
      e.what = t;
      e.now = now;
      e.admitted = admitted;
      return e;
    }
  };

  /// How a grant nobody may be handed is undone.
  enum class undo {
    release_added,  // exactly the hold this attempt added (a re-entry's count, or the lock)
    drop,           // the owner's whole hold (a fresh grant)
    drop_if_fresh,  // drop, unless the owner holds it here already (an uncertain re-entry)
    lose_joined,    // the hold a dead re-entry joined has run out too: it is lost
  };

  /// How the acquisition ends for its caller.
  enum class ending { granted, not_acquired, failed };

  struct action {
    enum class type {
      wait,              // nothing to do until the next event
      send_attempt,      // send an attempt whose reply must come by `at`
      arm_timer,         // (re)arm the timer for `at`; time_point::max(): disarm it
      join_queue,        // take a place in the local queue; answer queue_joined
      listen,            // subscribe the queue to unlock messages; answer listening
      leave_queue,       // leave the local queue (`granted`: with the lock)
      undo_grant,        // undo what the last reply granted, as `how` says
      hand_out,          // make the lease of the grant the last reply brought
      end_direct_claim,  // the direct first attempt's claim on the name ends
      begin_settling,    // a closing client must wait for this acquisition's settling
      end_settling,      // it need not any more
      give_back_place,   // give back the place on the server; its answer is an event
      retire,            // no longer pending: disarm the timer, leave the client's table
      deliver,           // tell the caller: `ending`, `error`
    };
    type what = type::wait;
    steady::time_point at{};
    bool publish_direct = false;     // send_attempt: the first attempt, sent from the caller
    bool direct_first = false;       // join_queue: a direct attempt out on the name queues first
    bool take_message = false;       // listen: claim a message that came while nobody waited
    bool granted = false;            // leave_queue
    undo how = undo::drop;           // undo_grant
    bool born_dead = false;          // undo_grant: the grant's validity ended before its reply
    bool unreplicated = false;       // undo_grant: too few replicas acknowledged the grant
    bool reentry = false;            // hand_out
    std::uint64_t fence = 0;         // hand_out
    steady::time_point sent_at{};    // hand_out
    ending end = ending::failed;     // deliver
    std::error_code error{};         // deliver
    bool with_server_reply = false;  // deliver: the last failed reply's text explains the error
  };

  explicit acquisition_fsm(acquisition_setup setup);

  /// Whether the grant `r` brought, its reply in at `now`, arrived dead (its `validity`, counted
  /// from the send, has passed: handing it out would give a lease lost at once while someone
  /// else may take the lock), and then how it is undone; nothing if it may be handed out. A
  /// re-entry joining a hold still valid is not dead; one joining a hold run out too loses it.
  static std::optional<undo> undo_if_dead(const attempt_reply& r, steady::duration validity,
                                          steady::time_point now);

  /// Takes `e` and returns the first (or, after an answer, the next) action to carry out.
  action resume(const event& e);

  state current() const noexcept { return state_; }
  /// False for a single attempt and for a re-entry: it never joins the local queue.
  bool may_queue() const noexcept { return may_queue_; }
  bool reentry() const noexcept { return setup_.reentry; }
  /// Its first attempt went out directly and its reply is not handled yet.
  bool direct_claim() const noexcept { return direct_claim_; }
  /// In the local queue now (the driver reads its turn from the queue only then).
  bool queued() const noexcept { return queued_; }
  /// Ended for its caller (settling or done).
  bool finished() const noexcept { return state_ == state::settling || state_ == state::done; }
  /// An attempt is out.
  bool attempting() const noexcept { return attempting_; }
  int attempts() const noexcept { return timing_.attempts(); }
  const acquire_limits& limits() const noexcept { return timing_.limits(); }

 private:
  // What the current event is waiting to hear back.
  enum class answer {
    none,
    start_joined,
    start_listening,
    busy_joined,
    busy_listening,
    settle_joined
  };

  void on_event(const event& e);
  void on_answer(const event& e);
  void on_reply(const attempt_reply& r, steady::time_point now);
  void on_unreplicated(const attempt_reply& r, steady::time_point now);
  void on_granted(const attempt_reply& r, steady::time_point now);
  void on_busy(std::int64_t pttl, steady::time_point now);
  void after_busy_listening(bool message_waiting, steady::time_point now);
  void on_settled(const attempt_reply& r);
  void wake(steady::time_point now);
  void run(attempt_timing::step s);
  void attempt(steady::time_point until, bool publish_direct = false);
  void arm(steady::time_point at);
  void finish(ending end, std::error_code ec = {}, bool with_server_reply = false);
  void finish_rest();
  void leave_queue(bool granted);
  void push_undo(undo how, bool born_dead = false, bool unreplicated = false);
  /// True if the acquisition, ending (`held` or not), has a place on the server to give back.
  bool keeps_place(bool held) const noexcept;
  void push(action a) { pending_.push_back(a); }
  void push(action::type t) {
    action a;
    a.what = t;
    pending_.push_back(a);
  }
  action next();

  attempt_timing timing_;
  const acquisition_setup setup_;
  const bool may_queue_;
  state state_ = state::created;
  answer awaiting_ = answer::none;
  bool queued_ = false;
  bool admitted_ = false;
  bool attempting_ = false;
  bool direct_claim_ = false;          // the first attempt went out directly, claiming the name
  bool woken_during_attempt_ = false;  // its answer may be stale
  bool unreplicated_ = false;          // a grant was undone: too few replicas had it
  attempt_timing::step busy_step_{};   // the busy answer's step, while listening is set up
  bool claim_ends_ = false;            // the claim ends once this reply's handling is done
  std::optional<steady::time_point> yield_until_;  // at start, while listening is set up
  steady::time_point now_{};  // the current event's time, for its continuations
  action ending_{};           // the deliver action, once the ending is known
  // What the server's answer to give_back_place lets happen: the caller hears (deliver) or a
  // closing client stops waiting (end_settling).
  action::type after_place_ = action::type::wait;
  std::deque<action> pending_;
};

}  // namespace dlock::detail
