// What only a Sentinel set or a cluster can do to locks: names spread over masters, a slot
// migrating under load, masters killed and replicas promoted, with and without replica
// acknowledgement; and the command line on both.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "cli_support.hpp"
#include "dlock/dlock.hpp"
#include "embedded/redis_cluster.hpp"
#include "embedded/redis_sentinel_set.hpp"
#include "embedded/resp_client.hpp"
#include "polling.hpp"
#include "redis_fixture.hpp"

namespace dlock::testing {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
using embedded::redis_cluster;

// ---- cluster ----

TEST(ClusterLocks, AThousandNamesSpreadOverTheThreeMasters) {
  redis_cluster cluster;
  client c(client_options::cluster(cluster.seed_urls()));
  std::map<std::size_t, int> per_master;
  std::vector<lease> held;
  for (int i = 0; i < 1000; ++i) {
    const std::string name = "spread:" + std::to_string(i);
    held.push_back(c.reentrant(name).try_acquire());
    ASSERT_TRUE(held.back()) << name;
    ++per_master[cluster.master_of_slot(redis_cluster::key_slot(name))];
  }
  std::cout << "[ info ] 1000 names over " << per_master.size() << " masters:";
  for (const auto& [node, n] : per_master)
    std::cout << " node " << node << ": " << n;
  std::cout << "\n";
  ASSERT_EQ(per_master.size(), 3u);
  for (const auto& [node, n] : per_master) {
    EXPECT_GT(n, 250) << "node " << node;
    raw_redis raw(cluster.node(node).port());
    EXPECT_EQ(raw({"DBSIZE"}).integer(), 3 * n)
        << "a lock, its fence counter and its holder record per name, on its slot's master";
  }
  for (auto& l : held)
    EXPECT_TRUE(l.release());
  EXPECT_EQ(c.stats().moved_redirects, 0u) << "the client knew the map";
}

// 16 threads lock names of one slot and increment a non-atomic counter per name while the slot
// moves to another master key by key (ASK) and then for good (MOVED).
TEST(ClusterLocks, ASlotMigratingUnderLoadReachesNoCallerAndLosesNoUpdate) {
  redis_cluster cluster;
  client c(client_options::cluster(cluster.seed_urls()));
  constexpr int names = 8;
  constexpr int threads = 16;
  const auto slot = redis_cluster::key_slot("mig");
  const auto from = cluster.master_of_slot(slot);
  std::size_t to = from;
  for (const auto m : cluster.master_indexes())
    if (m != from) to = m;
  std::atomic<bool> stop{false};
  std::atomic<int> errors{0};
  std::vector<std::atomic<int>> done(names);
  std::mutex first_error_mutex;
  std::string first_error;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      const int i = t % names;
      const std::string lock = "{mig}:lock:" + std::to_string(i);
      const std::string counter = "{mig}:counter:" + std::to_string(i);
      while (!stop) {
        try {
          auto l = c.reentrant(lock).try_acquire_for(30s);
          if (!l) throw std::runtime_error("not acquired within 30 s");
          const auto v = c.command(counter, {"GET", counter});
          const std::string next = std::to_string(v.is_nil() ? 1 : std::stol(v.str()) + 1);
          c.command(counter, {"SET", counter, next});
          if (!l.release()) throw std::runtime_error("release not confirmed");
          ++done[static_cast<std::size_t>(i)];
        } catch (const std::exception& e) {
          ++errors;
          std::lock_guard guard(first_error_mutex);
          if (first_error.empty()) first_error = e.what();
        }
      }
    });
  }
  auto total = [&] {
    int n = 0;
    for (auto& d : done)
      n += d.load();
    return n;
  };
  auto wait_for_progress = [&](int more) {
    const int target = total() + more;
    const auto limit = steady::now() + 60s;
    while (total() < target && steady::now() < limit)
      std::this_thread::sleep_for(5ms);
  };
  wait_for_progress(200);
  // Key by key, as redis-cli --cluster reshard does, while the threads go on: meanwhile the
  // slot is half here, half there. A script whose keys are split, or missing on the importing
  // side, gets TRYAGAIN until the migration ends (Redis Cluster's rule for multi-key commands);
  // one whose keys all moved gets ASK. Then the slot changes owner (MOVED).
  // A client that only reads a counter, so that no subscription tells it of the move early: it
  // must follow an ASK while the slot is half-migrated and a MOVED once it has moved.
  client observer(client_options::cluster(cluster.seed_urls()));
  const std::string watched = "{mig}:counter:0";
  ASSERT_FALSE(observer.command(watched, {"GET", watched}).is_nil());
  cluster.begin_migration(slot, from, to);
  while (cluster.move_keys(slot, from, to, 1) > 0) {
  }
  EXPECT_FALSE(observer.command(watched, {"GET", watched}).is_nil()) << "read through ASK";
  cluster.finish_migration(slot, from, to);
  EXPECT_FALSE(observer.command(watched, {"GET", watched}).is_nil()) << "read through MOVED";
  EXPECT_GE(observer.stats().ask_redirects, 1u);
  EXPECT_GE(observer.stats().moved_redirects, 1u);
  wait_for_progress(200);
  stop = true;
  for (auto& w : workers)
    w.join();
  EXPECT_EQ(errors.load(), 0) << first_error;
  for (int i = 0; i < names; ++i) {
    const std::string counter = "{mig}:counter:" + std::to_string(i);
    raw_redis raw(cluster.node(to).port());
    EXPECT_EQ(raw({"GET", counter}).str(), std::to_string(done[static_cast<std::size_t>(i)].load()))
        << counter;
  }
  const auto s = c.stats();
  std::cout << "[ info ] " << total() << " critical sections; followed " << s.moved_redirects
            << " MOVED, " << s.ask_redirects << " ASK; " << s.slot_map_refreshes
            << " slot maps fetched\n";
  // The workers' client may hear of the move from the server's own SUNSUBSCRIBE and fetch the
  // map before any command is redirected; either way it followed the slot.
  EXPECT_GT(s.moved_redirects + s.ask_redirects + s.slot_map_refreshes, 0u);
}

// A name whose keys a migration split (its fencing counter already on the importing node, the
// lock on neither): the source answers ASK and the target TRYAGAIN, round after round, until the
// slot is whole again. The acquisition goes on within its wait and is granted once the
// migration ends; it used to hand its caller the ASK after sixteen redirects.
TEST(ClusterLocks, AnAcquisitionWaitsOutAMigrationThatSplitItsKeys) {
  redis_cluster cluster;
  const std::string name = "split:job";
  const auto slot = redis_cluster::key_slot(name);
  const auto from = cluster.master_of_slot(slot);
  std::size_t to = from;
  for (const auto m : cluster.master_indexes())
    if (m != from) to = m;
  client c(client_options::cluster(cluster.seed_urls()));
  c.reentrant(name).try_acquire().release();  // leaves the fencing counter alone in the slot
  cluster.begin_migration(slot, from, to);
  ASSERT_EQ(cluster.move_keys(slot, from, to, 1), 1u);
  auto acquiring =
      std::async(std::launch::async, [&] { return c.reentrant(name).try_acquire_for(60s); });
  const auto limit = steady::now() + 30s;
  while (c.stats().ask_redirects < 40 && steady::now() < limit)
    std::this_thread::sleep_for(5ms);
  EXPECT_GE(c.stats().ask_redirects, 40u) << "the split slot was never asked about";
  cluster.finish_migration(slot, from, to);
  auto held = acquiring.get();
  EXPECT_TRUE(held);
}

// A master killed and its replica promoted: acquisitions on its slots resume soon after the
// cluster is healthy again, and a replica-acknowledged lease held there survives.
TEST(ClusterLocks, AFailoverResumesAcquisitionsAndKeepsAcknowledgedLeases) {
  redis_cluster cluster({.replicas_per_master = 1});
  const std::string kept = "failover:kept";
  const auto doomed = cluster.master_of_slot(redis_cluster::key_slot(kept));
  std::string other = "failover:other";
  for (int i = 0; cluster.master_of_slot(redis_cluster::key_slot(other)) != doomed; ++i)
    other = "failover:other:" + std::to_string(i);

  auto acked = client_options::cluster(cluster.seed_urls());
  acked.min_replica_acks = 1;
  acked.watchdog_lease = 20s;  // the promoted replica has no replica left to acknowledge renewals
  client holder(acked);
  std::atomic<bool> lost{false};
  auto l = holder.reentrant(kept).try_acquire({.on_lost = [&](lease_lost_reason) { lost = true; }});
  ASSERT_TRUE(l);

  client c(client_options::cluster(cluster.seed_urls()));
  cluster.kill_node(doomed);
  const auto killed = steady::now();
  const auto promoted = cluster.wait_failover(doomed, 60s);
  const auto failed_over = steady::now();
  cluster.wait_healthy(60s);
  const auto healthy = steady::now();
  // Acquisitions on the dead master's slots come back.
  auto next = c.reentrant(other).try_acquire_for(30s);
  const auto resumed = steady::now();
  ASSERT_TRUE(next);
  auto ms = [](auto d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); };
  std::cout << "[ info ] failover took " << ms(failed_over - killed) << " ms, healthy after "
            << ms(healthy - killed) << " ms; acquisitions resumed after " << ms(resumed - killed)
            << " ms\n";
  EXPECT_LE(resumed - healthy, 1s);
  // The acknowledged lease is on the promoted replica, and nobody else can take it.
  raw_redis raw(cluster.node(promoted).port());
  EXPECT_EQ(raw({"EXISTS", kept}).integer(), 1);
  EXPECT_FALSE(c.reentrant(kept).try_acquire());
  EXPECT_FALSE(lost.load());
  EXPECT_TRUE(l.valid());
  EXPECT_TRUE(l.release());
}

// Redisson on a Redis 7 cluster publishes its unlock message with SPUBLISH on the lock's slot
// (its scripts take the publish command as an argument). Written out here as a foreign client:
// a dlock waiter must wake on that message alone, and a dlock release must reach a foreign
// SSUBSCRIBEr there.
TEST(ClusterLocks, RedissonsShardedUnlockMessagesWakeDlockWaitersAndTheOtherWayRound) {
  redis_cluster cluster;
  const std::string name = "interop";
  const std::string channel = "redisson_lock__channel:{interop}";
  raw_redis raw(cluster.node(cluster.master_of_slot(redis_cluster::key_slot(name))).port());
  constexpr const char* redisson_style_acquire =
      "if redis.call('exists', KEYS[1]) == 0 then redis.call('hincrby', KEYS[1], ARGV[2], 1) "
      "redis.call('pexpire', KEYS[1], ARGV[1]) return nil end return redis.call('pttl', KEYS[1])";
  constexpr const char* redisson_style_release =
      "if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end "
      "if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then "
      "redis.call('pexpire', KEYS[1], ARGV[2]) return 0 end "
      "redis.call('del', KEYS[1]) redis.call(ARGV[4], KEYS[2], ARGV[1]) return 1";
  EXPECT_TRUE(
      raw({"EVAL", redisson_style_acquire, "1", name, "30000", "redisson-uuid:7"}).is_nil());

  auto o = client_options::cluster(cluster.seed_urls());
  o.max_recheck = 60s;  // only the message can wake the waiter in time
  client c(o);
  auto waiting = c.reentrant(name).acquire_future(50s);
  const auto limit = steady::now() + 30s;
  while (raw({"PUBSUB", "SHARDNUMSUB", channel}).at(1).integer() < 1) {
    ASSERT_LT(steady::now(), limit) << "the waiter never subscribed on the slot's node";
    std::this_thread::sleep_for(2ms);
  }
  EXPECT_EQ(raw({"EVAL", redisson_style_release, "2", name, channel, "0", "30000",
                 "redisson-uuid:7", "spublish"})
                .integer(),
            1);
  ASSERT_EQ(waiting.wait_for(20s), std::future_status::ready)
      << "the lease (30 s) and the recheck (60 s) are far away: the SPUBLISH must wake it";
  auto l = waiting.get();
  ASSERT_TRUE(l);

  // The other way: a foreign SSUBSCRIBEr on the slot's node hears dlock's release.
  embedded::resp_client listener(
      cluster.node(cluster.master_of_slot(redis_cluster::key_slot(name))).port());
  listener({"SSUBSCRIBE", channel});
  EXPECT_TRUE(l.release());
  const auto message = listener.read();
  ASSERT_EQ(message.elements.size(), 3u) << message.to_string();
  EXPECT_EQ(message.elements[0].text, "smessage");
  EXPECT_EQ(message.elements[1].text, channel);
  EXPECT_EQ(message.elements[2].text, "0");
}

TEST(ClusterLocks, ANameWhoseKeysSpanTwoSlotsIsRefusedClearly) {
  redis_cluster cluster;
  client c(client_options::cluster(cluster.seed_urls()));
  try {
    c.reentrant("job{").try_acquire();
    ADD_FAILURE() << "keys in two slots cannot be locked together";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("different cluster slots"), std::string::npos) << e.what();
  }
  auto o = client_options::cluster(cluster.seed_urls());
  o.fence_counter = "all-fences";
  EXPECT_THROW(client{o}, error);
}

TEST(ClusterLocks, TheCommandLineRunsListsAndShowsLocksAcrossTheCluster) {
  redis_cluster cluster;
  std::vector<std::string> target = {"--cluster"};
  for (const auto& url : cluster.seed_urls()) {
    target.push_back("--url");
    target.push_back(url);
  }
  auto with = [&](std::vector<std::string> rest) {
    auto a = target;
    a.insert(a.end(), rest.begin(), rest.end());
    return a;
  };
  for (const char* name : {"cli:a", "cli:b", "cli:c", "cli:d", "cli:e", "cli:f"}) {
    const auto r = dlock_cli(with({"run", name, "--", "sh", "-c", "echo fence=$DLOCK_FENCE"}));
    EXPECT_EQ(r.code, 0) << r.output;
    EXPECT_NE(r.output.find("fence="), std::string::npos);
  }
  auto held = dlock_cli(with({"run", "--wait", "0", "cli:a", "--", "true"}));
  EXPECT_EQ(held.code, 0) << held.output;
  const auto ls = dlock_cli(with({"ls", "--all", "--json"}));
  ASSERT_EQ(ls.code, 0) << ls.output;
  for (const char* name : {"cli:a", "cli:b", "cli:c", "cli:d", "cli:e", "cli:f"})
    EXPECT_NE(ls.output.find(std::string("\"") + name + "\""), std::string::npos) << ls.output;
  const auto status = dlock_cli(with({"status", "cli:c"}));
  EXPECT_EQ(status.code, 0) << status.output;
  EXPECT_NE(status.output.find("free"), std::string::npos) << status.output;
}

// ---- Sentinel ----

// A holder with a replica-acknowledged watchdog lease; the master is SIGKILLed and a replica
// promoted. A contender trying throughout never gets the lock while it is held, the holder's
// lease is renewed on the new master, and after the release the contender gets it.
void failover_with_contender(int acks) {
  embedded::redis_sentinel_set set({.replicas = 2});
  auto o = client_options::from_url(set.url());
  o.min_replica_acks = acks;
  // The lease must outlast the failover (SIGKILL, sentinels agreeing, promotion), which took
  // over 3 s once on a loaded CI machine; renewals still come every second.
  o.watchdog_lease = 20s;
  o.watchdog_period = 1s;
  client holder(o);
  std::atomic<bool> lost{false};
  auto l =
      holder.reentrant("job").try_acquire({.on_lost = [&](lease_lost_reason) { lost = true; }});
  ASSERT_TRUE(l);

  client contender(client_options::from_url(set.url()));
  std::atomic<bool> stop{false};
  std::atomic<bool> released{false};
  std::atomic<int> stolen{0};
  std::atomic<int> attempts{0};
  std::thread trying([&] {
    while (!stop) {
      try {
        if (auto got = contender.reentrant("job").try_acquire()) {
          if (!released) ++stolen;
          stop = true;
        }
      } catch (const error&) {
        // The master is gone for a while: the contender's errors are not the point.
      }
      ++attempts;
      std::this_thread::sleep_for(10ms);
    }
  });
  const auto old_master = set.master_index();
  set.data_node(old_master).kill();
  const auto promoted = set.wait_failover(old_master, 60s);
  // Renewed on the new master: two renewals after the client moved there.
  const auto limit = steady::now() + 30s;
  while (holder.stats().master_switches == 0 && steady::now() < limit)
    std::this_thread::sleep_for(10ms);
  const auto renewed = holder.stats().leases_renewed;
  while (holder.stats().leases_renewed < renewed + 2 && steady::now() < limit)
    std::this_thread::sleep_for(10ms);
  raw_redis raw(set.data_node(promoted).port());
  if (acks > 0) {
    EXPECT_GE(holder.stats().master_switches, 1u);
    EXPECT_GE(holder.stats().leases_renewed, renewed + 2) << "renewed on the new master";
    EXPECT_EQ(raw({"EXISTS", "job"}).integer(), 1);
    EXPECT_EQ(stolen.load(), 0) << "the contender got a lock that was held";
    EXPECT_FALSE(lost.load());
    EXPECT_TRUE(l.valid());
  } else {
    // Without acknowledgement the grant may be missing on the promoted replica; then the
    // contender can take it, and the holder must be told (never a silent loss).
    std::cout << "[ info ] without acknowledgement: contender "
              << (stolen ? "took the lock" : "never got the lock") << ", holder "
              << (lost ? "was told it lost it" : "kept it") << "\n";
    if (stolen) {
      EXPECT_TRUE(lost.load() || !l.valid());
    }
  }
  released = true;
  l.release();
  trying.join();
  EXPECT_GT(attempts.load(), 0);
  EXPECT_TRUE(stop.load()) << "after the release the contender gets it";
}

TEST(SentinelLocks, AnAcknowledgedLeaseSurvivesAFailoverAndExcludesAContender) {
  failover_with_contender(1);
}

TEST(SentinelLocks, WithoutAcknowledgementAFailoverNeverLosesALeaseSilently) {
  failover_with_contender(0);
}

// A client that missed +switch-master (it reconnected to the old master while it was being
// replaced: a master still says it is one until Sentinel demotes it) must not stay there: it asks
// the sentinels every master_check_period. Here the sentinels are told of a new master without
// any announcement, and both nodes say they are masters, which is what such a client sees.
TEST(SentinelLocks, AClientThatMissedAnAnnouncementMovesToTheMasterTheSentinelsName) {
  embedded::redis_sentinel_set set;
  auto o = client_options::from_url(set.url());
  o.sentinel.master_check_period = 200ms;
  client c(o);
  ASSERT_TRUE(c.simple("before").try_acquire());  // released at once: the client is connected
  const auto old_master = set.master_index();
  const auto next = old_master == 0 ? 1 : 0;
  raw_redis(set.data_node(next).port())({"REPLICAOF", "NO", "ONE"});
  for (std::size_t i = 0; i < set.sentinels(); ++i) {
    raw_redis sentinel(set.sentinel(i).port());
    sentinel({"SENTINEL", "REMOVE", set.master_name()});
    sentinel({"SENTINEL", "MONITOR", set.master_name(), "127.0.0.1",
              std::to_string(set.data_node(next).port()), "2"});
  }
  wait_until([&] { return c.stats().master_switches >= 1; });
  const auto held = c.simple("after").try_acquire();
  ASSERT_TRUE(held);
  EXPECT_EQ(raw_redis(set.data_node(next).port())({"EXISTS", "after"}).integer(), 1);
  EXPECT_EQ(raw_redis(set.data_node(old_master).port())({"EXISTS", "after"}).integer(), 0);
}

TEST(SentinelLocks, TheCommandLineFindsTheMasterThroughTheSentinels) {
  embedded::redis_sentinel_set set;
  std::vector<std::string> target = {"--sentinel", "mymaster"};
  for (const auto& url : set.sentinel_urls()) {
    target.push_back("--url");
    target.push_back(url);
  }
  auto with = [&](std::vector<std::string> rest) {
    auto a = target;
    a.insert(a.end(), rest.begin(), rest.end());
    return a;
  };
  auto r = dlock_cli(with({"run", "--replicas", "1", "job", "--", "sh", "-c", "echo ok"}));
  EXPECT_EQ(r.code, 0) << r.output;
  r = dlock_cli(with({"ls", "--all"}));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("job"), std::string::npos) << r.output;
  r = dlock_cli(with({"status", "job"}));
  EXPECT_EQ(r.code, 0) << r.output;
  // More acknowledgements than there are replicas: never granted, exit 75 after --wait.
  r = dlock_cli(with({"run", "--replicas", "3", "--wait", "1s", "job", "--", "true"}));
  EXPECT_EQ(r.code, 75) << r.output;
  EXPECT_NE(r.output.find("replicas acknowledged"), std::string::npos) << r.output;
  // The URL form works too.
  r = dlock_cli({"--url", set.url(), "run", "job", "--", "true"});
  EXPECT_EQ(r.code, 0) << r.output;
  r = dlock_cli(
      {"--sentinel", "nosuchmaster", "--url", set.sentinel_urls().front(), "status", "x"});
  EXPECT_EQ(r.code, 69) << r.output;
  EXPECT_NE(r.output.find("nosuchmaster"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace dlock::testing
