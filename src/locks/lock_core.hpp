// The shared inside of a dlock::client: its Redis connection, the lock scripts, the table of
// grants it holds (which the watchdog renews and the expiry check watches), and the waiter
// queues fed by the subscriber connection.
//
// Threads: user threads call acquire/release/introspection; everything that touches timers,
// subscriptions or waiter queues runs on the client's single I/O thread. The grants table is
// shared by both and guarded by `grants_mutex_`.
#pragma once

#include <asio/steady_timer.hpp>
#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/lease.hpp"
#include "dlock/lock.hpp"
#include "dlock/redis_client.hpp"
#include "dlock/script.hpp"
#include "locks/acquire_machine.hpp"
#include "net/redis_client_impl.hpp"

namespace dlock::detail {

enum class lock_kind { reentrant, simple };

/// A lock's key and the keys derived from it by Redisson's rule (dlock/keys.hpp).
struct lock_names {
  /// `shared_fence_counter`: client_options::fence_counter (empty: a counter per name).
  lock_names(std::string lock_name, const std::string& shared_fence_counter = {});
  std::string name;
  std::string fence_key;  // redisson_lock_token:{NAME}
  std::string channel;    // redisson_lock__channel:{NAME}
};

/// The unlock message Redisson publishes and listens for.
inline constexpr std::string_view unlock_message = "0";

class lock_core;

/// One owner's grant of one lock, shared by all holds of that owner (re-entries). Fields below
/// `holds` are guarded by lock_core::grants_mutex_.
struct grant {
  lock_kind kind;
  std::shared_ptr<const lock_names> names;
  std::string owner;  // hash field (reentrant) or token (simple)
  std::uint64_t fence = 0;
  std::chrono::milliseconds lease_time{0};
  bool watchdog = false;

  int holds = 0;
  bool in_table = false;
  steady::time_point valid_until{};
  std::optional<lease_lost_reason> lost;
  std::stop_source stop;
  std::vector<std::pair<std::uint64_t, std::function<void(lease_lost_reason)>>> on_lost;
};

/// One hold: what a `dlock::lease` points to.
struct lease_state {
  std::shared_ptr<lock_core> core;
  std::shared_ptr<grant> g;
  std::uint64_t hold_id = 0;
  static lease make(std::shared_ptr<lease_state> s) { return lease(std::move(s)); }
};

/// Everything a lock handle needs: the core, the names, and the Lockable holds per thread.
struct lock_handle {
  std::shared_ptr<lock_core> core;
  std::shared_ptr<const lock_names> names;
  lock_kind kind;
  std::mutex mutex;
  std::unordered_map<std::uint64_t, std::vector<lease>> holds_by_thread;
};

/// The owner field of the calling thread for a client: "<uuid>:<n>", n a process-unique
/// number given to each thread on first use (like a Java thread id; never reused).
std::uint64_t current_thread_number() noexcept;

struct acquire_request {
  std::shared_ptr<const lock_names> names;
  lock_kind kind;
  std::string owner;  // reentrant: the field; simple: a fresh random token
  std::chrono::milliseconds lease_time;
  bool watchdog;
  std::function<void(lease_lost_reason)> on_lost;
  acquire_limits limits;
  acquire_callback done;
};

class lock_core : public std::enable_shared_from_this<lock_core> {
 public:
  /// Connects; throws like redis_client, or errc::invalid_argument for bad options.
  static std::shared_ptr<lock_core> create(client_options options);
  ~lock_core();

  const client_options& options() const noexcept { return options_; }
  const std::string& id() const noexcept { return uuid_; }
  redis_client& redis() noexcept { return *redis_; }
  net::io_thread& io() noexcept { return impl_.io; }
  client_stats stats() const noexcept;

  /// Builds an acquisition from user arguments (validates them; throws errc::invalid_argument).
  acquire_request make_request(const lock_handle& h, const lease_options& o, acquire_limits limits,
                               acquire_callback done);
  /// Starts an acquisition; `r.done` runs on the I/O thread exactly once.
  void acquire(acquire_request r);
  /// Releases one hold. Blocks for the server's answer unless on the I/O thread (then it sends
  /// the release and reports `released`).
  release_outcome release(lease_state& hold) noexcept;
  /// Releases one hold without waiting; `done` (may be empty) learns the outcome on the I/O
  /// thread, or inline if the hold was already lost.
  void release_async(lease_state& hold, std::function<void(release_outcome)> done) noexcept;
  /// Extends a hold's grant to `lease_time` from now.
  bool extend(lease_state& hold, std::chrono::milliseconds lease_time);
  /// Reads a hold's grant state under the grants mutex.
  template <class F>
  auto with_grant(const grant& g, F&& f) const {
    std::lock_guard lock(grants_mutex_);
    return f(g);
  }

  // Scripts (public for the lock handles' introspection and the fencing helper).
  const script reentrant_acquire, reentrant_release, reentrant_drop, simple_acquire, simple_release,
      renew, force_unlock, lock_info, fenced_set;

  struct counters {
    std::atomic<std::uint64_t> grants{0}, attempts{0}, releases{0}, release_failures{0},
        leases_lost{0}, renewal_rounds{0}, renewal_calls{0}, leases_renewed{0}, unlock_messages{0},
        grants_born_dead{0};
  } counters;

 private:
  struct op;
  struct waiter_queue;
  struct runtime;

  explicit lock_core(client_options options);

  // Acquisition (I/O thread).
  void start(const std::shared_ptr<op>& o);
  void send_attempt(const std::shared_ptr<op>& o, steady::time_point until);
  void submit_attempt(const std::shared_ptr<op>& o, steady::time_point until);
  void on_attempt_reply(const std::shared_ptr<op>& o, std::error_code ec, const reply& r,
                        steady::time_point sent_at);
  void run_step(const std::shared_ptr<op>& o, acquire_machine::step s);
  void arm_op_timer(const std::shared_ptr<op>& o, steady::time_point at);
  void wake(const std::shared_ptr<op>& o);
  void finish(const std::shared_ptr<op>& o, acquire_result result);
  void fail(const std::shared_ptr<op>& o, std::error_code ec, const reply& server_reply);
  bool born_dead(const op& o, bool reentry, steady::time_point sent_at, steady::time_point now);
  void discard_uncertain_grant(const op& o);
  bool is_head(const op& o) const;
  bool holds_locally(const op& o) const;

  // Waiter queues (I/O thread).
  waiter_queue& join_queue(const std::shared_ptr<op>& o);
  void leave_queue(const op& o);
  void on_unlock_message(const std::string& channel);
  void on_subscribed(const std::string& channel);
  void wake_head(const std::string& channel);
  struct release_note {
    bool tracked = false;    // local waiters existed: messages are held meanwhile
    bool confirmed = false;  // our subscription was live: its echo will come
    bool requested = false;  // our subscription was at least on its way: it may be counted
  };
  release_note before_release(const std::string& channel);
  void after_release(const std::string& channel, release_note note, const reply& r,
                     steady::duration round_trip);
  void note_unsubscribed(const std::string& channel);
  bool maybe_subscribed(const std::string& channel);
  void subscribe(waiter_queue& q, const std::string& channel);
  std::optional<steady::time_point> yielding(const std::string& channel, steady::time_point now);
  bool claim_direct(const std::string& channel, steady::time_point now);
  void publish_direct(const std::shared_ptr<op>& o);
  void queue_direct_first(const std::string& channel);
  void add_local(const std::string& channel, int delta, bool end_direct = false);
  bool has_local(const std::string& channel) const;
  void set_yield(const std::string& channel, steady::time_point until);
  void end_yield(const std::string& channel);

  // Grants, renewal and expiry.
  lease grant_hold(const op& o, bool reentry, std::uint64_t fence, steady::time_point sent_at);
  void register_grant_locked(const std::shared_ptr<grant>& g);
  void unregister_grant_locked(grant& g);
  void lose(const std::shared_ptr<grant>& g, lease_lost_reason why);
  void schedule_renewal(bool soon = false);
  void renew_all();
  void arm_expiry_check();
  void check_expiry();
  steady::time_point validity_end(steady::time_point sent_at,
                                  std::chrono::milliseconds lease) const;
  static std::string grant_key(lock_kind k, const std::string& name, const std::string& owner);

  client_options options_;
  std::unique_ptr<redis_client> redis_;
  redis_client::impl& impl_;
  const std::string uuid_;
  std::chrono::milliseconds watchdog_period_;

  mutable std::mutex grants_mutex_;
  std::unordered_map<std::string, std::shared_ptr<grant>> grants_;
  std::uint64_t next_hold_id_ = 1;
  steady::time_point expiry_armed_at_ = steady::time_point::max();

  // Per lock channel: local acquisitions queued or attempting, and until when we yield to other
  // clients after a release (see after_release). Read by user threads to decide whether a first
  // attempt may leave directly, so it is guarded by a mutex rather than confined to the I/O
  // thread. Entries exist only while something is going on.
  struct activity {
    int local = 0;
    steady::time_point yield_until{};
    std::weak_ptr<op> direct;  // a first attempt sent directly, not yet answered
  };
  std::mutex ops_mutex_;
  std::unordered_set<std::shared_ptr<op>> pending_ops_;  // acquisitions not finished yet
  mutable std::mutex activity_mutex_;
  std::unordered_map<std::string, activity> activity_;
  std::unique_ptr<runtime> rt_;  // I/O-thread-only state; created and destroyed there
};

}  // namespace dlock::detail
