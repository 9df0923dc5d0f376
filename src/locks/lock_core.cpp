#include "locks/lock_core.hpp"

#include <algorithm>
#include <charconv>
#include <future>
#include <thread>

#include "core/one_shot.hpp"
#include "core/random.hpp"
#include "dlock/error.hpp"
#include "dlock/keys.hpp"
#include "dlock_lua_scripts.hpp"

namespace dlock::detail {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

lock_names::lock_names(std::string lock_name, const std::string& shared_fence_counter) {
  auto keys = keys_of_lock(lock_name);
  name = std::move(lock_name);
  fence_key = shared_fence_counter.empty() ? std::move(keys.fence_counter) : shared_fence_counter;
  channel = std::move(keys.unlock_channel);
}

std::uint64_t current_thread_number() noexcept {
  static std::atomic<std::uint64_t> next{1};
  thread_local const std::uint64_t mine = next.fetch_add(1, std::memory_order_relaxed);
  return mine;
}

namespace {

std::string ms_text(milliseconds d) {
  return std::to_string(d.count());
}

// Parses the {status, value} pair the acquire scripts return.
bool parse_pair(const reply& r, std::int64_t& status, std::int64_t& value) {
  if (!r.is_array() || r.elements().size() != 2) return false;
  const auto& a = r.elements()[0];
  const auto& b = r.elements()[1];
  if (!a.is_integer() || !b.is_integer()) return false;
  status = a.integer();
  value = b.integer();
  return true;
}

template <class F>
void call_quietly(F&& f) noexcept {
  try {
    f();
  } catch (...) {
    // User callbacks run on the I/O thread; nothing may escape into it.
  }
}

}  // namespace

// ---- I/O-thread state ----

struct lock_core::op {
  op(lock_core* c, acquire_request r)
      : core(c), req(std::move(r)), machine(req.limits), timer(core->io().context()) {}
  // Not an owner: the client's handles keep the core alive, and the core's destructor finishes
  // every acquisition still pending (with errc::client_closed) before it lets go of anything.
  // So no handler on the I/O thread ever holds the last reference to the client.
  lock_core* core;
  acquire_request req;
  acquire_machine machine;
  asio::steady_timer timer;
  std::uint64_t timer_epoch = 0;
  bool may_queue = true;      // false: a single attempt, or a re-entry
  bool direct_claim = false;  // its first attempt went out directly (see claim_direct)
  bool queued = false;
  bool attempting = false;
  bool woken_during_attempt = false;
  bool finished = false;
  reply last_error;  // the server's error reply behind the last failed attempt, if any
};

// Local waiters on one lock name, and the bookkeeping of unlock messages around our own
// releases (see after_release).
struct lock_core::waiter_queue {
  std::deque<std::shared_ptr<op>> ops;  // FIFO; the front is the only one that attempts
  std::uint64_t subscription = 0;       // 0 until a waiter has found the lock held
  bool confirmed = false;
  int releases_in_flight = 0;
  int held_messages = 0;
  int own_messages_to_skip = 0;
};

struct lock_core::runtime {
  explicit runtime(asio::io_context& io) : renew_timer(io), expiry_timer(io) {}
  asio::steady_timer renew_timer;
  asio::steady_timer expiry_timer;
  bool renew_scheduled = false;
  std::unordered_map<std::string, waiter_queue> queues;
  // When we last dropped a channel's subscription (see note_unsubscribed).
  std::unordered_map<std::string, steady::time_point> unsubscribed;
};

// ---- construction ----

std::shared_ptr<lock_core> lock_core::create(client_options o) {
  auto invalid = [](const std::string& what) { throw error(errc::invalid_argument, what); };
  if (o.watchdog_lease <= 0ms) invalid("watchdog_lease must be positive");
  if (o.watchdog_period < 0ms) invalid("watchdog_period must not be negative");
  if (o.watchdog_period > 0ms && o.watchdog_period >= o.watchdog_lease) {
    invalid("watchdog_period must be shorter than watchdog_lease");
  }
  if (o.max_recheck <= 0ms) invalid("max_recheck must be positive");
  if (o.renewal_batch == 0) invalid("renewal_batch must be at least 1");

  std::shared_ptr<lock_core> core(new lock_core(std::move(o)), [](lock_core* p) {
    // The last owner may let go inside a callback on the I/O thread, which the destructor must
    // join: finish the teardown from another thread then.
    if (p->io().in_io_thread()) {
      std::thread([p] { delete p; }).detach();
    } else {
      delete p;
    }
  });
  core->io().run([&] { core->rt_ = std::make_unique<runtime>(core->io().context()); });
  return core;
}

lock_core::lock_core(client_options options)
    : reentrant_acquire(std::string(lua::reentrant_acquire)),
      reentrant_release(std::string(lua::reentrant_release)),
      reentrant_drop(std::string(lua::reentrant_drop)),
      simple_acquire(std::string(lua::simple_acquire)),
      simple_release(std::string(lua::simple_release)),
      renew(std::string(lua::renew)),
      force_unlock(std::string(lua::force_unlock)),
      lock_info(std::string(lua::lock_info)),
      fenced_set(std::string(lua::fenced_set)),
      options_(std::move(options)),
      redis_(std::make_unique<redis_client>(options_.connection)),
      impl_(redis_client_access::get(*redis_)),
      uuid_(random_uuid()),
      watchdog_period_(options_.watchdog_period > 0ms ? options_.watchdog_period
                                                      : options_.watchdog_lease / 3) {}

lock_core::~lock_core() {
  io().run([&] {
    // Everything still in flight ends now, while the core is whole: replies to attempts and
    // releases fail with client_closed, then every acquisition still waiting is told so.
    impl_.commands->close(errc::client_closed);
    std::vector<std::shared_ptr<op>> waiting;
    {
      std::lock_guard lock(ops_mutex_);
      waiting.assign(pending_ops_.begin(), pending_ops_.end());
    }
    for (const auto& o : waiting)
      fail(o, errc::client_closed, {});
    // Timers and queues belong to the I/O thread; their pending handlers hold only weak
    // references and find the core gone.
    rt_.reset();
  });
}

client_stats lock_core::stats() const noexcept {
  auto get = [](const std::atomic<std::uint64_t>& v) { return v.load(std::memory_order_relaxed); };
  client_stats s;
  s.grants = get(counters.grants);
  s.attempts = get(counters.attempts);
  s.releases = get(counters.releases);
  s.release_failures = get(counters.release_failures);
  s.leases_lost = get(counters.leases_lost);
  s.renewal_rounds = get(counters.renewal_rounds);
  s.renewal_calls = get(counters.renewal_calls);
  s.leases_renewed = get(counters.leases_renewed);
  s.unlock_messages = get(counters.unlock_messages);
  s.grants_born_dead = get(counters.grants_born_dead);
  std::lock_guard lock(grants_mutex_);
  s.watched_leases = static_cast<std::uint64_t>(std::count_if(
      grants_.begin(), grants_.end(), [](const auto& kv) { return kv.second->watchdog; }));
  return s;
}

std::string lock_core::grant_key(lock_kind k, const std::string& name, const std::string& owner) {
  std::string key(1, k == lock_kind::reentrant ? 'r' : 's');
  key += name;
  key += '\0';
  key += owner;
  return key;
}

steady::time_point lock_core::validity_end(steady::time_point sent_at, milliseconds lease) const {
  // The server starts the lease when it runs the script, after we sent it; counting from the
  // send time, less a drift allowance (1% + 2 ms, as RedLock does), keeps us on the safe side.
  const auto drift = lease / 100 + 2ms;
  return sent_at + lease - drift;
}

// ---- acquisition ----

acquire_request lock_core::make_request(const lock_handle& h, const lease_options& o,
                                        acquire_limits limits, acquire_callback done) {
  acquire_request r;
  r.names = h.names;
  r.kind = h.kind;
  if (o.lease_time) {
    if (*o.lease_time <= 0ms) throw error(errc::invalid_argument, "lease_time must be positive");
    r.lease_time = *o.lease_time;
    r.watchdog = false;
  } else {
    r.lease_time = options_.watchdog_lease;
    r.watchdog = true;
  }
  if (h.kind == lock_kind::simple) {
    if (!o.owner.empty()) {
      throw error(errc::invalid_argument, "an owner id applies to reentrant locks only");
    }
    r.owner = random_hex(16);  // 128 bits from the CSPRNG, fresh for every acquisition
  } else {
    r.owner = uuid_ + ":" + (o.owner.empty() ? std::to_string(current_thread_number()) : o.owner);
  }
  r.on_lost = o.on_lost;
  limits.max_recheck = options_.max_recheck;
  limits.command_timeout = options_.connection.command_timeout;
  r.limits = limits;
  r.done = std::move(done);
  return r;
}

bool lock_core::holds_locally(const op& o) const {
  if (o.req.kind != lock_kind::reentrant) return false;
  std::lock_guard lock(grants_mutex_);
  auto it = grants_.find(grant_key(o.req.kind, o.req.names->name, o.req.owner));
  return it != grants_.end() && !it->second->lost;
}

void lock_core::acquire(acquire_request r) {
  auto o = std::make_shared<op>(this, std::move(r));
  {
    std::lock_guard lock(ops_mutex_);
    pending_ops_.insert(o);
  }
  const auto now = steady::now();
  // A single attempt barges, as std::mutex::try_lock does; a re-entry must not queue behind
  // waiters that are waiting for this very owner.
  o->may_queue = !o->req.limits.single_attempt && !holds_locally(*o);
  // The first attempt leaves from this thread when it can overtake no one here (no local
  // waiter or attempt on this name, no yield in force): a free lock then costs one round trip
  // and no hop through the I/O thread. The reply, and anything after it, runs on the I/O thread.
  if (!io().in_io_thread() && (!o->may_queue || claim_direct(o->req.names->channel, now))) {
    // Every field of the op is set before the I/O thread can see it: through the activity
    // table (publish_direct) or through the attempt's reply.
    const auto step = o->machine.start(now);
    o->attempting = true;
    o->direct_claim = o->may_queue;
    if (o->direct_claim) publish_direct(o);
    submit_attempt(o, step.until);
    return;
  }
  io().post([o] { o->core->start(o); });
}

// ---- per-name activity, shared with user threads ----

bool lock_core::claim_direct(const std::string& channel, steady::time_point now) {
  std::lock_guard lock(activity_mutex_);
  auto [it, fresh] = activity_.try_emplace(channel);
  if (!fresh && (it->second.local > 0 || now < it->second.yield_until)) return false;
  it->second.local = 1;
  it->second.yield_until = {};
  return true;
}

void lock_core::publish_direct(const std::shared_ptr<op>& o) {
  std::lock_guard lock(activity_mutex_);
  activity_[o->req.names->channel].direct = o;
}

// An acquisition that arrives while a direct first attempt on its name is in flight queues
// behind it: the direct one, which came first, takes its place in the queue now.
void lock_core::queue_direct_first(const std::string& channel) {
  std::shared_ptr<op> first;
  {
    std::lock_guard lock(activity_mutex_);
    if (auto it = activity_.find(channel); it != activity_.end()) first = it->second.direct.lock();
  }
  if (first && first->direct_claim && !first->queued && !first->finished) join_queue(first);
}

void lock_core::add_local(const std::string& channel, int delta, bool end_direct) {
  std::lock_guard lock(activity_mutex_);
  auto& a = activity_[channel];
  a.local += delta;
  if (end_direct) a.direct.reset();
  if (a.local <= 0 && a.yield_until <= steady::now()) activity_.erase(channel);
}

bool lock_core::has_local(const std::string& channel) const {
  std::lock_guard lock(activity_mutex_);
  auto it = activity_.find(channel);
  return it != activity_.end() && it->second.local > 0;
}

std::optional<steady::time_point> lock_core::yielding(const std::string& channel,
                                                      steady::time_point now) {
  std::lock_guard lock(activity_mutex_);
  auto it = activity_.find(channel);
  if (it == activity_.end() || it->second.yield_until <= now) return std::nullopt;
  return it->second.yield_until;
}

void lock_core::set_yield(const std::string& channel, steady::time_point until) {
  std::lock_guard lock(activity_mutex_);
  activity_[channel].yield_until = until;
}

void lock_core::end_yield(const std::string& channel) {
  std::lock_guard lock(activity_mutex_);
  auto it = activity_.find(channel);
  if (it == activity_.end()) return;
  it->second.yield_until = {};
  if (it->second.local <= 0) activity_.erase(it);
}

void lock_core::start(const std::shared_ptr<op>& o) {
  const auto now = steady::now();
  if (!o->may_queue) {
    run_step(o, o->machine.start(now));
    return;
  }
  queue_direct_first(o->req.names->channel);
  auto& q = join_queue(o);
  if (q.ops.size() > 1) {
    arm_op_timer(o, o->req.limits.deadline);  // until it is our turn, only the deadline matters
  } else if (const auto until = yielding(o->req.names->channel, now)) {
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
  const auto& n = *o->req.names;
  const std::string lease_ms = ms_text(o->req.lease_time);
  const std::string_view keys[] = {n.name, n.fence_key};
  const auto sent_at = steady::now();
  auto on_reply = [o, sent_at](std::error_code ec, reply r) {
    o->core->on_attempt_reply(o, ec, r, sent_at);
  };
  if (o->req.kind == lock_kind::reentrant) {
    const std::string_view args[] = {lease_ms, o->req.owner};
    impl_.commands->submit_eval(reentrant_acquire, keys, args, until, std::move(on_reply));
  } else {
    const std::string_view args[] = {o->req.owner, lease_ms};
    impl_.commands->submit_eval(simple_acquire, keys, args, until, std::move(on_reply));
  }
}

void lock_core::on_attempt_reply(const std::shared_ptr<op>& o, std::error_code ec, const reply& r,
                                 steady::time_point sent_at) {
  o->attempting = false;
  // The claim of a direct first attempt covers the name until the op is queued or finished;
  // run below, it ends once either has happened (join_queue counts the op itself).
  struct release_claim {
    lock_core& core;
    op& o;
    ~release_claim() {
      if (std::exchange(o.direct_claim, false)) core.add_local(o.req.names->channel, -1, true);
    }
  } claim{*this, *o};
  if (o->finished) return;
  const auto now = steady::now();
  if (ec) {
    // Without a reply we cannot know whether the script ran: undo a grant it may have made.
    if (ec == errc::timeout || ec == errc::connection_lost) discard_uncertain_grant(*o);
    o->last_error = r;
    run_step(o, o->machine.on_error(ec, now));
    return;
  }
  std::int64_t status = 0;
  std::int64_t value = 0;
  if (!parse_pair(r, status, value)) {
    fail(o, errc::unexpected_reply, r);
    return;
  }
  if (status == 1 || status == 2) {
    if (born_dead(*o, status == 2, sent_at, now)) {
      // The grant's validity ran out before its reply arrived (the server stalled, or the reply
      // was held up): it is not handed out, it was undone, and the wait goes on if time remains.
      run_step(o, o->machine.on_wake(now));
      return;
    }
    counters.grants.fetch_add(1, std::memory_order_relaxed);
    finish(o, {grant_hold(*o, status == 2, static_cast<std::uint64_t>(value), sent_at), {}, {}});
    return;
  }
  auto step = o->machine.on_busy(value, now);
  if (step.kind == acquire_machine::step_kind::wait && o->may_queue) {
    // Held by someone else: now it is worth queueing (if the first attempt went out directly)
    // and listening for the release (an uncontended acquisition never subscribes). The
    // subscription's confirmation triggers one more attempt, covering a release that happened
    // before it was live.
    auto& q = o->queued ? rt_->queues[o->req.names->channel] : join_queue(o);
    if (q.ops.front() != o) {
      arm_op_timer(o, o->req.limits.deadline);  // others were waiting first: our turn comes
      return;
    }
    subscribe(q, o->req.names->channel);
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
      arm_op_timer(o, o->queued && !is_head(*o) ? o->req.limits.deadline : s.until);
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
    if (o->queued && !core.is_head(*o)) {
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

void lock_core::fail(const std::shared_ptr<op>& o, std::error_code ec, const reply& server_reply) {
  std::string message = "acquiring lock '" + o->req.names->name + "': ";
  if (ec == errc::wrong_type && server_reply.is_error() &&
      server_reply.str().starts_with("WRONGTYPE holds ")) {
    // Our scripts' verdict on a name that holds something else: "holds a list, not a lock".
    message = "lock '" + o->req.names->name + "' " + server_reply.str().substr(10);
  } else if (server_reply.is_error()) {
    message += server_reply.str();  // the server's own words
  } else {
    message += ec.message();
  }
  finish(o, {{}, ec, std::move(message)});
}

// A grant is born dead when its validity, counted from when the attempt was sent, has already
// passed as its reply arrives: handing it out would give the caller a lease that is lost at once
// while someone else may take the lock. It is undone on the server instead (releasing our hold,
// which wakes waiters); a re-entry whose grant has run out too means that grant is lost.
bool lock_core::born_dead(const op& o, bool reentry, steady::time_point sent_at,
                          steady::time_point now) {
  if (validity_end(sent_at, o.req.lease_time) > now) return false;
  counters.grants_born_dead.fetch_add(1, std::memory_order_relaxed);
  const auto& n = *o.req.names;
  if (reentry) {
    std::shared_ptr<grant> held;
    {
      std::lock_guard lock(grants_mutex_);
      if (auto it = grants_.find(grant_key(o.req.kind, n.name, o.req.owner)); it != grants_.end()) {
        held = it->second;
        if (!held->lost && held->valid_until > now) return false;  // the hold it joins is fine
      }
    }
    // Dropping the owner's entry ends the hold the re-entry joined: it had expired already.
    if (held) lose(held, lease_lost_reason::expired);
    if (held) return true;
  }
  const std::string_view keys[] = {n.name, n.channel};
  const std::string lease_ms = ms_text(o.req.lease_time);
  const auto deadline = now + options_.connection.command_timeout;
  auto ignore = [](std::error_code, reply) {};
  if (o.req.kind == lock_kind::simple) {
    const std::string_view args[] = {o.req.owner, unlock_message};
    impl_.commands->submit_eval(simple_release, keys, args, deadline, ignore);
  } else {
    const std::string_view args[] = {o.req.owner, unlock_message};
    impl_.commands->submit_eval(reentrant_drop, keys, args, deadline, ignore);
  }
  return true;
}

void lock_core::finish(const std::shared_ptr<op>& o, acquire_result result) {
  if (o->finished) return;
  o->finished = true;
  {
    std::lock_guard lock(ops_mutex_);
    pending_ops_.erase(o);
  }
  ++o->timer_epoch;
  o->timer.cancel();
  const bool granted = static_cast<bool>(result.held);
  if (o->queued) {
    leave_queue(*o);
    // The next waiter becomes the head. If we just got the lock it is held: the new head waits
    // for the unlock message (or its lease). Otherwise it may be free: the head tries now.
    // Posted rather than called: the next waiter may be finishing too (its deadline passed),
    // and the one after it... each in its own turn of the loop, never one deep recursion.
    auto it = rt_->queues.find(o->req.names->channel);
    if (it != rt_->queues.end() && !it->second.ops.empty()) {
      io().post([next = it->second.ops.front(), granted, lease_ms = o->req.lease_time.count()] {
        auto& core = *next->core;
        if (next->finished || !core.is_head(*next)) return;
        if (granted) {
          core.run_step(next, next->machine.on_busy(lease_ms, steady::now()));
        } else {
          core.wake(next);
        }
      });
    }
  }
  auto done = std::move(o->req.done);
  call_quietly([&] { done(std::move(result)); });
}

void lock_core::discard_uncertain_grant(const op& o) {
  const auto& n = *o.req.names;
  const std::string_view keys[] = {n.name, n.channel};
  auto ignore = [](std::error_code, reply) {};
  const auto deadline = steady::now() + options_.connection.command_timeout;
  if (o.req.kind == lock_kind::simple) {
    const std::string_view args[] = {o.req.owner, unlock_message};
    impl_.commands->submit_eval(simple_release, keys, args, deadline, ignore);
    return;
  }
  {
    // A re-entry must not drop the holds its owner already has; its count may stay one too
    // high, which the lease's expiry resolves once the owner releases the rest.
    std::lock_guard lock(grants_mutex_);
    if (grants_.count(grant_key(o.req.kind, n.name, o.req.owner))) return;
  }
  const std::string_view args[] = {o.req.owner, unlock_message};
  impl_.commands->submit_eval(reentrant_drop, keys, args, deadline, ignore);
}

bool lock_core::is_head(const op& o) const {
  auto it = rt_->queues.find(o.req.names->channel);
  return it != rt_->queues.end() && !it->second.ops.empty() && it->second.ops.front().get() == &o;
}

// ---- waiter queues ----

lock_core::waiter_queue& lock_core::join_queue(const std::shared_ptr<op>& o) {
  auto& q = rt_->queues[o->req.names->channel];
  q.ops.push_back(o);
  o->queued = true;
  add_local(o->req.names->channel, +1);
  return q;
}

void lock_core::subscribe(waiter_queue& q, const std::string& channel) {
  if (q.subscription != 0) return;
  std::weak_ptr<lock_core> weak = weak_from_this();
  q.subscription = impl_.subscriber().add(
      net::subscriber::kind::channel, channel,
      [weak, channel](std::string_view, std::string_view) {
        if (auto self = weak.lock()) self->on_unlock_message(channel);
      },
      [weak, channel] {
        if (auto self = weak.lock()) self->on_subscribed(channel);
      });
}

void lock_core::leave_queue(const op& o) {
  auto it = rt_->queues.find(o.req.names->channel);
  if (it == rt_->queues.end()) return;
  auto& ops = it->second.ops;
  std::erase_if(ops, [&](const auto& p) { return p.get() == &o; });
  const_cast<op&>(o).queued = false;
  add_local(o.req.names->channel, -1);
  if (ops.empty()) {
    if (it->second.subscription != 0) {
      impl_.subscriber().remove(it->second.subscription);
      note_unsubscribed(it->first);
    }
    rt_->queues.erase(it);
  }
}

void lock_core::wake_head(const std::string& channel) {
  auto it = rt_->queues.find(channel);
  if (it == rt_->queues.end() || it->second.ops.empty()) return;
  auto head = it->second.ops.front();  // a copy: waking may change the queue
  wake(head);
}

void lock_core::on_unlock_message(const std::string& channel) {
  counters.unlock_messages.fetch_add(1, std::memory_order_relaxed);
  auto it = rt_->queues.find(channel);
  if (it == rt_->queues.end()) return;
  auto& q = it->second;
  if (q.releases_in_flight > 0) {
    ++q.held_messages;  // judged when our release's reply arrives
    return;
  }
  if (q.own_messages_to_skip > 0) {
    --q.own_messages_to_skip;  // the echo of our own release, already acted upon
    return;
  }
  end_yield(channel);  // someone else released: our turn to compete again
  wake_head(channel);
}

void lock_core::on_subscribed(const std::string& channel) {
  auto it = rt_->queues.find(channel);
  if (it == rt_->queues.end()) return;
  it->second.confirmed = true;
  // While we yield, the waiter we yielded to holds or is taking the lock; its release will be
  // heard now that we listen.
  if (yielding(channel, steady::now())) return;
  // Messages sent before the subscription was live (or while it was down) are lost: check now.
  wake_head(channel);
}

lock_core::release_note lock_core::before_release(const std::string& channel) {
  auto it = rt_->queues.find(channel);
  if (it == rt_->queues.end() || it->second.ops.empty()) return {};
  ++it->second.releases_in_flight;
  return {true, it->second.confirmed, it->second.subscription != 0};
}

// An UNSUBSCRIBE takes a moment to reach the server: a publish meanwhile still counts us.
void lock_core::note_unsubscribed(const std::string& channel) {
  constexpr std::size_t sweep_above = 4096;  // names are unbounded; keep the table small
  const auto now = steady::now();
  if (rt_->unsubscribed.size() > sweep_above) {
    std::erase_if(rt_->unsubscribed, [&](const auto& kv) { return now - kv.second > 1s; });
  }
  rt_->unsubscribed[channel] = now;
}

bool lock_core::maybe_subscribed(const std::string& channel) {
  if (auto q = rt_->queues.find(channel); q != rt_->queues.end() && q->second.subscription != 0) {
    return true;
  }
  auto it = rt_->unsubscribed.find(channel);
  if (it == rt_->unsubscribed.end()) return false;
  if (steady::now() - it->second > 1s) {
    rt_->unsubscribed.erase(it);
    return false;
  }
  return true;
}

// Our own release. Its unlock message reaches every subscribed client, perhaps us too, and the
// reply says how many received it. If another client is waiting, we yield: it was just told the
// lock is free, and racing it would only cost a failed attempt on one side (and starve remote
// waiters, who hear of the release later than we do). Our head and our next acquisitions hold
// back for a few round trips, long enough for that client to take the lock; its release then
// wakes us. When in doubt whether the count includes us, we assume it does: a missed yield costs
// at most one failed attempt, a yield to nobody would cost the wait. If no one else is waiting,
// our head need not wait for the message's echo: it tries at once. Our own echo, when we know
// it is coming, is skipped, so it does not trigger a second, useless attempt.
void lock_core::after_release(const std::string& channel, release_note note, const reply& r,
                              steady::duration round_trip) {
  const bool released = r.is_integer() && r.integer() >= 1;
  const auto receivers = released ? r.integer() - 1 : 0;
  const bool counted_us = note.requested || maybe_subscribed(channel);
  const bool others = receivers - (counted_us ? 1 : 0) > 0;
  const auto now = steady::now();
  const auto yield_for = std::clamp<steady::duration>(8 * round_trip, 2ms, options_.max_recheck);
  if (others) set_yield(channel, now + yield_for);
  auto it = rt_->queues.find(channel);
  if (it == rt_->queues.end()) return;
  auto& q = it->second;
  int held = 0;
  if (note.tracked && q.releases_in_flight > 0 && --q.releases_in_flight == 0) {
    held = std::exchange(q.held_messages, 0);
  }
  if (!released) {
    if (held > 0) wake_head(channel);  // those were other clients' releases
    return;
  }
  const int own_echo = note.confirmed ? 1 : 0;
  if (held >= own_echo) {
    held -= own_echo;
  } else {
    q.own_messages_to_skip += own_echo - held;
  }
  if (q.ops.empty()) return;
  auto head = q.ops.front();
  if (others) {
    if (!head->attempting) arm_op_timer(head, std::min(now + yield_for, head->req.limits.deadline));
  } else {
    wake(head);
  }
}

// ---- grants ----

lease lock_core::grant_hold(const op& o, bool reentry, std::uint64_t fence,
                            steady::time_point sent_at) {
  const auto key = grant_key(o.req.kind, o.req.names->name, o.req.owner);
  const auto valid_until = validity_end(sent_at, o.req.lease_time);
  std::shared_ptr<grant> g;
  std::shared_ptr<grant> stale;
  std::uint64_t hold_id = 0;
  {
    std::lock_guard lock(grants_mutex_);
    if (auto it = grants_.find(key); it != grants_.end()) {
      if (reentry) {
        g = it->second;
      } else {
        stale = it->second;  // the server no longer knew it: that grant was lost
      }
    }
    if (!g) {
      g = std::make_shared<grant>();
      g->kind = o.req.kind;
      g->names = o.req.names;
      g->owner = o.req.owner;
      g->fence = fence;
      g->lease_time = o.req.lease_time;
      g->watchdog = o.req.watchdog;
      g->valid_until = valid_until;
      if (stale) unregister_grant_locked(*stale);
      register_grant_locked(g);
    } else {
      g->valid_until = std::max(g->valid_until, valid_until);
    }
    ++g->holds;
    hold_id = next_hold_id_++;
    if (o.req.on_lost) g->on_lost.emplace_back(hold_id, o.req.on_lost);
  }
  if (stale) lose(stale, lease_lost_reason::not_held);
  auto state = std::make_shared<lease_state>();
  state->core = shared_from_this();
  state->g = std::move(g);
  state->hold_id = hold_id;
  return lease_state::make(std::move(state));
}

void lock_core::register_grant_locked(const std::shared_ptr<grant>& g) {
  grants_[grant_key(g->kind, g->names->name, g->owner)] = g;
  g->in_table = true;
  if (g->valid_until < expiry_armed_at_) {
    expiry_armed_at_ = g->valid_until;
    io().post([weak = weak_from_this()] {
      if (auto self = weak.lock()) self->arm_expiry_check();
    });
  }
  if (g->watchdog) {
    // A grant whose reply was slow to come has less validity left than the watchdog's rhythm
    // assumes: renew it now rather than at the next round, which may come too late.
    const bool soon = g->valid_until - steady::now() < 2 * watchdog_period_;
    io().post([weak = weak_from_this(), soon] {
      if (auto self = weak.lock()) self->schedule_renewal(soon);
    });
  }
}

void lock_core::unregister_grant_locked(grant& g) {
  if (!g.in_table) return;
  g.in_table = false;
  auto it = grants_.find(grant_key(g.kind, g.names->name, g.owner));
  if (it != grants_.end() && it->second.get() == &g) grants_.erase(it);
}

void lock_core::lose(const std::shared_ptr<grant>& g, lease_lost_reason why) {
  std::vector<std::function<void(lease_lost_reason)>> callbacks;
  {
    std::lock_guard lock(grants_mutex_);
    if (g->lost || g->holds == 0) return;
    g->lost = why;
    unregister_grant_locked(*g);
    for (auto& [id, cb] : g->on_lost)
      callbacks.push_back(std::move(cb));
    g->on_lost.clear();
  }
  counters.leases_lost.fetch_add(1, std::memory_order_relaxed);
  for (auto& cb : callbacks)
    call_quietly([&] { cb(why); });
  g->stop.request_stop();
  if (why == lease_lost_reason::expired) {
    // We told the holder it no longer holds the lock; make that true on the server too, in
    // case the lease is in fact still there, so it cannot block others for nothing.
    const auto& n = *g->names;
    const std::string_view keys[] = {n.name, n.channel};
    const std::string_view args[] = {g->owner, unlock_message};
    const auto deadline = steady::now() + options_.connection.command_timeout;
    impl_.commands->submit_eval(g->kind == lock_kind::simple ? simple_release : reentrant_drop,
                                keys, args, deadline, [](std::error_code, reply) {});
  }
}

// ---- release and extend ----

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
  auto report = [&done](release_outcome o) {
    if (done) call_quietly([&] { done(o); });
  };
  try {
    const auto g = hold.g;
    bool lost = false;
    {
      std::lock_guard lock(grants_mutex_);
      std::erase_if(g->on_lost, [&](const auto& e) { return e.first == hold.hold_id; });
      lost = g->lost.has_value();
      // Taking the grant out of the table stops its renewal before this returns: the watchdog
      // builds its batches under the same mutex.
      if (--g->holds == 0) unregister_grant_locked(*g);
    }
    counters.releases.fetch_add(1, std::memory_order_relaxed);
    if (lost) {
      report(release_outcome::not_held);
      return;
    }
    // With no local waiters there is nothing to note before the reply: submit from here, without
    // a hop to the I/O thread. Otherwise the I/O thread notes the release first, so the echo of
    // our own unlock message is recognised.
    const bool note_first = has_local(g->names->channel);
    // `self` is not an owner, for the reason given at lock_core::op.
    auto send = [self = this, g, done = std::move(done), note_first]() mutable {
      const auto note = note_first ? self->before_release(g->names->channel) : release_note{};
      const auto& n = *g->names;
      const std::string_view keys[] = {n.name, n.channel};
      const std::string lease_ms = ms_text(g->lease_time);
      const auto sent_at = steady::now();
      auto on_reply = [self, g, done = std::move(done), note, sent_at](std::error_code ec,
                                                                       reply r) {
        self->after_release(g->names->channel, note, ec ? reply() : r, steady::now() - sent_at);
        // nil: the lock was no longer ours. 0: a re-entered hold remains. n >= 1: released.
        const auto outcome = ec               ? release_outcome::unconfirmed
                             : r.is_integer() ? release_outcome::released
                                              : release_outcome::not_held;
        if (outcome != release_outcome::released) {
          self->counters.release_failures.fetch_add(1, std::memory_order_relaxed);
        }
        if (done) call_quietly([&] { done(outcome); });
      };
      const auto deadline = sent_at + self->options_.connection.command_timeout;
      if (g->kind == lock_kind::reentrant) {
        const std::string_view args[] = {lease_ms, g->owner, unlock_message};
        self->impl_.commands->submit_eval(self->reentrant_release, keys, args, deadline,
                                          std::move(on_reply));
      } else {
        const std::string_view args[] = {g->owner, unlock_message};
        self->impl_.commands->submit_eval(self->simple_release, keys, args, deadline,
                                          std::move(on_reply));
      }
    };
    if (note_first && !io().in_io_thread()) {
      io().post(std::move(send));
    } else {
      send();
    }
  } catch (...) {
    counters.release_failures.fetch_add(1, std::memory_order_relaxed);
    report(release_outcome::unconfirmed);
  }
}

bool lock_core::extend(lease_state& hold, milliseconds lease_time) {
  if (lease_time <= 0ms) throw error(errc::invalid_argument, "lease_time must be positive");
  const auto g = hold.g;
  if (with_grant(*g, [](const grant& x) { return x.lost.has_value(); })) {
    throw error(errc::lease_lost, "lease on '" + g->names->name + "' was lost");
  }
  const std::string lease_ms = ms_text(lease_time);
  const std::string_view keys[] = {g->names->name};
  const std::string_view args[] = {g->kind == lock_kind::reentrant ? "r" : "s", g->owner, lease_ms};
  const auto sent_at = steady::now();
  const auto r = redis_->eval(renew, keys, args);
  if (r.at(0).integer() != 1) {
    lose(g, lease_lost_reason::not_held);
    return false;
  }
  std::lock_guard lock(grants_mutex_);
  g->valid_until = validity_end(sent_at, lease_time);
  if (!g->watchdog) g->lease_time = lease_time;
  if (g->in_table && g->valid_until < expiry_armed_at_) {
    expiry_armed_at_ = g->valid_until;
    io().post([weak = weak_from_this()] {
      if (auto self = weak.lock()) self->arm_expiry_check();
    });
  }
  return true;
}

// ---- the watchdog ----

void lock_core::schedule_renewal(bool soon) {
  if (!rt_ || (rt_->renew_scheduled && !soon)) return;
  rt_->renew_scheduled = true;
  // Re-arming cancels a wait already pending (its handler sees operation_aborted).
  if (soon) {
    rt_->renew_timer.expires_at(steady::now());
  } else {
    rt_->renew_timer.expires_after(watchdog_period_);
  }
  rt_->renew_timer.async_wait([weak = weak_from_this()](std::error_code ec) {
    if (ec) return;
    if (auto self = weak.lock()) self->renew_all();
  });
}

// One round: every watchdog lease, in batches of `renewal_batch` per script call, all batches
// handed to the connection at once so they leave in one pipelined write.
void lock_core::renew_all() {
  rt_->renew_scheduled = false;
  const auto sent_at = steady::now();
  const auto deadline = sent_at + std::min(options_.connection.command_timeout, watchdog_period_);
  std::size_t batches = 0;
  {
    std::lock_guard lock(grants_mutex_);
    auto batch = std::make_shared<std::vector<std::shared_ptr<grant>>>();
    auto flush = [&] {
      if (batch->empty()) return;
      std::vector<std::string_view> keys;
      std::vector<std::string> lease_ms;
      std::vector<std::string_view> args;
      keys.reserve(batch->size());
      lease_ms.reserve(batch->size());
      args.reserve(batch->size() * 3);
      for (const auto& g : *batch) {
        keys.push_back(g->names->name);
        lease_ms.push_back(ms_text(g->lease_time));
      }
      for (std::size_t i = 0; i < batch->size(); ++i) {
        const auto& g = (*batch)[i];
        args.push_back(g->kind == lock_kind::reentrant ? "r" : "s");
        args.push_back(g->owner);
        args.push_back(lease_ms[i]);
      }
      impl_.commands->submit_eval(
          renew, keys, args, deadline,
          [weak = weak_from_this(), batch, sent_at](std::error_code ec, reply r) {
            auto self = weak.lock();
            // A failed round changes nothing: if no later round succeeds in time, the expiry
            // check declares the leases lost.
            if (!self || ec || !r.is_array() || r.elements().size() != batch->size()) return;
            for (std::size_t i = 0; i < batch->size(); ++i) {
              const auto& g = (*batch)[i];
              const auto& v = r.elements()[i];
              if (v.is_integer() && v.integer() == 1) {
                std::lock_guard guard(self->grants_mutex_);
                if (g->in_table && !g->lost) {
                  g->valid_until =
                      std::max(g->valid_until, self->validity_end(sent_at, g->lease_time));
                }
                self->counters.leases_renewed.fetch_add(1, std::memory_order_relaxed);
              } else {
                self->lose(g, lease_lost_reason::not_held);
              }
            }
          });
      ++batches;
      batch = std::make_shared<std::vector<std::shared_ptr<grant>>>();
    };
    for (const auto& [key, g] : grants_) {
      if (!g->watchdog || g->lost) continue;
      batch->push_back(g);
      if (batch->size() == options_.renewal_batch) flush();
    }
    flush();
  }
  if (batches == 0) return;  // nothing to watch: sleep until the next watchdog grant
  counters.renewal_calls.fetch_add(batches, std::memory_order_relaxed);
  counters.renewal_rounds.fetch_add(1, std::memory_order_relaxed);
  schedule_renewal();
}

void lock_core::arm_expiry_check() {
  if (!rt_) return;
  steady::time_point at;
  {
    std::lock_guard lock(grants_mutex_);
    at = expiry_armed_at_;
  }
  if (at == steady::time_point::max()) return;
  rt_->expiry_timer.expires_at(at);
  rt_->expiry_timer.async_wait([weak = weak_from_this()](std::error_code ec) {
    if (ec) return;
    if (auto self = weak.lock()) self->check_expiry();
  });
}

// Declares lost every lease whose validity has passed without a renewal, however that came
// about: the server unreachable, this process paused, the I/O thread starved.
void lock_core::check_expiry() {
  const auto now = steady::now();
  std::vector<std::shared_ptr<grant>> expired;
  {
    std::lock_guard lock(grants_mutex_);
    auto next = steady::time_point::max();
    for (const auto& [key, g] : grants_) {
      if (g->lost) continue;
      if (g->valid_until <= now) {
        expired.push_back(g);
      } else {
        next = std::min(next, g->valid_until);
      }
    }
    expiry_armed_at_ = next;
  }
  for (const auto& g : expired)
    lose(g, lease_lost_reason::expired);
  arm_expiry_check();
}

}  // namespace dlock::detail
