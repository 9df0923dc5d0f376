// What a client tells the service around it (dlock/observe.hpp), each event caused for real: a
// grant and its release, a lease deleted under its holder, a server that stalls past a renewal
// and past the lease, a grant whose reply comes too late, a grant no replica acknowledged, a
// connection killed, an unlock message that never came, a Sentinel failover, a cluster slot that
// moved. Then the metrics, read back by Prometheus's own parser, and a callback that sleeps a
// second per event beside 10,000 leases the watchdog keeps renewing on time.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <concepts>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "dlock/dlock.hpp"
#include "embedded/process.hpp"
#include "embedded/redis_cluster.hpp"
#include "embedded/redis_sentinel_set.hpp"
#include "polling.hpp"
#include "prometheus_text.hpp"
#include "redis_fixture.hpp"
#include "sanitizers.hpp"

namespace dlock::testing {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

/// Collects a client's events and log lines as its callbacks hand them over.
class recorder {
 public:
  /// Routes `o`'s events and its log (at `level` and above) here.
  void attach(client_options& o, log_level level = log_level::debug) {
    o.on_event = [this](const event& e) {
      std::lock_guard lock(m_);
      events_.push_back(e);
      changed_.notify_all();
    };
    o.logger = [this](log_level l, std::string_view line) {
      std::lock_guard lock(m_);
      lines_.emplace_back(l, std::string(line));
      changed_.notify_all();
    };
    o.min_log_level = level;
  }
  /// The first event of type `t` that `also` accepts; fails the test after `limit`.
  template <std::predicate<const event&> Also>
  event wait_for(event_type t, Also also, std::chrono::milliseconds limit = 30s) {
    std::unique_lock lock(m_);
    event found;
    const bool seen = changed_.wait_for(lock, limit, [&] {
      for (const auto& e : events_) {
        if (e.type == t && also(e)) {
          found = e;
          return true;
        }
      }
      return false;
    });
    EXPECT_TRUE(seen) << "no " << to_string(t) << " event within " << limit.count() << " ms";
    return found;
  }
  event wait_for(event_type t, std::chrono::milliseconds limit = 30s) {
    return wait_for(
        t, [](const event&) { return true; }, limit);
  }
  /// A log line containing `text` at `level`; fails the test after `limit`.
  std::string wait_for_line(log_level level, std::string_view text,
                            std::chrono::milliseconds limit = 30s) {
    std::unique_lock lock(m_);
    std::string found;
    const bool seen = changed_.wait_for(lock, limit, [&] {
      for (const auto& [l, line] : lines_) {
        if (l == level && line.find(text) != std::string::npos) {
          found = line;
          return true;
        }
      }
      return false;
    });
    EXPECT_TRUE(seen) << "no " << to_string(level) << " line with '" << text << "'";
    return found;
  }
  std::size_t count(event_type t) {
    std::lock_guard lock(m_);
    return static_cast<std::size_t>(
        std::count_if(events_.begin(), events_.end(), [t](const event& e) { return e.type == t; }));
  }
  std::vector<std::pair<log_level, std::string>> lines() {
    std::lock_guard lock(m_);
    return lines_;
  }

 private:
  std::mutex m_;
  std::condition_variable changed_;
  std::vector<event> events_;
  std::vector<std::pair<log_level, std::string>> lines_;
};

class Observe : public redis_test {
 protected:
  embedded::server_options options_for(std::size_t) const override {
    embedded::server_options o;
    o.extra_args = {"--enable-debug-command", "yes"};
    return o;
  }
  client_options options() { return client_options::from_url(url()); }
  recorder seen;
};

TEST_F(Observe, AGrantAndItsReleaseCarryTheWaitTheFenceAndTheHoldTime) {
  auto o = options();
  seen.attach(o);
  client c(o);
  auto l = c.reentrant("jobs:report").try_acquire();
  ASSERT_TRUE(l);
  const auto fence = l.fence();
  std::this_thread::sleep_for(20ms);  // a hold time to see, not a wait for an event
  EXPECT_TRUE(l.release());
  const auto got = seen.wait_for(event_type::acquired);
  EXPECT_EQ(got.name, "jobs:report");
  EXPECT_EQ(got.kind, "reentrant");
  EXPECT_EQ(got.fence, fence);
  EXPECT_TRUE(got.owner.starts_with(c.id())) << got.owner;
  EXPECT_GT(got.waited.count(), 0);
  EXPECT_LT(got.waited, 5s);
  EXPECT_GT(got.at.time_since_epoch().count(), 0);
  const auto released = seen.wait_for(event_type::released);
  EXPECT_EQ(released.name, "jobs:report");
  EXPECT_GE(released.held, 20ms);
  // The logger reads the same at debug level, one line each.
  const auto line = seen.wait_for_line(log_level::debug, "acquired");
  EXPECT_NE(line.find("reentrant lock 'jobs:report' acquired after "), std::string::npos) << line;
  EXPECT_NE(line.find("fence " + std::to_string(fence)), std::string::npos) << line;
  seen.wait_for_line(log_level::debug, "reentrant lock 'jobs:report' released after ");
  // Every kind names itself.
  EXPECT_TRUE(c.semaphore("pool").try_set_permits(2));
  auto permit = c.semaphore("pool").try_acquire();
  ASSERT_TRUE(permit);
  EXPECT_EQ(
      seen.wait_for(event_type::acquired, [](const event& e) { return e.name == "pool"; }).kind,
      "semaphore");
  auto writer = c.read_write("catalog").write().try_acquire();
  ASSERT_TRUE(writer);
  EXPECT_EQ(
      seen.wait_for(event_type::acquired, [](const event& e) { return e.name == "catalog"; }).kind,
      "write");
}

TEST_F(Observe, ALeaseDeletedUnderItsHolderIsLostAndLoggedAsAnError) {
  auto o = options();
  o.watchdog_lease = 900ms;  // renewed every 300 ms: the renewal finds the lock gone
  seen.attach(o, log_level::info);
  client c(o);
  auto l = c.reentrant("jobs:deleted").try_acquire();
  ASSERT_TRUE(l);
  raw_redis(server().port())({"DEL", "jobs:deleted"});
  const auto lost = seen.wait_for(event_type::lost);
  EXPECT_EQ(lost.name, "jobs:deleted");
  ASSERT_TRUE(lost.lost_reason);
  EXPECT_EQ(*lost.lost_reason, lease_lost_reason::not_held);
  EXPECT_FALSE(lost.detail.empty());
  const auto line = seen.wait_for_line(log_level::error, "LOST");
  EXPECT_NE(line.find("'jobs:deleted'"), std::string::npos) << line;
  // At info level, grants and releases are not logged.
  for (const auto& [level, text] : seen.lines())
    EXPECT_NE(level, log_level::debug) << text;
  EXPECT_EQ(c.metrics().locks.at(0).lost_not_held, 1u);
}

// The server stalls (SIGSTOP) longer than a renewal's timeout but shorter than the lease: the
// renewal fails while the lease is valid, which is reported with its end; the lease survives.
// Stalled past the lease, it is lost by expiry.
TEST_F(Observe, ARenewalThatFailsWhileTheLeaseIsValidIsReportedThenAnExpiry) {
  auto o = options();
  o.watchdog_lease = 3s;
  o.watchdog_period = 500ms;
  o.connection.command_timeout = 300ms;
  seen.attach(o, log_level::info);
  client c(o);
  auto l = c.reentrant("{jobs:stalled}").try_acquire();
  ASSERT_TRUE(l);
  auto other = c.reentrant("{jobs:stalled}:2").try_acquire();
  ASSERT_TRUE(other);
  server().pause();
  const auto failed = seen.wait_for(event_type::renewal_failed);
  EXPECT_TRUE(failed.name.starts_with("{jobs:stalled}")) << failed.name;
  EXPECT_GT(failed.valid_until, failed.at) << "reported while still valid";
  EXPECT_LT(failed.valid_until - failed.at, 3s);
  EXPECT_FALSE(failed.detail.empty());
  // An event per lease, one log line per renewal batch.
  seen.wait_for(event_type::renewal_failed,
                [](const event& e) { return e.name == "{jobs:stalled}"; });
  seen.wait_for(event_type::renewal_failed,
                [](const event& e) { return e.name == "{jobs:stalled}:2"; });
  const auto line = seen.wait_for_line(log_level::warning, "renewal failed, lease valid for ");
  EXPECT_NE(line.find("(and 1 more leases in the same batch)"), std::string::npos) << line;
  EXPECT_TRUE(l.valid());
  const auto lost = seen.wait_for(event_type::lost);
  ASSERT_TRUE(lost.lost_reason);
  EXPECT_EQ(*lost.lost_reason, lease_lost_reason::expired);
  server().resume();
  EXPECT_GE(c.metrics().locks.at(0).lost_expired, 1u);
}

TEST_F(Observe, AGrantWhoseReplyCameTooLateIsReportedUndone) {
  client holder(url());
  auto held = holder.simple("jobs:late").try_acquire({.lease_time = 1000ms});
  ASSERT_TRUE(held);
  auto o = options();
  o.connection.command_timeout = 10s;
  o.max_recheck = 100ms;
  o.watchdog_lease = 1000ms;
  seen.attach(o);
  client waiter(o);
  auto got = std::async(std::launch::async,
                        [&] { return waiter.simple("jobs:late").try_acquire_for(20s); });
  wait_until([&] { return holder.simple("jobs:late").waiting_clients() == 1; });
  raw_redis(server().port())({"DEBUG", "SLEEP", "2.5"});
  EXPECT_TRUE(got.get());
  const auto undone = seen.wait_for(event_type::grant_undone);
  ASSERT_TRUE(undone.undone_because);
  EXPECT_EQ(*undone.undone_because, undo_cause::born_dead);
  EXPECT_EQ(undone.name, "jobs:late");
  seen.wait_for_line(log_level::warning, "its reply came after its validity ran out");
}

TEST_F(Observe, AGrantNoReplicaAcknowledgedIsReportedUndone) {
  auto o = options();
  o.min_replica_acks = 1;  // this server has no replica
  o.replica_ack_timeout = 100ms;
  seen.attach(o);
  client c(o);
  EXPECT_THROW(c.reentrant("jobs:unreplicated").try_acquire_for(50ms), error);
  const auto undone = seen.wait_for(event_type::grant_undone);
  ASSERT_TRUE(undone.undone_because);
  EXPECT_EQ(*undone.undone_because, undo_cause::not_replicated);
  // And the failed acquisition is logged with what went wrong.
  seen.wait_for_line(log_level::error, "replicas acknowledged it");
  const auto m = c.metrics();
  ASSERT_EQ(m.locks.size(), 1u);
  EXPECT_EQ(m.locks[0].failed, 1u);
}

// A release the stalled server never answers, and one that finds the lock gone.
TEST_F(Observe, AReleaseThatIsNotConfirmedIsReported) {
  auto o = options();
  o.connection.command_timeout = 200ms;
  seen.attach(o, log_level::info);
  client c(o);
  auto stranded = c.simple("jobs:stranded").try_acquire();
  ASSERT_TRUE(stranded);
  server().pause();
  EXPECT_EQ(stranded.release_checked(), release_outcome::unconfirmed);
  server().resume();
  const auto failed = seen.wait_for(event_type::release_failed);
  EXPECT_EQ(failed.name, "jobs:stranded");
  EXPECT_FALSE(failed.detail.empty());
  seen.wait_for_line(log_level::warning, "simple lock 'jobs:stranded' release not confirmed");
  auto taken = c.reentrant("jobs:taken").try_acquire();
  ASSERT_TRUE(taken);
  raw_redis(server().port())({"DEL", "jobs:taken"});
  EXPECT_EQ(taken.release_checked(), release_outcome::not_held);
  const auto gone = seen.wait_for(event_type::release_failed,
                                  [](const event& e) { return e.name == "jobs:taken"; });
  EXPECT_NE(gone.detail.find("no longer held"), std::string::npos) << gone.detail;
}

TEST_F(Observe, AKilledConnectionIsReportedLostThenBack) {
  auto o = options();
  seen.attach(o);
  client c(o);
  ASSERT_TRUE(c.reentrant("jobs:a").try_acquire().release());
  raw_redis(server().port())({"CLIENT", "KILL", "TYPE", "normal"});
  const auto lost = seen.wait_for(event_type::connection_lost);
  EXPECT_EQ(lost.node, "127.0.0.1:" + std::to_string(server().port()));
  const auto back = seen.wait_for(event_type::reconnected);
  EXPECT_EQ(back.node, lost.node);
  seen.wait_for_line(log_level::warning, "connection to 127.0.0.1:");
  seen.wait_for_line(log_level::info, "reconnected to 127.0.0.1:");
  wait_until([&] { return c.stats().reconnects >= 1; });
  EXPECT_GE(c.stats().connection_losses, 1u);
}

// A Redisson holder's lock deleted without its unlock message: the waiter finds it free on its
// bounded re-check, and says so. With the message, it is woken by it and reports nothing.
TEST_F(Observe, AWaiterThatHeardNoMessageReportsItsRecheck) {
  raw_redis raw(server().port());
  const auto hold_by_hand = [&](const std::string& name) {
    raw({"HSET", name, "8743c9c0-0795-4907-87fd-6c719a6b4586:1", "1"});
    raw({"PEXPIRE", name, "60000"});
  };
  for (const bool publish : {true, false}) {
    SCOPED_TRACE(publish ? "with the message" : "without it");
    const std::string name = publish ? "jobs:told" : "jobs:untold";
    hold_by_hand(name);
    auto o = options();
    o.max_recheck = publish ? 60s : 200ms;
    recorder r;
    r.attach(o);
    client waiter(o);
    auto got =
        std::async(std::launch::async, [&] { return waiter.reentrant(name).try_acquire_for(30s); });
    wait_until([&] {
      return raw({"PUBSUB", "NUMSUB", "redisson_lock__channel:{" + name + "}"}).at(1).integer() ==
             1;
    });
    // The attempt that the subscription's confirmation sets off (it covers a release before
    // the subscription was live, not a lost message) is answered before the lock goes; without
    // the message, a re-check after it too.
    wait_until([&] { return waiter.stats().attempts >= (publish ? 2u : 3u); });
    raw({"DEL", name});
    if (publish) raw({"PUBLISH", "redisson_lock__channel:{" + name + "}", "0"});
    ASSERT_TRUE(got.get());
    r.wait_for(event_type::acquired);
    if (publish) {
      EXPECT_EQ(r.count(event_type::woken_without_message), 0u);
      EXPECT_EQ(waiter.stats().woken_without_message, 0u);
    } else {
      EXPECT_EQ(r.wait_for(event_type::woken_without_message).name, name);
      EXPECT_EQ(waiter.stats().woken_without_message, 1u);
    }
  }
}

TEST_F(Observe, ACallbackThatThrowsStopsNothing) {
  auto o = options();
  std::atomic<int> calls{0};
  o.on_event = [&](const event&) {
    ++calls;
    throw std::runtime_error("a callback's own bug");
  };
  client c(o);
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(c.simple("jobs:throwing").try_acquire().release());
  wait_until([&] { return calls.load() == 6; });
  EXPECT_EQ(c.stats().events_delivered, 6u);
}

TEST(ObserveOptions, BadLimitsAreRefused) {
  embedded::redis_server server;
  auto o = client_options::from_url(server.url());
  o.event_queue_limit = 0;
  EXPECT_THROW(client{o}, error);
  o.event_queue_limit = 1;
  o.metric_prefix_limit = 0;
  EXPECT_THROW(client{o}, error);
}

// ---- metrics, as Prometheus reads them ----

TEST_F(Observe, ThePrometheusTextParsesAndCountsWhatTheClientDid) {
  auto o = options();
  o.metric_prefix_limit = 3;
  client c(o);
  for (int i = 0; i < 7; ++i)
    ASSERT_TRUE(c.reentrant("jobs:" + std::to_string(i)).try_acquire().release());
  auto mail = c.simple("mail/outbox").try_acquire();
  ASSERT_TRUE(mail);
  EXPECT_FALSE(c.simple("mail/outbox").try_acquire()) << "held: not acquired";
  EXPECT_TRUE(mail.release());
  // A name whose prefix needs escaping, and bytes that are not UTF-8.
  const std::string weird = std::string("we\"i\\rd\n\xff") + ":1";
  ASSERT_TRUE(c.reentrant(weird).try_acquire().release());
  // The prefix limit is 3 per kind: jobs, the weird one, reports, then "other".
  ASSERT_TRUE(c.reentrant("reports:1").try_acquire().release());
  ASSERT_TRUE(c.reentrant("billing:1").try_acquire().release());

  const auto m = c.metrics();
  std::ostringstream text;
  write_prometheus(m, text);
  const auto samples = parsed_by_prometheus(text.str());
  ASSERT_FALSE(samples.empty()) << text.str();
  const auto at = [&](const std::string& name, const std::string& labels) {
    const auto it = samples.find(name + " " + labels);
    EXPECT_NE(it, samples.end()) << name << " " << labels << " not in\n" << text.str();
    return it == samples.end() ? -1.0 : it->second;
  };
  const std::string jobs = R"({"kind": "reentrant", "prefix": "jobs")";
  EXPECT_EQ(at("dlock_acquisitions_total",
               R"({"kind": "reentrant", "outcome": "granted", "prefix": "jobs"})"),
            7);
  EXPECT_EQ(at("dlock_acquire_wait_seconds_count", jobs + "}"), 7);
  EXPECT_EQ(at("dlock_acquire_wait_seconds_bucket",
               R"({"kind": "reentrant", "le": "+Inf", "prefix": "jobs"})"),
            7);
  EXPECT_EQ(at("dlock_hold_seconds_count", jobs + "}"), 7);
  EXPECT_EQ(at("dlock_holds_released_total", jobs + "}"), 7);
  EXPECT_GT(at("dlock_acquire_wait_seconds_sum", jobs + "}"), 0);
  const std::string mail_labels =
      R"({"kind": "simple", "outcome": "not_acquired", "prefix": "mail"})";
  EXPECT_EQ(at("dlock_acquisitions_total", mail_labels), 1);
  EXPECT_EQ(at("dlock_acquisitions_total",
               R"({"kind": "reentrant", "outcome": "granted", "prefix": "other"})"),
            1);
  EXPECT_EQ(at("dlock_acquisitions_total",
               R"({"kind": "reentrant", "outcome": "granted", "prefix": "reports"})"),
            1);
  EXPECT_EQ(
      samples.count(
          R"(dlock_acquisitions_total {"kind": "reentrant", "outcome": "granted", "prefix": "billing"})"),
      0u)
      << "beyond the limit";
  // The escaped prefix comes back as it was, the byte that is not UTF-8 as U+FFFD.
  EXPECT_EQ(at("dlock_acquisitions_total", R"({"kind": "reentrant", "outcome": "granted", )"
                                           R"("prefix": "we\"i\\rd\n)"
                                           "\xEF\xBF\xBD\"}"),
            1);
  // Every script sent came back: round trips per command equal the client's own counts.
  EXPECT_EQ(at("dlock_round_trip_seconds_count", R"({"command": "acquire"})"),
            static_cast<double>(m.counters.attempts));
  EXPECT_EQ(at("dlock_round_trip_seconds_count", R"({"command": "release"})"),
            static_cast<double>(m.counters.releases));
  EXPECT_EQ(at("dlock_grants_total", "{}"), static_cast<double>(m.counters.grants));
  EXPECT_EQ(m.counters.grants, 11u);
  EXPECT_EQ(at("dlock_watched_leases", "{}"), 0);
  EXPECT_EQ(at("dlock_redirects_total", R"({"type": "moved"})"), 0);
  // Counters alone with collect_metrics off.
  auto off = options();
  off.collect_metrics = false;
  client quiet(off);
  ASSERT_TRUE(quiet.reentrant("jobs:quiet").try_acquire().release());
  const auto q = quiet.metrics();
  EXPECT_TRUE(q.locks.empty());
  EXPECT_TRUE(q.round_trips.empty());
  EXPECT_EQ(q.counters.grants, 1u);
  std::ostringstream quiet_text;
  write_prometheus(q, quiet_text);
  EXPECT_EQ(parsed_by_prometheus(quiet_text.str()).count("dlock_grants_total {}"), 1u);
}

// ---- failovers and slots ----

TEST(ObserveSentinel, AFailoverIsReportedAsAMasterSwitch) {
  embedded::redis_sentinel_set set({.replicas = 1});
  auto o = client_options::from_url(set.url());
  recorder seen;
  seen.attach(o, log_level::info);
  client c(o);
  ASSERT_TRUE(c.reentrant("jobs:a").try_acquire().release());
  const auto old_master = set.master_index();
  raw_redis(set.sentinel(0).port())({"SENTINEL", "FAILOVER", set.master_name()});
  const auto promoted = set.wait_failover(old_master, 60s);
  const auto switched = seen.wait_for(event_type::master_switched, 60s);
  EXPECT_EQ(switched.node, "127.0.0.1:" + std::to_string(set.data_node(promoted).port()));
  EXPECT_NE(switched.detail.find(std::to_string(set.data_node(old_master).port())),
            std::string::npos)
      << switched.detail;
  seen.wait_for_line(log_level::warning, "master switched to ");
  EXPECT_GE(c.metrics().counters.master_switches, 1u);
}

TEST(ObserveCluster, ASlotThatMovedIsReported) {
  embedded::redis_cluster cluster;
  auto o = client_options::cluster(cluster.seed_urls());
  recorder seen;
  seen.attach(o, log_level::info);
  client c(o);
  const std::string name = "moving:job";
  ASSERT_TRUE(c.reentrant(name).try_acquire().release());
  const auto slot = embedded::redis_cluster::key_slot(name);
  const auto from = cluster.master_of_slot(slot);
  std::size_t to = from;
  for (const auto m : cluster.master_indexes())
    if (m != from) to = m;
  cluster.begin_migration(slot, from, to);
  while (cluster.move_keys(slot, from, to, 10) > 0) {
  }
  cluster.finish_migration(slot, from, to);
  ASSERT_TRUE(c.reentrant(name).try_acquire().release());
  const auto moved = seen.wait_for(event_type::slot_moved);
  EXPECT_EQ(moved.node, "127.0.0.1:" + std::to_string(cluster.node(to).port()));
  EXPECT_FALSE(moved.name.empty());
  seen.wait_for_line(log_level::info, "moved to 127.0.0.1:");
}

// ---- a slow callback, and the queue's bound ----

// 10,000 watchdog leases renewed every 700 ms while the callback sleeps a second per event: the
// I/O thread never waits for it. The leases outlive two lease times without one loss, every
// renewal round comes on schedule, and what the queue could not hold is counted. (A tenth of
// the leases under a sanitizer, whose slowdown would make the schedule the thing under test.)
TEST_F(Observe, ACallbackThatSleepsDelaysNoRenewal) {
  constexpr int leases = fewer_under_sanitizers(10'000, 10);
  constexpr int queue_limit = leases / 10;
  auto o = options();
  o.watchdog_lease = 2100ms;
  o.watchdog_period = 700ms;
  o.event_queue_limit = queue_limit;
  std::atomic<int> delivered{0};
  o.on_event = [&](const event&) {
    std::this_thread::sleep_for(1s);
    ++delivered;
  };
  client c(o);
  std::vector<lease> held;
  held.reserve(leases);
  for (int i = 0; i < leases; ++i) {
    held.push_back(c.simple("slow:" + std::to_string(i)).try_acquire());
    ASSERT_TRUE(held.back()) << i;
  }
  // Six rounds: more than two lease times.
  const auto rounds_before = c.stats().renewal_rounds;
  wait_until([&] { return c.stats().renewal_rounds >= rounds_before + 6; });
  const auto s = c.stats();
  EXPECT_EQ(s.leases_lost, 0u);
  EXPECT_GE(s.leases_renewed, 5u * leases);
  for (const auto& l : held)
    ASSERT_TRUE(l.valid());
  // The queue held a tenth; the rest of the grants were dropped and counted.
  EXPECT_GE(s.events_dropped, static_cast<std::uint64_t>(leases - queue_limit - 10));
  EXPECT_LE(delivered.load(), 10);
  // The renewal lag histogram: no round started more than 250 ms late.
  const auto lag = c.metrics().renewal_lag;
  std::uint64_t late = 0;
  for (std::size_t i = 0; i < lag.counts.size(); ++i)
    if (i >= lag.upper_bounds.size() || lag.upper_bounds[i] > 0.25) late += lag.counts[i];
  if (!under_sanitizer) {
    EXPECT_EQ(late, 0u);
  }
  EXPECT_GE(lag.count, 5u);
  raw_redis raw(server().port());
  for (int i = 0; i < leases; i += 997)
    EXPECT_GT(raw({"PTTL", "slow:" + std::to_string(i)}).integer(), 0);
  held.clear();  // the releases' events are dropped too: the queue is still full
}

}  // namespace
}  // namespace dlock::testing
