// The inside of a dlock::client: its topology (the connections), the grants it holds, the
// watchdog that renews them and the expiry watch that declares them lost, and the acquisitions
// in progress with their waiter queues. The concepts live in their own files (in runtime/
// unless named otherwise):
//   sansio/acquisition_fsm.*  one acquisition's decisions: attempts, waits, born-dead and
//                             unreplicated grants, cancelling, settling, finishing
//   acquire_driver.cpp        carries out those decisions; cancel.cpp: cancelling one
//   waiting.cpp               waiter queues, subscriptions, unlock messages (sansio/waiter_queue)
//   release.cpp               releases and extensions, and the echo of our own unlock messages
//   watchdog.cpp              renewal rounds (renewal_plan.hpp groups them), the expiry watch
//   grant_registry.*          the grants table; name_activity.* the per-name table user threads
//                             read
//   lock_core.cpp             construction, teardown, requests, statistics
//   observing.cpp             what the events, the log and the metrics hear (observer.hpp)
//   guarded/                  acquisitions that carry reads, writes that run only while a lease
//                             holds its lock
//
// Threads: user threads call acquire, release, extend and the lease accessors; everything that
// touches timers, subscriptions or waiter queues runs on the topology's I/O thread (on_io_thread
// says so to clang's analysis). Shared state is in the registry and the activity table, each
// behind its own mutex.
#pragma once

#include <asio/steady_timer.hpp>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "core/spare_nodes.hpp"
#include "core/sync.hpp"
#include "core/user_callback.hpp"
#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/multi_lock.hpp"
#include "locks/kinds/redlock.hpp"
#include "locks/runtime/grant.hpp"
#include "locks/runtime/grant_registry.hpp"
#include "locks/runtime/name_activity.hpp"
#include "locks/runtime/observer.hpp"
#include "locks/runtime/release_drain.hpp"
#include "locks/sansio/acquisition_fsm.hpp"
#include "locks/sansio/guarded_calls.hpp"
#include "locks/sansio/waiter_queue.hpp"
#include "net/io_thread.hpp"
#include "topology/topology.hpp"

namespace dlock::detail {

/// What a client counts, for client_stats.
struct lock_counters {
  std::atomic<std::uint64_t> grants{0}, attempts{0}, releases{0}, release_failures{0},
      leases_lost{0}, renewal_rounds{0}, renewal_calls{0}, leases_renewed{0}, unlock_messages{0},
      grants_born_dead{0};
};

/// An owner of its own for an acquisition that is not a thread's (a coroutine's, asio's): unique
/// in the process, and the client's id in front of it makes it unique everywhere (async.cpp).
std::string async_owner_id();

/// The limits of an acquisition that waits until `deadline` (in the past: one attempt), and of
/// one that waits up to `wait` from now (negative: one attempt); async.cpp.
acquire_limits limits_until(steady::time_point deadline);
acquire_limits limits_for_wait(std::chrono::milliseconds wait);

/// Starts an acquisition of every one of a multi-lock's `names` (sorted, distinct);
/// `done` runs once, on the I/O thread. Throws errc::invalid_argument for bad options, having
/// sent nothing and left `done` alone (multi_lock.cpp).
acquire_handle start_multi_acquisition(lock_core& core, const std::vector<std::string>& names,
                                       lease_options o, acquire_limits limits,
                                       multi_acquire_callback& done);

/// Starts the upgrade of the read hold `hold` of `reads`' lock to a write hold, waiting up to
/// `wait`; `done` runs once, on the I/O thread. Throws errc::invalid_argument unless `hold` is a
/// live read hold of that lock through its client, having sent nothing and left `done` alone
/// (read_write_lock.cpp).
acquire_handle start_upgrade(const lock_handle& reads, const std::shared_ptr<lease_state>& hold,
                             std::chrono::milliseconds wait, acquire_callback& done);

/// `e`'s message without the code's own text, which error::what() appends (async.cpp).
std::string bare_message(const error& e);

/// An error from starting an acquisition with a callback, reported as every outcome is: through
/// `done`, on the I/O thread, never from the starting call.
template <class Result, class Callback>
void report_on_io_thread(net::io_thread& io, Callback done, const error& e) {
  io.post([done = std::move(done), ec = e.code(), what = bare_message(e)] {
    Result r{};
    r.error = ec;
    r.message = what;
    call_user(done, std::move(r));
  });
}

class lock_core : public std::enable_shared_from_this<lock_core> {
 public:
  /// Connects; throws like redis_client, or errc::invalid_argument for bad options.
  static std::shared_ptr<lock_core> create(client_options options);
  ~lock_core();

  const client_options& options() const noexcept { return options_; }
  const std::string& id() const noexcept { return uuid_; }
  /// What each grant records of its holder (holder_record.hpp); empty with record_holder off.
  std::string_view holder_record() const noexcept { return holder_record_; }
  /// `n`'s holder record key, or nullptr when the client records none (renewal_item).
  const std::string* record_key_of(const lock_names& n) const noexcept {
    return holder_record_.empty() ? nullptr : &n.holder_key;
  }
  topology& topo() noexcept { return *topology_; }
  net::io_thread& io() noexcept { return *io_; }
  const grant_registry& grants() const noexcept { return grants_; }
  client_stats stats() const noexcept;
  metrics_snapshot metrics() const;
  /// Events, log lines and metrics (observer.hpp).
  observer& observe() noexcept { return observer_; }
  lock_counters counters;

  /// Builds an acquisition from user arguments (validates them; throws errc::invalid_argument).
  acquire_request make_request(const lock_handle& h, const lease_options& o, acquire_limits limits,
                               acquire_callback done);
  /// Starts an acquisition; `r.done` runs on the I/O thread exactly once. The handle cancels it.
  acquire_handle acquire(acquire_request r);
  /// Ends the acquisition `target` (or nothing, if expired) with errc::cancelled if it has not
  /// completed: posted to `io`, its client's I/O thread. Any thread; never blocks; needs no
  /// reference to the client (cancel.cpp).
  static void cancel(net::io_thread& io, std::weak_ptr<cancellable> target) noexcept;
  /// The handle that cancels `target`, an acquisition on this client.
  acquire_handle handle_for(const std::shared_ptr<cancellable>& target) const;
  /// Throws errc::invalid_argument, naming `what`, when called on the I/O thread: a blocking
  /// call there would wait for itself.
  void forbid_io_thread(const char* what);
  /// Acquires through `h` by `deadline` (in the past: one attempt), blocking the caller: the
  /// lease, or an empty one. Throws as basic_lock::try_acquire_until (also on the I/O thread).
  lease acquire_until(const lock_handle& h, const lease_options& o, steady::time_point deadline);
  /// Starts an acquisition that carries reads run under the lock
  /// (basic_lock::acquire_and_read_async; read_under_lock.cpp): `done` runs on the I/O thread
  /// exactly once. Throws errc::invalid_argument, having sent nothing and left `done` alone,
  /// for bad arguments.
  acquire_handle acquire_and_read_async(const lock_handle& h, const lease_options& o,
                                        acquire_limits limits,
                                        std::vector<std::vector<std::string>> reads,
                                        acquire_and_read_callback&& done);
  /// The same, blocking the caller (basic_lock::try_acquire_and_read); throws its errors.
  lease_and_reads acquire_and_read(const lock_handle& h, const lease_options& o,
                                   steady::time_point deadline,
                                   const std::vector<std::vector<std::string>>& reads);
  /// The one server where commands guarded by a hold of `kind` on `name` run (reads or writes
  /// under a lock; `what` names them in errors). Throws errc::invalid_argument for a bad command
  /// (check_guarded_commands), a semaphore (its permits have no holder to check) or a RedLock
  /// lock (several servers) (write_under_lock.cpp).
  node_id guarded_node(const lock_kind& kind, const std::string& name, const command_list& commands,
                       std::string_view what);
  /// Runs `writes` on the lock's server if `hold` still holds it there, atomically with that
  /// check (lease::write_while_held), and, if `release`, releases the hold right behind them in
  /// the same send (lease::write_and_release). `done` runs once, on the I/O thread; a hold found
  /// gone is lost (on_lost runs) unless it is being released; a hold known lost already is
  /// released at once and reported so. Throws errc::invalid_argument, or errc::lease_lost for a
  /// hold known lost when not releasing, having sent nothing, left the hold as it was and `done`
  /// alone.
  void write_under_hold(lease_state& hold, const command_list& writes, bool release,
                        std::function<void(call_result<std::vector<reply>>)>& done);
  /// Hands out a grant that a script of the caller's own made for `owner` on `h`'s lock (a
  /// multi-lock's one call over several names) as an ordinary lease: registered, renewed by the
  /// watchdog unless `o` fixes the lease time, signalled when lost, released on its own. A grant
  /// whose validity, counted from `sent_at`, has already ended is undone on the server instead
  /// and an empty lease returned, as the driver does (acquisition_fsm::undo_if_dead). I/O thread
  /// (it may run on_lost callbacks); throws as make_request (multi_grant.cpp).
  lease adopt_grant(const lock_handle& h, const std::string& owner, const lease_options& o,
                    std::uint64_t fence, bool reentry, steady::time_point sent_at);
  /// Releases one hold. Blocks for the server's answer unless on the I/O thread (then it sends
  /// the release and reports `released`).
  release_outcome release(lease_state& hold) noexcept;
  /// Releases one hold without waiting; `done` (may be empty) learns the outcome on the I/O
  /// thread, or inline if the hold was already lost.
  void release_async(lease_state& hold, std::function<void(release_outcome)> done) noexcept;
  /// Extends a hold's grant `g` to `lease_time` from now without waiting (lease::extend_async):
  /// `done` runs once, on the I/O thread, with true (extended), false (no longer held: the hold
  /// is lost, its on_lost run) or the error. Throws errc::invalid_argument (a non-positive time,
  /// a kind without a lease) or errc::lease_lost (lost already), having sent nothing and left
  /// `done` alone.
  void extend_async(const std::shared_ptr<grant>& g, std::chrono::milliseconds lease_time,
                    std::function<void(call_result<bool>)>& done);
  /// The same, waiting for the outcome; throws its errors.
  bool extend(lease_state& hold, std::chrono::milliseconds lease_time);
  /// Runs one script call on the node that serves `key`; `done` gets the reply on the I/O thread.
  void call_async(const script& s, std::string_view key, std::span<const std::string_view> keys,
                  std::span<const std::string_view> args, net::reply_callback done);
  /// Runs one script call on every node that serves `key` (RedLock: every master) at once;
  /// `done` gets one (error, reply) per node, in the nodes' order, once all have answered.
  void call_each_async(const script& s, std::string_view key,
                       std::span<const std::string_view> keys,
                       std::span<const std::string_view> args,
                       std::function<void(std::vector<std::pair<std::error_code, reply>>)> done);
  /// Runs one plain command where `key` lives (introspection); `done` gets the reply on the I/O
  /// thread.
  void command_async(std::string_view key, std::span<const std::string_view> args,
                     net::reply_callback done);
  /// The same, waiting for the reply. Throws dlock::error with the server's text, or
  /// errc::invalid_argument on the I/O thread.
  reply command(std::string_view key, std::span<const std::string_view> args);

  /// Registers `close` to run once, on the I/O thread, when the client closes: after the
  /// topology has failed every call in flight with client_closed and the acquisitions were
  /// told. For work outside the acquisition driver that waits on this client without keeping
  /// it open (a latch's wait), so that it ends too. Returns an id for `forget_close`. I/O
  /// thread only.
  std::uint64_t on_close(std::function<void()> close);
  /// Drops a registration that has not run (unknown ids are ignored). I/O thread only.
  void forget_close(std::uint64_t id) noexcept;

 private:
  reply wait_for_reply(const std::function<void(net::reply_callback)>& send);
  /// Wraps `handler`, work of the core's own on the I/O thread (a timer, a posted step, a
  /// renewal's reply, an unlock message), so that it runs only while the core is still owned
  /// and never owns it itself. A handler that owned the core made the I/O thread its last owner
  /// whenever the user let go meanwhile (a lost lease wakes its holder, which closes the client
  /// and returns from main): the teardown then had to finish on a thread of its own, which raced
  /// exit's cleanups (`dlock run` died of SIGSEGV after deciding its exit status). Unowned, the
  /// user's last release tears the core down on the user's thread. The core cannot vanish under
  /// a running handler: its destructor does its work on the I/O thread, after the handler.
  template <class Handler>
  auto unowned(Handler handler) {
    return [alive = weak_from_this(), handler = std::move(handler)](auto&&... args) mutable {
      if (!alive.expired()) handler(std::forward<decltype(args)>(args)...);
    };
  }
  struct op;
  using queue = waiter_queue<std::shared_ptr<op>>;
  struct runtime;

  explicit lock_core(client_options options);
  /// The kind calls of `base` go through: `base` itself, or its RedLock form over every master.
  const lock_kind& kind_for(const lock_kind& base) const noexcept;
  lock_call call_for(const lock_names& n, const std::string& owner, std::chrono::milliseconds lease,
                     std::int64_t permits = 1) noexcept;
  steady::time_point validity_end(steady::time_point sent_at,
                                  std::chrono::milliseconds lease) const;

  /// Says that the caller runs on the I/O thread, where the runtime's state (rt_) lives; clang's
  /// analysis refuses that state to code that has not said so, debug builds check it.
  void on_io_thread() const DLOCK_THREAD_ANNOTATION(assert_capability(io_role_)) {
    io_role_.assert_here(io_->in_io_thread());
  }

  // acquire_driver.cpp (I/O thread, except the direct first attempt)
  /// Feeds `e` to `o`'s state machine and carries out the actions it returns, until it waits.
  /// An event arriving meanwhile (from an action's inline callback) is fed after them.
  void drive(const std::shared_ptr<op>& o, acquisition_fsm::event e);
  /// Carries out `a`; returns the answer the machine asked for, or carried_out.
  acquisition_fsm::event carry_out(const std::shared_ptr<op>& o, const acquisition_fsm::action& a)
      DLOCK_REQUIRES(io_role_);
  /// An event of `what` now, with `o`'s turn in the local queue as the queue has it.
  acquisition_fsm::event event_for(const std::shared_ptr<op>& o,
                                   acquisition_fsm::event::type what) const;
  void submit_attempt(const std::shared_ptr<op>& o, steady::time_point until);
  void on_attempt_reply(const std::shared_ptr<op>& o, std::error_code ec, const reply& r,
                        steady::time_point sent_at);
  /// The hold an acquisition of `r` re-entered, as the grants table has it at `now`.
  attempt_reply::joined joined_hold(const acquire_request& r, steady::time_point now) const;
  /// Undoes a grant made for `r` that nobody is handed, as `how` says.
  void undo_grant(const acquire_request& r, acquisition_fsm::undo how, bool born_dead,
                  bool unreplicated = false);
  void arm_op_timer(const std::shared_ptr<op>& o, steady::time_point at);
  void deliver(op& o, const acquisition_fsm::action& a);
  std::string failure_message(const op& o, std::error_code ec, const reply& server_reply) const;
  /// The reply callback for a command that undoes a grant nobody was handed: counted as a
  /// release is (release_drain), so a client closing meanwhile waits for it.
  net::reply_callback undo_tracked() const;
  /// Registers a grant made for `r` (watchdog, expiry watch, on_lost) and makes its lease.
  lease hand_out(const acquire_request& r, bool reentry, std::uint64_t fence,
                 steady::time_point valid_until);
  void lose(const std::shared_ptr<grant>& g, lease_lost_reason why);
  /// Counts and reports a grant to `r` with `fence` at `now`.
  void note_grant(const acquire_request& r, std::uint64_t fence, steady::time_point now);
  /// Reports a grant to `r` undone for `why`.
  void note_undone(const acquire_request& r, undo_cause why);
  /// Counts how an acquisition of `r` that was not granted ended, and logs a failure.
  void note_not_granted(const acquire_request& r, std::error_code ec, const std::string& message);
  /// Counts and reports the end of a hold of `g` held since `since`.
  void note_release(const grant& g, steady::time_point since, std::error_code ec, const reply& r);
  /// Counts and reports a grant to `r` found by a timer's re-check, not a message.
  void note_woken_without_message(const acquire_request& r);
  /// Counts and reports the loss of `g`.
  void note_loss(const grant& g, lease_lost_reason why);
  /// Reports the renewals in `grants` that failed (`why`) while their leases were still valid.
  void note_renewal_failure(const std::vector<std::shared_ptr<grant>>& grants,
                            const std::string& why);

  // waiting.cpp (I/O thread)
  /// Wakes `o`: an unlock message, or a subscription confirmed (the lock may be free).
  void wake(const std::shared_ptr<op>& o);

  // How long a lingering subscription (lock_kind::lingers) outlives its last waiter.
  static constexpr std::chrono::seconds linger_time{2};

  // waiting.cpp (I/O thread)
  queue& join_queue(const std::shared_ptr<op>& o);
  void leave_queue(const std::shared_ptr<op>& o, bool granted);
  bool admitted(const std::shared_ptr<op>& o) const;
  void queue_direct_first(const std::string& channel);
  void subscribe(queue& q, const std::string& channel);
  void on_unlock_message(const std::string& channel, std::string_view message);
  void on_subscribed(const std::string& channel);
  void wake_front(const std::string& channel, std::size_t how_many = 1);
  void arm_linger_sweep();
  void end_idle_subscriptions();

  // release.cpp
  queue::release_note before_release(const std::string& channel);
  void attempt_behind_release(const std::string& channel, const lock_kind& kind);
  void after_release(const std::string& channel, queue::release_note note, const reply& r,
                     steady::duration round_trip);

  // watchdog.cpp (I/O thread)
  void schedule_renewal(bool soon = false);
  void renew_all();
  void arm_expiry_check();
  void check_expiry();
  void after_grant(const grant_registry::added& a);

  client_options options_;
  // Before the I/O thread: the connections report to it from their first moment.
  observer observer_;
  std::shared_ptr<net::io_thread> io_;  // the client's: every connection and timer runs on it
  std::unique_ptr<topology> topology_;
  const std::string uuid_;
  const std::string holder_record_;
  std::chrono::milliseconds watchdog_period_;
  grant_registry grants_;
  quorum_counters quorum_counters_;
  // RedLock only: each kind's form over every master, by the kind it wraps (fixed after
  // construction, so read without a lock).
  std::map<const lock_kind*, std::unique_ptr<lock_kind>> redlock_kinds_;
  name_activity activity_;  // keyed by unlock channel, as the queues are
  // Releases sent and not yet answered everywhere they went (a lease's destructor and
  // release_async do not wait for them), the undos of grants nobody was handed, and attempts
  // out for acquisitions already ended, which a closing client waits for: each may leave a
  // hold on the server until its lease lapses.
  const std::shared_ptr<release_drain> releases_ = std::make_shared<release_drain>();

  mutex ops_mutex_;
  using op_set = std::unordered_set<std::shared_ptr<op>>;
  op_set pending_ops_ DLOCK_GUARDED_BY(ops_mutex_);
  spare_nodes<op_set> spare_op_nodes_ DLOCK_GUARDED_BY(ops_mutex_);
  // The I/O thread's role: what only that thread touches is guarded by it (on_io_thread).
  thread_role io_role_;
  std::unique_ptr<runtime> rt_ DLOCK_GUARDED_BY(io_role_);  // created and destroyed there
  // on_close registrations by id (I/O thread only).
  std::map<std::uint64_t, std::function<void()>> closers_;
  std::uint64_t next_closer_ = 1;
};

}  // namespace dlock::detail
