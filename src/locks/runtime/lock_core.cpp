#include "locks/runtime/lock_core.hpp"

#include "core/one_shot.hpp"
#include "core/random.hpp"
#include "core/sync.hpp"
#include "core/teardown_threads.hpp"
#include "dlock/error.hpp"
#include "locks/kinds/redlock.hpp"
#include "locks/runtime/core_state.hpp"
#include "locks/sansio/holder_record.hpp"
#include "topology/cluster.hpp"
#include "topology/redlock.hpp"
#include "topology/sentinel.hpp"
#include "topology/standalone.hpp"

namespace dlock::detail {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

std::shared_ptr<lock_core> lock_core::create(client_options o) {
  auto invalid = [](const std::string& what) { throw error(errc::invalid_argument, what); };
  if (o.watchdog_lease <= 0ms) invalid("watchdog_lease must be positive");
  if (o.watchdog_period < 0ms) invalid("watchdog_period must not be negative");
  if (o.watchdog_period > 0ms && o.watchdog_period >= o.watchdog_lease) {
    invalid("watchdog_period must be shorter than watchdog_lease");
  }
  if (o.max_recheck <= 0ms) invalid("max_recheck must be positive");
  // A waiter renews its place three times per waiter lease: shorter than that is no lease.
  if (o.fair_waiter_lease < 30ms) invalid("fair_waiter_lease must be at least 30 ms");
  if (o.renewal_batch == 0) invalid("renewal_batch must be at least 1");
  if (o.event_queue_limit == 0) invalid("event_queue_limit must be at least 1");
  if (o.metric_prefix_limit == 0) invalid("metric_prefix_limit must be at least 1");
  if (o.command_connections < 1 || o.command_connections > 64) {
    invalid("command_connections must be between 1 and 64, got " +
            std::to_string(o.command_connections));
  }
  if (o.busy_poll < 0us || o.busy_poll > 10ms) {
    invalid("busy_poll must be between 0 and 10 ms, got " + std::to_string(o.busy_poll.count()) +
            " us");
  }
  if (o.busy_poll_under_load != load_polling::never &&
      o.busy_poll_under_load != load_polling::when_it_pays &&
      o.busy_poll_under_load != load_polling::always) {
    invalid("busy_poll_under_load is not a load_polling value");
  }
  if (o.min_replica_acks < 0) invalid("min_replica_acks must not be negative");
  if (o.min_replica_acks > 0 && o.replica_ack_timeout <= 0ms) {
    invalid("replica_ack_timeout must be positive");
  }
  const int deployments = (o.sentinel.master_name.empty() ? 0 : 1) +
                          (o.cluster_seeds.empty() ? 0 : 1) + (o.redlock.masters.empty() ? 0 : 1);
  if (deployments > 1) {
    invalid(
        "options name more than one of a Sentinel master, cluster seeds and RedLock masters; "
        "choose one");
  }
  if (!o.redlock.masters.empty()) {
    if (o.redlock.masters.size() < 3) {
      invalid("RedLock needs at least 3 independent masters (5 is usual), got " +
              std::to_string(o.redlock.masters.size()));
    }
    if (!(o.redlock.node_timeout_factor > 0 && o.redlock.node_timeout_factor < 0.5)) {
      invalid("redlock.node_timeout_factor must be between 0 and 0.5");
    }
    if (o.min_replica_acks > 0) {
      invalid(
          "min_replica_acks does not apply to RedLock: its masters are independent, and a "
          "majority of them is what a grant needs");
    }
  }
  if (!(o.drift_factor >= 0 && o.drift_factor < 0.5)) invalid("drift_factor must be in [0, 0.5)");
  if (o.drift_floor < 0ms) invalid("drift_floor must not be negative");
  if (!o.cluster_seeds.empty() && !o.fence_counter.empty()) {
    invalid(
        "fence_counter (one counter for every lock) cannot work on a cluster: one script "
        "cannot reach two slots; leave it empty for a counter per name");
  }

  std::shared_ptr<lock_core> core(new lock_core(std::move(o)), [](lock_core* p) {
    // The last owner may let go inside a callback on the I/O thread or the event thread, which
    // the destructor must join: finish the teardown on another thread then, one that exit
    // waits for.
    if (p->io().in_io_thread() || p->observe().in_callback()) {
      teardown_threads::start([p] { delete p; });
    } else {
      delete p;
    }
  });
  core->io().run([&] {
    core->on_io_thread();
    core->rt_ = std::make_unique<runtime>(core->io().context());
  });
  // Built now, after the libraries the client uses have registered their exit cleanups, so that
  // exit joins a teardown before it runs them (teardown_threads.hpp).
  teardown_threads::prepare();
  return core;
}

namespace {
std::unique_ptr<topology> make_topology(const client_options& o,
                                        const std::shared_ptr<net::io_thread>& io) {
  const write_ack ack{o.min_replica_acks, o.replica_ack_timeout};
  if (!o.sentinel.master_name.empty()) {
    return std::make_unique<sentinel_topology>(o.connection, o.sentinel, io, ack,
                                               o.command_connections);
  }
  if (!o.cluster_seeds.empty()) return std::make_unique<cluster_topology>(o.cluster_seeds, io, ack);
  if (!o.redlock.masters.empty()) return std::make_unique<redlock_topology>(o.redlock.masters, io);
  return std::make_unique<standalone_topology>(o.connection, io, ack,
                                               connect_settings{.require_master = false,
                                                                .background = false,
                                                                .on_first_attempt = {},
                                                                .lanes = o.command_connections});
}
// The client's I/O thread, its connections' notices going to `watcher` from the start.
std::shared_ptr<net::io_thread> make_io(const client_options& o, net::under_load mode,
                                        observer& watcher) {
  auto io = std::make_shared<net::io_thread>(o.busy_poll, mode);
  io->set_notice_handler([&watcher](net::notice n) { watcher.on_notice(std::move(n)); });
  return io;
}
net::under_load io_mode(load_polling p) {
  switch (p) {
    case load_polling::never:
      return net::under_load::never;
    case load_polling::always:
      return net::under_load::always;
    case load_polling::when_it_pays:
      break;
  }
  return net::under_load::when_it_pays;
}
}  // namespace

lock_core::lock_core(client_options options)
    : options_(std::move(options)),
      observer_(options_),
      io_(make_io(options_, io_mode(options_.busy_poll_under_load), observer_)),
      topology_(make_topology(options_, io_)),
      uuid_(random_uuid()),
      holder_record_(options_.record_holder
                         ? encode_holder(holder_of_this_process(options_.holder_label, uuid_))
                         : std::string()),
      watchdog_period_(options_.watchdog_period > 0ms ? options_.watchdog_period
                                                      : options_.watchdog_lease / 3) {
  if (options_.redlock.masters.empty()) return;
  const quorum_timing timing{options_.redlock.node_timeout_factor, options_.drift_factor,
                             options_.drift_floor};
  for (const auto* base : redlock_capable_kinds())
    redlock_kinds_.emplace(base, make_redlock_kind(*base, timing, quorum_counters_));
}

const lock_kind& lock_core::kind_for(const lock_kind& base) const noexcept {
  const auto it = redlock_kinds_.find(&base);
  return it == redlock_kinds_.end() ? base : *it->second;
}

lock_core::~lock_core() {
  // A lease let go just before its client (a destructor's release is not waited for) still
  // reaches the server, and so does the undo of a grant an ended acquisition's last attempt
  // brings back, unless the server does not answer within a command's timeout (plus the WAIT
  // for replicas an attempt may include).
  if (!io().in_io_thread()) {
    const auto patience = options_.connection.command_timeout +
                          (options_.min_replica_acks > 0 ? options_.replica_ack_timeout : 0ms);
    releases_->wait_until(detail::saturating_add(steady::now(), patience));
  }
  io().run([&] {
    on_io_thread();
    // Everything still in flight ends now, while the core is whole: replies to attempts and
    // releases fail with client_closed, then every acquisition still waiting is told so.
    topology_->close(errc::client_closed);
    std::vector<std::shared_ptr<op>> waiting;
    {
      lock_guard lock(ops_mutex_);
      waiting.assign(pending_ops_.begin(), pending_ops_.end());
    }
    for (const auto& o : waiting)
      drive(o, acquisition_fsm::event::of(acquisition_fsm::event::type::close, steady::now()));
    // Then the other waits on this client (latch waits); each may forget itself as it ends.
    auto closers = std::move(closers_);
    closers_.clear();
    for (auto& [id, close] : closers)
      close();
    // Timers and queues belong to the I/O thread; their pending handlers hold only weak
    // references and find the core gone.
    rt_.reset();
  });
  // The connections are the topology's; it lets them go once their thread has stopped.
  io_->stop();
  topology_.reset();
}

std::uint64_t lock_core::on_close(std::function<void()> close) {
  const auto id = next_closer_++;
  closers_.emplace(id, std::move(close));
  return id;
}

void lock_core::forget_close(std::uint64_t id) noexcept {
  closers_.erase(id);
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
  const auto& t = topology_->counters();
  s.not_replicated = get(t.not_replicated);
  s.moved_redirects = get(t.moved);
  s.ask_redirects = get(t.asked);
  s.slot_map_refreshes = get(t.map_refreshes);
  s.master_switches = get(t.master_switches);
  s.redlock_misses = get(quorum_counters_.misses);
  s.redlock_late_answers = get(quorum_counters_.late);
  s.redlock_fence_raises = get(quorum_counters_.fence_raises);
  s.watched_leases = grants_.watched_count();
  observer_.add_counters(s);
  return s;
}

metrics_snapshot lock_core::metrics() const {
  metrics_snapshot m;
  m.counters = stats();
  if (const auto* r = observer_.metrics()) r->snapshot_into(m);
  return m;
}

lock_call lock_core::call_for(const lock_names& n, const std::string& owner, milliseconds lease,
                              std::int64_t permits) noexcept {
  lock_call call{*topology_,
                 topology_->nodes_for(n.name).front(),
                 n,
                 owner,
                 lease,
                 steady::now() + options_.connection.command_timeout,
                 options_.fair_waiter_lease,
                 permits};
  call.identity = holder_record_;
  return call;
}

steady::time_point lock_core::validity_end(steady::time_point sent_at, milliseconds lease) const {
  // The server starts the lease when it runs the script, after we sent it; counting from the
  // send time, less a drift allowance (1% + 2 ms by default, as RedLock does), keeps us on the
  // safe side.
  const quorum_timing timing{0, options_.drift_factor, options_.drift_floor};
  return sent_at + lease - timing.drift(lease);
}

acquire_request lock_core::make_request(const lock_handle& h, const lease_options& o,
                                        acquire_limits limits, acquire_callback done) {
  acquire_request r;
  r.kind = &kind_for(*h.kind);
  if (!redlock_kinds_.empty() && r.kind == h.kind) {
    throw error(errc::invalid_argument,
                "a " + std::string(h.kind->name()) +
                    " cannot run over RedLock's independent masters (only reentrant and simple "
                    "locks can); use a standalone, Sentinel or cluster deployment");
  }
  if (o.permits < 1 || (!h.kind->counts_permits() && o.permits != 1)) {
    throw error(errc::invalid_argument, h.kind->counts_permits()
                                            ? "permits must be at least 1"
                                            : "permits apply to semaphores only");
  }
  r.permits = o.permits;
  if (!h.kind->leased()) {
    // Redisson's RSemaphore permits never expire: the lease stands until released.
    r.lease_time = std::chrono::hours(24 * 365 * 50);
    r.watchdog = false;
  } else if (o.lease_time) {
    if (*o.lease_time <= 0ms) throw error(errc::invalid_argument, "lease_time must be positive");
    r.lease_time = *o.lease_time;
    r.watchdog = false;
  } else {
    r.lease_time = options_.watchdog_lease;
    r.watchdog = true;
  }
  r.owner = h.kind->owner_for(uuid_, o);
  r.names = r.kind->names_for(h.names, r.owner);
  r.on_lost = o.on_lost;
  limits.max_recheck = options_.max_recheck;
  // A waiter's place on the server lapses unless renewed: every re-check renews it.
  if (h.kind->keeps_waiter_place()) {
    limits.max_recheck = std::min(limits.max_recheck, options_.fair_waiter_lease / 3);
  }
  // Over independent masters, contenders that retry in step split the vote again and again:
  // each retry waits a random share of a couple of its own round trips first.
  if (!redlock_kinds_.empty()) limits.jitter_round_trips = 2;
  limits.command_timeout = options_.connection.command_timeout;
  r.limits = limits;
  r.done = std::move(done);
  r.started_at = steady::now();
  if (auto* m = observer_.metrics()) r.series = &m->series_for(*h.kind, h.names->name);
  return r;
}

void lock_core::call_async(const script& s, std::string_view key,
                           std::span<const std::string_view> keys,
                           std::span<const std::string_view> args, net::reply_callback done) {
  topology_->eval(topology_->nodes_for(key).front(), s, keys, args,
                  steady::now() + options_.connection.command_timeout, durability::master,
                  std::move(done));
}

void lock_core::call_each_async(
    const script& s, std::string_view key, std::span<const std::string_view> keys,
    std::span<const std::string_view> args,
    std::function<void(std::vector<std::pair<std::error_code, reply>>)> done) {
  struct gathering {
    detail::mutex mutex;
    std::vector<std::pair<std::error_code, reply>> replies DLOCK_GUARDED_BY(mutex);
    std::size_t left DLOCK_GUARDED_BY(mutex) = 0;
    std::function<void(std::vector<std::pair<std::error_code, reply>>)> done;
  };
  const auto nodes = topology_->nodes_for(key);
  auto all = std::make_shared<gathering>();
  {
    const detail::lock_guard lock(all->mutex);
    all->replies.resize(nodes.size());
    all->left = nodes.size();
  }
  all->done = std::move(done);
  const auto deadline = steady::now() + options_.connection.command_timeout;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    topology_->eval(nodes[i], s, keys, args, deadline, durability::master,
                    [all, i](std::error_code ec, reply r) {
                      std::vector<std::pair<std::error_code, reply>> replies;
                      {
                        const detail::lock_guard lock(all->mutex);
                        all->replies[i] = {ec, std::move(r)};
                        if (--all->left != 0) return;
                        replies = std::move(all->replies);
                      }
                      all->done(std::move(replies));
                    });
  }
}

void lock_core::command_async(std::string_view key, std::span<const std::string_view> args,
                              net::reply_callback done) {
  topology_->command(key, args, steady::now() + options_.connection.command_timeout,
                     std::move(done));
}

reply lock_core::command(std::string_view key, std::span<const std::string_view> args) {
  return wait_for_reply(
      [&](net::reply_callback done) { command_async(key, args, std::move(done)); });
}

reply lock_core::wait_for_reply(const std::function<void(net::reply_callback)>& send) {
  io().refuse_blocking("a synchronous call", "use the _async form there");
  one_shot<std::pair<std::error_code, reply>> result;
  send([&result](std::error_code ec, reply r) { result.put({ec, std::move(r)}); });
  auto [ec, r] = result.take();
  if (ec) throw error(ec, r.is_error() ? r.str() : ec.message());
  return std::move(r);
}

}  // namespace dlock::detail
