// RedLock over five private, independent redis-servers (and a sixth for the data the lock
// protects): mutual exclusion across processes, a minority of masters killed or paused, a
// majority down, a stalled master, a holder left with a minority, fencing tokens across master
// restarts, interop with node-redlock, and the command line.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "child_process.hpp"
#include "cli_support.hpp"
#include "dlock/dlock.hpp"
#include "polling.hpp"
#include "redis_fixture.hpp"
#include "sanitizers.hpp"

namespace dlock::testing {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

constexpr std::size_t kMasters = 5;

class RedLock : public redis_test {
 protected:
  std::size_t server_count() const override { return kMasters + 1; }  // + the data server

  embedded::redis_server& master(std::size_t i) { return server(i); }
  std::vector<std::string> master_urls() {
    std::vector<std::string> urls;
    for (std::size_t i = 0; i < kMasters; ++i)
      urls.push_back(url(i));
    return urls;
  }
  client_options options() { return client_options::redlock_masters(master_urls()); }
  /// lock_worker's target for these masters.
  std::string target() {
    std::string t = "redlock:";
    for (const auto& u : master_urls())
      t += (t.size() > 8 ? "," : "") + u;
    return t;
  }
  std::string data_url() { return url(kMasters); }
  std::uint16_t data_port() { return server(kMasters).port(); }
  std::vector<std::string> cli_urls() {
    std::vector<std::string> a;
    for (const auto& u : master_urls()) {
      a.push_back("--url");
      a.push_back(u);
    }
    return a;
  }

  /// Waits (bounded) until the data server's `key` counts at least `n`: the workers are under
  /// way.
  void wait_for_count(const std::string& key, long n) {
    raw_redis raw(data_port());
    const auto limit = steady::now() + 120s;
    for (;;) {
      const auto v = raw({"GET", key});
      if (!v.is_nil() && std::stol(v.str()) >= n) return;
      ASSERT_LT(steady::now(), limit) << key << " never reached " << n;
      std::this_thread::sleep_for(5ms);
    }
  }

  /// Waits (bounded) until every master has `key`: a grant needs only a majority, so the other
  /// masters' answers may still be on their way when it is returned.
  void wait_on_every_master(const std::string& key) {
    const auto limit = steady::now() + 30s;
    for (std::size_t i = 0; i < kMasters; ++i) {
      raw_redis m(master(i).port());
      while (m({"EXISTS", key}).integer() == 0) {
        ASSERT_LT(steady::now(), limit) << "master " << i << " never got " << key;
        std::this_thread::sleep_for(1ms);
      }
    }
  }

  /// Waits (bounded) until `c` is connected to every master (it is ready once a majority is):
  /// until one grant reaches all of them (a master not yet connected is skipped by a grant).
  void wait_connected_to_all(const client& c) {
    const auto limit = steady::now() + 30s;
    for (;;) {
      auto warm = c.simple(key("warm-up")).acquire({.lease_time = 30s});
      bool everywhere = true;
      for (std::size_t i = 0; i < kMasters && everywhere; ++i) {
        raw_redis m(master(i).port());
        // The grant's answers from the masters that are connected come at once.
        for (int tries = 0; tries < 200 && m({"EXISTS", key("warm-up")}).integer() == 0; ++tries)
          std::this_thread::sleep_for(1ms);
        everywhere = m({"EXISTS", key("warm-up")}).integer() == 1;
      }
      warm.release();
      if (everywhere) return;
      ASSERT_LT(steady::now(), limit) << "the client never reached every master";
    }
  }

  /// Options under which the client gives masters 3 and 4 up after 300 ms of silence (their
  /// command timeout), so that stopping them drops its connections to them.
  client_options options_dropping_3_and_4() {
    auto o = options();
    for (const std::size_t i : {3, 4})
      o.redlock.masters[i].command_timeout = 300ms;
    return o;
  }
  /// Stops masters 3 and 4, runs `attempt`, and waits until `c` has dropped its connections to
  /// both (options_dropping_3_and_4). They stay stopped.
  template <class Attempt>
  void stop_3_and_4_until_dropped(const client& c, const Attempt& attempt) {
    const auto masters = c.masters();
    const std::uint64_t before[] = {masters[3]->counters().connection_losses,
                                    masters[4]->counters().connection_losses};
    master(3).pause();
    master(4).pause();
    attempt();
    wait_until([&] {
      return masters[3]->counters().connection_losses > before[0] &&
             masters[4]->counters().connection_losses > before[1];
    });
  }

  std::vector<child_process> counting_workers(int processes, const std::string& kind, int each) {
    std::vector<child_process> workers;
    for (int i = 0; i < processes; ++i) {
      workers.emplace_back(
          std::vector<std::string>{worker_path(), "count", target(), kind, key("lock"),
                                   key("counter"), std::to_string(each), data_url()},
          captured);
    }
    return workers;
  }
};

class RedLockKinds : public RedLock, public ::testing::WithParamInterface<std::string> {};
INSTANTIATE_TEST_SUITE_P(Kinds, RedLockKinds, ::testing::Values("simple", "reentrant"),
                         [](const auto& param_info) { return param_info.param; });

// 2,000 contended acquisitions (8 processes x 250), each a quorum round on five masters (the
// single-server twins take 4,000).
TEST_P(RedLockKinds, EightProcessesKeepANonAtomicCounterExactOnFiveMasters) {
  auto workers = counting_workers(8, GetParam(), 250);
  for (auto& w : workers) {
    EXPECT_EQ(w.wait_for("done", 300s), "done");
    EXPECT_EQ(w.wait(), 0);
  }
  raw_redis data(data_port());
  EXPECT_EQ(data({"GET", key("counter")}).str(), "2000");
  for (std::size_t i = 0; i < kMasters; ++i) {
    raw_redis m(master(i).port());
    if (m({"EXISTS", key("lock")}).integer() == 0) continue;
    // What was left, for the failure to be read: whose holds, how many, for how long.
    std::string fields;
    if (m({"TYPE", key("lock")}).str() == "hash") {
      for (const auto& f : m({"HGETALL", key("lock")}).elements())
        fields += " " + f.str();
    }
    ADD_FAILURE() << "master " << i << " still has the lock:" << fields << ", pttl "
                  << m({"PTTL", key("lock")}).integer();
  }
}

TEST_F(RedLock, EachMasterHoldsTheSingleServerLayout) {
  client c(options());
  wait_connected_to_all(c);
  {
    // Simple: node-redlock's and redsync's string key with the token, on every master.
    auto l = c.simple(key("s")).acquire({.lease_time = 10s});
    ASSERT_TRUE(l);
    wait_on_every_master(key("s"));
    const auto token = c.simple(key("s")).holder()->owner;
    for (std::size_t i = 0; i < kMasters; ++i) {
      raw_redis m(master(i).port());
      EXPECT_EQ(m({"GET", key("s")}).str(), token) << "master " << i;
      EXPECT_GT(m({"PTTL", key("s")}).integer(), 9000);
    }
  }
  {
    // Reentrant: a Redisson RLock hash on every master, re-entered on every master.
    auto outer = c.reentrant(key("r")).acquire();
    auto inner = c.reentrant(key("r")).acquire();
    EXPECT_EQ(inner.fence(), outer.fence());
    for (std::size_t i = 0; i < kMasters; ++i) {
      raw_redis m(master(i).port());
      // The re-entry's count, once every master has seen it.
      const auto limit = steady::now() + 30s;
      for (;;) {
        const auto counts = m({"HVALS", key("r")});
        if (!counts.elements().empty() && counts.elements()[0].str() == "2") break;
        if (steady::now() >= limit) break;
        std::this_thread::sleep_for(1ms);
      }
      const auto fields = m({"HGETALL", key("r")});
      ASSERT_EQ(fields.elements().size(), 2u) << "master " << i;
      EXPECT_EQ(fields.elements()[1].str(), "2");
    }
    inner.release();
    outer.release();
    for (std::size_t i = 0; i < kMasters; ++i) {
      raw_redis m(master(i).port());
      EXPECT_EQ(m({"EXISTS", key("r")}).integer(), 0) << "master " << i;
    }
  }
  // The fence a grant carries stands on a majority of the counters (written back).
  auto l = c.simple(key("f")).acquire({.lease_time = 10s});
  int at_least = 0;
  for (std::size_t i = 0; i < kMasters; ++i) {
    raw_redis m(master(i).port());
    const auto v = m({"GET", "redisson_lock_token:{" + key("f") + "}"});
    if (!v.is_nil() && std::stoull(v.str()) >= l.fence()) ++at_least;
  }
  EXPECT_GE(at_least, 3);
}

// The token a grant carries must stand on a majority before it is returned. A master that drew
// it itself has it; only the others are raised. Masters 3 and 4 refuse here (another holder),
// so the grant's majority is masters 0-2, whose counters stand 50 apart: the token is master
// 2's, and masters 0 and 1 are raised to it before the grant returns. Then, with every counter
// level, each master draws the same token and the grant writes nothing back.
// Each master keeps the holder record beside its copy of the lock, written and removed by the
// same scripts as on one server; info() reads it from the master that shows the lock.
TEST_F(RedLock, EachMasterRecordsTheHolderBesideItsCopyOfTheLock) {
  auto o = options();
  o.holder_label = "redlock-job";
  client c(o);
  wait_connected_to_all(c);
  const auto record = keys_of_lock(key("who")).holder;
  {
    auto l = c.simple(key("who")).acquire({.lease_time = 10s});
    ASSERT_TRUE(l);
    wait_on_every_master(record);
    const auto info = c.simple(key("who")).info();
    ASSERT_EQ(info.holders.size(), 1u);
    ASSERT_TRUE(info.holders[0].identity);
    EXPECT_EQ(info.holders[0].identity->label, "redlock-job");
    EXPECT_EQ(info.holders[0].identity->pid, ::getpid());
    for (std::size_t i = 0; i < kMasters; ++i) {
      raw_redis m(master(i).port());
      EXPECT_EQ(m({"HLEN", record}).integer(), 1) << "master " << i;
      EXPECT_GT(m({"PTTL", record}).integer(), 9000) << "master " << i;
    }
  }
  for (std::size_t i = 0; i < kMasters; ++i) {
    raw_redis m(master(i).port());
    const auto limit = steady::now() + 30s;
    while (m({"EXISTS", record}).integer() == 1) {
      ASSERT_LT(steady::now(), limit) << "master " << i << " kept the record";
      std::this_thread::sleep_for(1ms);
    }
  }
}

TEST_F(RedLock, OnlyTheMastersThatDrewALowerTokenAreRaisedToTheGrantsToken) {
  client c(options());
  wait_connected_to_all(c);
  const std::string counter = "redisson_lock_token:{" + key("t") + "}";
  // Above the clock era (docs/safety.md), so that no master restarts its counter from its clock.
  constexpr std::int64_t base = 4'000'000'000'000'000;
  for (std::size_t i = 0; i < kMasters; ++i) {
    raw_redis m(master(i).port());
    m({"SET", counter,
       std::to_string(base + 50 * static_cast<std::int64_t>(std::min<std::size_t>(i, 2)))});
    if (i >= 3) m({"SET", key("t"), "another-holder", "PX", "60000"});
  }
  const auto raised_before = c.stats().redlock_fence_raises;
  auto mixed = c.simple(key("t")).try_acquire({.lease_time = 10s});
  ASSERT_TRUE(mixed);
  EXPECT_EQ(mixed.fence(), static_cast<std::uint64_t>(base + 101));
  EXPECT_EQ(c.stats().redlock_fence_raises - raised_before, 2u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(raw_redis(master(i).port())({"GET", counter}).str(), std::to_string(base + 101))
        << "master " << i << " does not stand at the token the grant returned";
  }
  ASSERT_TRUE(mixed.release());

  const auto level = base + 1000;
  for (std::size_t i = 0; i < kMasters; ++i) {
    raw_redis m(master(i).port());
    m({"SET", counter, std::to_string(level)});
    m({"DEL", key("t")});
  }
  const auto raised_between = c.stats().redlock_fence_raises;
  auto even = c.simple(key("t")).try_acquire({.lease_time = 10s});
  ASSERT_TRUE(even);
  EXPECT_EQ(even.fence(), static_cast<std::uint64_t>(level + 1));
  EXPECT_EQ(c.stats().redlock_fence_raises, raised_between);
  int at_token = 0;
  for (std::size_t i = 0; i < kMasters; ++i) {
    const auto v = raw_redis(master(i).port())({"GET", counter});
    if (!v.is_nil() && v.str() == std::to_string(level + 1)) ++at_token;
  }
  EXPECT_GE(at_token, 3);
  EXPECT_TRUE(even.release());
}

// A master can keep a hold of this very owner that the owner does not know of: an attempt
// that was on the wire when its connection was lost still runs there, and the release that
// followed could not reach it. Taken for a re-entry (most of the granting masters "re-entered"),
// that grant skipped its fence write-back (the token stood on one master only) and its release
// only counted the stale holds down, so they outlived it; renewed by each such grant, they kept
// the lock on two masters, a CI run's counting workers slowed down, and the name stayed locked
// after they had all exited.
TEST_F(RedLock, AStaleHoldOfTheSameOwnerIsNeitherTakenForAReEntryNorLeftBehind) {
  client c(options());
  wait_connected_to_all(c);
  const auto name = key("r");
  const std::string counter = "redisson_lock_token:{" + name + "}";
  std::string owner;
  {
    auto probe = c.reentrant(name).acquire({.lease_time = 10s});
    owner = c.reentrant(name).holder()->owner;
    ASSERT_TRUE(probe.release());
  }
  constexpr std::int64_t level = 4'000'000'000'000'000;
  const auto plant = [&](std::size_t busy_from, std::size_t busy_to) {
    for (std::size_t i = 0; i < kMasters; ++i) {
      raw_redis m(master(i).port());
      m({"DEL", name});
      m({"SET", counter, std::to_string(level)});
      if (i >= 3) {
        m({"HSET", name, owner, "1"});  // the stale hold: ours, unknown to the client
      } else if (i >= busy_from && i < busy_to) {
        m({"HSET", name, "another-client:1", "1"});
      }
      if (m({"EXISTS", name}).integer() == 1) m({"PEXPIRE", name, "60000"});
    }
  };
  const auto ours_left = [&](std::size_t i) {
    return !raw_redis(master(i).port())({"HGET", name, owner}).is_nil();
  };

  // Masters 1 and 2 held by another client: the grant is master 0's fresh hold plus the two
  // stale ones, a majority, which is a new grant (nothing is held here), not a re-entry.
  plant(1, 3);
  auto l = c.reentrant(name).try_acquire({.lease_time = 10s});
  ASSERT_TRUE(l);
  EXPECT_EQ(l.fence(), static_cast<std::uint64_t>(level + 1));
  for (const std::size_t i : {0, 3, 4}) {
    EXPECT_EQ(raw_redis(master(i).port())({"GET", counter}).str(), std::to_string(level + 1))
        << "master " << i << " does not stand at the token the grant returned";
    EXPECT_EQ(raw_redis(master(i).port())({"HGET", name, owner}).str(), "1")
        << "master " << i << " counts more than the one hold the client has";
  }
  ASSERT_TRUE(l.release());
  for (std::size_t i = 0; i < kMasters; ++i)
    EXPECT_FALSE(ours_left(i)) << "master " << i << " kept a hold of ours after the release";

  // Every other master held by another client: the attempt misses, and the stale holds go with
  // its undo (before the miss is reported) instead of being counted down to what they were.
  plant(0, 3);
  EXPECT_FALSE(c.reentrant(name).try_acquire({.lease_time = 10s}));
  for (std::size_t i = 0; i < kMasters; ++i)
    EXPECT_FALSE(ours_left(i)) << "master " << i << " kept a hold of ours after the miss";

  // A real re-entry is still one: the hold stands on every master, counted twice.
  for (std::size_t i = 0; i < kMasters; ++i)
    raw_redis(master(i).port())({"DEL", name});
  auto outer = c.reentrant(name).acquire({.lease_time = 10s});
  wait_on_every_master(name);
  auto inner = c.reentrant(name).acquire({.lease_time = 10s});
  EXPECT_EQ(inner.fence(), outer.fence());
  for (std::size_t i = 0; i < kMasters; ++i) {
    raw_redis m(master(i).port());
    wait_until([&] {  // the grant needs a majority; the others answer meanwhile
      const auto count = m({"HGET", name, owner});
      return !count.is_nil() && count.str() == "2";
    });
  }
  ASSERT_TRUE(inner.release());
  ASSERT_TRUE(outer.release());
  for (std::size_t i = 0; i < kMasters; ++i)
    EXPECT_FALSE(ours_left(i)) << "master " << i;
}

// Where such stale holds come from: two masters stall with an attempt on the wire, the client
// drops their silent connections, and the cleanup that follows (a grant's release, the drop
// after a miss) finds them down. When they resume they run the attempt late: a hold of ours for
// a whole lease, in which every other contender must find its majority among the other three
// masters (and a CI run once took 57 s instead of 7 that way). The cleanup is queued for their
// return instead, behind the late attempt, so the holds end as soon as they are back.
TEST_F(RedLock, HoldsLeftByAttemptsOnDroppedConnectionsEndWhenTheMastersReturn) {
  client c(options_dropping_3_and_4());
  wait_connected_to_all(c);
  // Runs `attempt` with masters 3 and 4 stopped until the client has dropped both their
  // connections, runs `cleanup` (they are down now), resumes them, and checks that both ran the
  // attempt (the name's fencing counter is there) and that no hold is left on either, well
  // within the 60 s lease that would otherwise keep it.
  const auto check = [&](const std::string& name, const auto& attempt, const auto& cleanup) {
    stop_3_and_4_until_dropped(c, attempt);
    cleanup();
    master(3).resume();
    master(4).resume();
    for (const std::size_t i : {3, 4}) {
      SCOPED_TRACE(name + " on master " + std::to_string(i));
      raw_redis m(master(i).port());
      const std::string counter = "redisson_lock_token:{" + name + "}";
      wait_until([&] { return m({"EXISTS", counter}).integer() == 1; });  // the attempt ran
      wait_until([&] { return m({"EXISTS", name}).integer() == 0; }, 20s);
    }
    for (std::size_t i = 0; i < 3; ++i)
      EXPECT_EQ(raw_redis(master(i).port())({"EXISTS", name}).integer(), 0) << "master " << i;
    wait_connected_to_all(c);
  };
  const auto granted_then_released = [&](const std::string& name, auto lock) {
    std::optional<decltype(lock.try_acquire())> held;
    check(
        name, [&] { held.emplace(lock.try_acquire({.lease_time = 60s})); },
        [&] {
          ASSERT_TRUE(*held);  // on masters 0-2
          EXPECT_TRUE(held->release());
        });
  };
  granted_then_released(key("reentrant"), c.reentrant(key("reentrant")));
  granted_then_released(key("simple"), c.simple(key("simple")));

  // A miss: masters 1 and 2 are held by another client, so master 0's grant is no majority.
  const auto name = key("missed");
  for (const std::size_t i : {1, 2}) {
    raw_redis m(master(i).port());
    m({"HSET", name, "another-client:1", "1"});
    m({"PEXPIRE", name, "60000"});
  }
  check(
      name, [&] { EXPECT_FALSE(c.reentrant(name).try_acquire({.lease_time = 60s})); },
      [&] {
        for (const std::size_t i : {1, 2})
          raw_redis(master(i).port())({"DEL", name});
      });
}

// Nobody waits for the drops queued for a master's return: a client closed while the masters
// are still stopped goes at once instead of waiting out the drops' deadline (the 60 s lease).
TEST_F(RedLock, DropsQueuedForMastersThatStayDownDoNotHoldTheClientsCloseUp) {
  std::optional<client> c(std::in_place, options_dropping_3_and_4());
  wait_connected_to_all(*c);
  lease held;
  stop_3_and_4_until_dropped(
      *c, [&] { held = c->reentrant(key("lock")).try_acquire({.lease_time = 60s}); });
  ASSERT_TRUE(held);
  EXPECT_TRUE(held.release());  // the drops for masters 3 and 4 are queued
  const auto started = steady::now();
  c.reset();
  EXPECT_LT(steady::now() - started, 10s) << "the close waited for the queued drops";
  master(3).resume();
  master(4).resume();
}

TEST_F(RedLock, TheSingleServerApiWorksUnchanged) {
  client c(options());
  // Lockable: std::scoped_lock over two RedLock locks and a std::mutex.
  auto a = c.reentrant(key("a"));
  auto b = c.simple(key("b"));
  std::mutex local;
  {
    std::scoped_lock all(a, b, local);
    EXPECT_TRUE(a.held_by_current_thread());
    EXPECT_TRUE(b.is_locked());
  }
  EXPECT_FALSE(b.is_locked());
  // Asynchronous: a waiter parks no thread and is granted when the holder releases (the unlock
  // message on the masters wakes it).
  auto held = c.simple(key("c")).acquire();
  auto granted = c.simple(key("c")).acquire_future(30s);
  EXPECT_EQ(granted.wait_for(50ms), std::future_status::timeout);
  const auto fence = held.fence();
  held.release();
  auto next = granted.get();
  ASSERT_TRUE(next);
  EXPECT_GT(next.fence(), fence);
  // On the subscriptions' connections, read independently of the grant's replies.
  wait_until([&] { return c.stats().unlock_messages >= 1; });
}

TEST_F(RedLock, TwoOfFiveMastersDownBeforeAndDuringTheRunChangeNothing) {
  master(0).kill();  // before the run
  auto workers = counting_workers(4, "simple", 200);
  wait_for_count(key("counter"), 100);
  master(1).pause();  // during the run: SIGSTOP, past any per-node timeout
  for (auto& w : workers) {
    EXPECT_EQ(w.read_line(300s), "done") << w.drain();
    EXPECT_EQ(w.wait(), 0);
  }
  master(1).resume();
  raw_redis data(data_port());
  EXPECT_EQ(data({"GET", key("counter")}).str(), "800");
}

// A grant needs a majority, not every master: one may refuse because another holder's release
// has not reached it yet. If two masters are then out of reach, the release frees the lock on two
// and finds it was never ours on the third: off a majority, so confirmed (it once counted as
// unconfirmed, and RedLock's counting workers reported a failed release).
TEST_F(RedLock, AReleaseFreeingItWhereItHeldAndFindingItNotOursOnTheRestOfAMajorityIsConfirmed) {
  client c(options());
  wait_connected_to_all(c);
  raw_redis(master(4).port())({"SET", key("s"), "another-holder", "PX", "60000"});
  auto l = c.simple(key("s")).acquire({.lease_time = 5s});
  ASSERT_TRUE(l);
  const auto limit = steady::now() + 30s;
  for (std::size_t i = 0; i < 4; ++i) {
    raw_redis m(master(i).port());
    while (m({"GET", key("s")}).is_nil() ||
           m({"GET", key("s")}).str() != c.simple(key("s")).holder()->owner) {
      ASSERT_LT(steady::now(), limit) << "master " << i << " never granted";
      std::this_thread::sleep_for(1ms);
    }
  }
  master(0).kill();
  master(1).pause();
  EXPECT_TRUE(l.release());
  master(1).resume();
  EXPECT_EQ(raw_redis(master(2).port())({"EXISTS", key("s")}).integer(), 0);
  EXPECT_EQ(raw_redis(master(3).port())({"EXISTS", key("s")}).integer(), 0);
  EXPECT_EQ(raw_redis(master(4).port())({"GET", key("s")}).str(), "another-holder");
}

TEST_F(RedLock, WithAMajorityDownNothingIsAcquiredAndTheWaitEndsOnTime) {
  client c(options());
  for (std::size_t i = 0; i < 3; ++i)
    master(i).kill();
  const auto started = steady::now();
  // Short leases: a partial grant whose release a loaded machine could not send in time must
  // not keep the name past the majority's return below.
  EXPECT_FALSE(c.simple(key("lock")).try_acquire_for(300ms, {.lease_time = 2s}));
  // The wait, plus at most one attempt's node timeout (5 % of the 30 s lease), not the 5 s
  // command timeout.
  EXPECT_LT(steady::now() - started, 300ms + 1500ms + 1s);
  EXPECT_FALSE(c.reentrant(key("lock")).try_acquire({.lease_time = 2s}));

  // Two command-line runs at once: neither acquires, neither runs its command.
  const auto marker = std::filesystem::temp_directory_path() / (key("ran") + ".marker");
  std::filesystem::remove(marker);
  auto args = cli_urls();
  // A 2 s lease: should a grant outlive its process on some master (the release is waited for
  // only a node timeout), it cannot keep the name past the wait for the majority's return below.
  for (const char* a : {"run", "--ttl", "2s", "--wait", "1s", "job", "--", "touch"})
    args.push_back(a);
  args.push_back(marker.string());
  std::vector<child_process> runs;
  for (int i = 0; i < 2; ++i) {
    auto with_cli = args;
    with_cli.insert(with_cli.begin(), DLOCK_CLI);
    embedded::spawn_options merged;
    merged.capture_stdout = true;
    merged.merge_stderr = true;
    runs.emplace_back(with_cli, merged);
  }
  for (auto& r : runs) {
    const auto output = r.drain();
    EXPECT_EQ(r.wait(), 75) << output;
    EXPECT_NE(output.find("majority"), std::string::npos) << output;
  }
  EXPECT_FALSE(std::filesystem::exists(marker));

  // A majority back: it works again, from the same client.
  master(0).start();
  EXPECT_TRUE(c.simple(key("lock")).try_acquire_for(10s));
  EXPECT_LT(c.stats().attempts, 1000u) << "a miss that a holder caused must not wake us again";
}

TEST_F(RedLock, AStalledMasterHoldsAnAttemptUpOnlyUntilTheNodeTimeout) {
  client c(options());
  wait_connected_to_all(c);
  // Held by someone else on one master, two masters stalled: only the stalled ones could still
  // make a majority, so the attempt waits for them, but no longer than 5 % of its lease.
  raw_redis other(master(0).port());
  ASSERT_EQ(other({"SET", key("lock"), "someone-else", "NX", "PX", "60000"}).str(), "OK");
  master(3).pause();
  master(4).pause();
  const auto started = steady::now();
  EXPECT_FALSE(c.simple(key("lock")).try_acquire({.lease_time = 4s}));  // node timeout 200 ms
  const auto took = steady::now() - started;
  EXPECT_GE(took, 190ms);
  EXPECT_LT(took, 2s) << "the 5 s command timeout is not what ends it";
  // With the others free, one stalled master does not slow a grant at all: three answers
  // decide it.
  master(4).resume();
  ASSERT_EQ(other({"DEL", key("lock")}).integer(), 1);
  auto l = c.simple(key("lock")).try_acquire({.lease_time = 4s});
  EXPECT_TRUE(l);
  l.release();
  master(3).resume();
  EXPECT_GE(c.stats().redlock_misses, 1u);
}

// A simple lock's release is reported once a majority has confirmed it, as node-redlock's is:
// two stalled masters do not hold unlock() up for the node timeout. Their answers are still
// waited for, by the client's teardown: when they come back the release reaches them, and the
// lock is left on no master.
TEST_F(RedLock, ASimpleReleaseReturnsOnAMajorityAndStillReachesTheStalledMasters) {
  {
    client c(options());
    wait_connected_to_all(c);
    auto l = c.simple(key("lock")).acquire({.lease_time = 60s});  // node timeout 3 s
    wait_on_every_master(key("lock"));
    master(3).pause();
    master(4).pause();
    const auto started = steady::now();
    EXPECT_TRUE(l.release());
    EXPECT_LT(steady::now() - started, 2s) << "the release waited for the stalled masters";
    for (std::size_t i = 0; i < 3; ++i)
      EXPECT_EQ(raw_redis(master(i).port())({"EXISTS", key("lock")}).integer(), 0) << i;
    master(3).resume();
    master(4).resume();
    EXPECT_EQ(c.stats().release_failures, 0u);
  }  // the client's teardown waits for masters 3 and 4 to answer
  for (std::size_t i = 0; i < kMasters; ++i)
    EXPECT_EQ(raw_redis(master(i).port())({"EXISTS", key("lock")}).integer(), 0) << i;
}

// A client that has just started returns once a majority is connected; a master still on its
// first connection attempt is not known to be down, so it gets the attempt (queued until its
// handshake ends) instead of counting as a refusal at once, and the lock lands there too.
TEST_F(RedLock, AMasterStillConnectingWhenTheClientStartsGetsTheAttemptToo) {
  auto o = options();
  for (auto& m : o.redlock.masters)
    m.connect_timeout = 30s;  // the stalled handshake must outlast the steps below
  master(4).pause();          // accepts the connection (the kernel does), answers nothing
  client c(o);
  auto l = c.simple(key("lock")).acquire({.lease_time = 60s});  // node timeout 3 s
  ASSERT_TRUE(l);
  master(4).resume();
  const auto owner = c.simple(key("lock")).holder()->owner;
  raw_redis late(master(4).port());
  // The master that was connecting gets the attempt once its handshake ends.
  wait_until([&] { return !late({"GET", key("lock")}).is_nil(); });
  EXPECT_EQ(late({"GET", key("lock")}).str(), owner);
  EXPECT_TRUE(l.release());
  for (std::size_t i = 0; i < kMasters; ++i)
    EXPECT_EQ(raw_redis(master(i).port())({"EXISTS", key("lock")}).integer(), 0) << "master " << i;
}

TEST_F(RedLock, AHolderLeftWithAMinorityIsToldAtTheNextRenewal) {
  auto o = options();
  o.watchdog_lease = 5s;
  o.watchdog_period = 300ms;
  client c(o);
  std::atomic<int> lost{0};
  std::optional<lease_lost_reason> why;
  std::mutex m;
  std::condition_variable cv;
  auto l = c.reentrant(key("lock")).acquire({.on_lost = [&](lease_lost_reason r) {
    std::lock_guard lock(m);
    why = r;
    ++lost;
    cv.notify_all();
  }});
  ASSERT_TRUE(l);
  // The stop token fires right after the callbacks have run: wait for both.
  bool stopped = false;
  std::stop_callback on_stop(l.stop_token(), [&] {
    std::lock_guard lock(m);
    stopped = true;
    cv.notify_all();
  });
  // Three masters restarted empty (no persistence): the lock is on two only.
  for (std::size_t i = 0; i < 3; ++i) {
    master(i).kill();
    master(i).start();
  }
  {
    std::unique_lock lock(m);
    ASSERT_TRUE(cv.wait_for(lock, 4s, [&] { return lost > 0 && stopped; }))
        << "no loss before the lease (5 s) would have run out";
  }
  EXPECT_EQ(why, lease_lost_reason::not_held);
  EXPECT_FALSE(l.valid());
  // The partial extensions were let go: another client gets the lock at once.
  client other(options());
  EXPECT_TRUE(other.reentrant(key("lock")).try_acquire_for(2s));
}

// The holder is paused (SIGSTOP) past its lease: another process gets the lock with a larger
// token, and the holder, resumed, is told it lost the lease and its late write is rejected.
TEST_F(RedLock, APausedHoldersLeaseRunsOutAndItsLateWriteIsRejected) {
  child_process holder(
      {worker_path(), "hold", target(), "simple", key("lock"), "2000", "500", key("resource")},
      captured);
  const auto acquired = holder.wait_for("acquired", 30s);
  ASSERT_TRUE(acquired) << holder.drain();
  const auto old_fence = std::stoull(acquired->substr(9));
  ASSERT_EQ(holder.wait_for("wrote"), "wrote 1");
  holder.signal(SIGSTOP);

  client c(options());
  auto l = c.simple(key("lock")).try_acquire_for(20s);
  ASSERT_TRUE(l) << "the paused holder's lease should have run out on a majority";
  EXPECT_GT(l.fence(), old_fence);
  EXPECT_TRUE(fenced_set(c, key("resource"), "second holder", l.fence()).written);

  holder.signal(SIGCONT);
  const auto lost = holder.wait_for("lost");
  ASSERT_TRUE(lost);
  EXPECT_NE(lost->find("callback=1 valid=0"), std::string::npos) << *lost;
  EXPECT_EQ(holder.wait_for("fenced"), "fenced written=0 highest=" + std::to_string(l.fence()));
  EXPECT_EQ(holder.wait(), 0);
  EXPECT_TRUE(l.valid()) << "the new holder was not disturbed";
}

// Masters with every write on disk before it is acknowledged: Redlock's own condition for
// safety across restarts, and the fencing tokens'.
class RedLockDurable : public RedLock {
 protected:
  embedded::server_options options_for(std::size_t i) const override {
    embedded::server_options o;
    if (i < kMasters) o.extra_args = {"--appendonly", "yes", "--appendfsync", "always"};
    return o;
  }
};

TEST_F(RedLockDurable, FencingTokensIncreaseAcrossMinorityMasterRestarts) {
  constexpr int processes = 4, each = fewer_under_sanitizers(500, 4);
  std::vector<child_process> workers;
  for (int i = 0; i < processes; ++i) {
    workers.emplace_back(
        std::vector<std::string>{worker_path(), "fence", target(), "simple", key("lock"),
                                 data_url(), key("fenced"), std::to_string(each)},
        captured);
  }
  // Two masters at a time (a minority) are SIGKILLed and restarted from their AOF while the
  // workers run, each time after another 40 grants. A release a master missed while down
  // leaves the lock there until its 2 s lease runs out: the run slows, it does not stop.
  std::atomic<bool> done{false};
  std::atomic<int> restarts{0};
  std::thread chaos([&] {
    raw_redis data(data_port());
    long last = 0;
    for (std::size_t round = 0; !done; ++round) {
      const auto seq = data({"GET", key("fenced") + ":seq"});
      const long now = seq.is_nil() ? 0 : std::stol(seq.str());
      if (now < last + 40) {
        std::this_thread::sleep_for(2ms);
        continue;
      }
      last = now;
      const std::size_t a = round % kMasters, b = (round + 2) % kMasters;
      master(a).kill();
      master(b).kill();
      master(a).start();
      master(b).start();
      restarts += 2;
    }
  });
  std::map<long, unsigned long long> fence_by_seq;
  std::vector<std::string> anomalies;
  for (auto& w : workers) {
    for (;;) {
      const auto line = w.read_line(300s);
      ASSERT_TRUE(line) << "a worker went silent";
      if (*line == "done") break;
      std::istringstream in(*line);
      std::string word;
      long seq = 0;
      unsigned long long fence = 0;
      if (in >> word >> seq >> fence && word == "grant") {
        fence_by_seq[seq] = fence;
      } else {
        anomalies.push_back(*line);
      }
    }
    EXPECT_EQ(w.wait(), 0);
  }
  done = true;
  chaos.join();
  EXPECT_TRUE(anomalies.empty()) << anomalies.front();
  ASSERT_EQ(fence_by_seq.size(), static_cast<std::size_t>(processes * each));
  EXPECT_EQ(fence_by_seq.begin()->first, 1);
  EXPECT_EQ(fence_by_seq.rbegin()->first, processes * each);
  unsigned long long previous = 0;
  for (const auto& [seq, fence] : fence_by_seq) {
    EXPECT_GT(fence, previous) << "grant " << seq << " went back";
    previous = fence;
  }
  EXPECT_GT(restarts.load(), 2);
  // Every older token is now stale to the fenced resource.
  redis_client data(data_url());
  EXPECT_FALSE(fenced_set(data, key("fenced") + ":resource", "late", previous - 1).written);
  EXPECT_TRUE(fenced_set(data, key("fenced") + ":resource", "last", previous).written);
}

// node-redlock, as its users run it: one ioredis client per master.
class NodeRedlock : public RedLock {
 protected:
  void SetUp() override {
    const auto modules = std::filesystem::path(DLOCK_SOURCE_DIR) / "bench/peers/node_modules";
    if (std::system("node --version >/dev/null 2>&1") != 0 ||
        !std::filesystem::exists(modules / "redlock") ||
        !std::filesystem::exists(modules / "ioredis")) {
      GTEST_SKIP() << "node-redlock is not installed: run bench/peers/install (scripts/test does)";
    }
    RedLock::SetUp();
  }
  std::vector<std::string> node(std::vector<std::string> rest) {
    std::vector<std::string> a = {"node",
                                  std::string(DLOCK_SOURCE_DIR) + "/tests/interop/node_redlock.js"};
    a.push_back(rest.front());
    std::string masters;
    for (const auto& u : master_urls())
      masters += (masters.empty() ? "" : ",") + u;
    a.push_back(masters);
    a.insert(a.end(), rest.begin() + 1, rest.end());
    return a;
  }
};

TEST_F(NodeRedlock, AndDlockExcludeEachOtherBothWays) {
  client c(options());
  {
    // dlock holds: node-redlock's single attempt is refused.
    auto l = c.simple(key("lock")).acquire();
    child_process attempt(node({"try", key("lock")}), captured);
    EXPECT_EQ(attempt.read_line(30s), "busy");
    EXPECT_EQ(attempt.wait(), 0);
  }
  {
    // node-redlock holds: dlock is refused until it releases, then gets the lock.
    child_process holder(node({"hold", key("lock")}), captured);
    const auto line = holder.wait_for("acquired", 30s);
    ASSERT_TRUE(line) << holder.drain();
    EXPECT_FALSE(c.simple(key("lock")).try_acquire());
    holder.signal(SIGTERM);
    EXPECT_EQ(holder.wait_for("released", 30s), "released");
    EXPECT_EQ(holder.wait(), 0);
    EXPECT_TRUE(c.simple(key("lock")).try_acquire_for(5s));
  }
  // Both at once on one counter, not atomic: it ends exact only if they exclude each other.
  child_process js(node({"count", key("both"), data_url(), key("counter"), "150"}), captured);
  child_process cpp(
      {worker_path(), "count", target(), "simple", key("both"), key("counter"), "150", data_url()},
      captured);
  EXPECT_EQ(js.wait_for("done", 300s), "done");
  EXPECT_EQ(cpp.wait_for("done", 300s), "done");
  EXPECT_EQ(js.wait(), 0);
  EXPECT_EQ(cpp.wait(), 0);
  raw_redis data(data_port());
  EXPECT_EQ(data({"GET", key("counter")}).str(), "300");
}

TEST_F(RedLock, TheCommandLineRunsOnFiveMastersWithTheDocumentedExitCodes) {
  auto with = [&](std::vector<std::string> rest) {
    auto a = cli_urls();
    a.insert(a.end(), rest.begin(), rest.end());
    return a;
  };
  const auto ran = dlock_cli(with({"run", "job", "--", "sh", "-c", "echo fence=$DLOCK_FENCE"}));
  EXPECT_EQ(ran.code, 0) << ran.output;
  const auto at = ran.output.find("fence=");
  ASSERT_NE(at, std::string::npos) << ran.output;
  EXPECT_GT(std::stoull(ran.output.substr(at + 6)), 0u);
  EXPECT_EQ(dlock_cli(with({"run", "job", "--", "sh", "-c", "exit 3"})).code, 3);

  // Held by a background run: a second run with no wait is not acquired (75).
  auto args = with({"run", "job", "--", "sh", "-c", "echo holding; exec sleep 60"});
  args.insert(args.begin(), DLOCK_CLI);
  child_process holder(args, captured);
  ASSERT_EQ(holder.wait_for("holding", 30s), "holding");
  const auto busy = dlock_cli(with({"run", "--wait", "0", "job", "--", "true"}));
  EXPECT_EQ(busy.code, 75) << busy.output;
  holder.signal(SIGTERM);
  holder.wait();

  // status and unlock --force reach every master, the first one down included.
  client c(options());
  auto held = c.simple(key("forced")).acquire({.lease_time = 60s});
  master(0).kill();
  const auto status = dlock_cli(with({"status", "--json", key("forced")}));
  EXPECT_EQ(status.code, 0) << status.output;
  EXPECT_NE(status.output.find("\"simple\""), std::string::npos) << status.output;
  const auto forced = dlock_cli(with({"unlock", "--force", key("forced")}));
  EXPECT_EQ(forced.code, 0) << forced.output;
  for (std::size_t i = 1; i < kMasters; ++i) {
    raw_redis m(master(i).port());
    EXPECT_EQ(m({"EXISTS", key("forced")}).integer(), 0) << "master " << i;
  }

  const auto listed = dlock_cli(with({"ls"}));
  EXPECT_EQ(listed.code, 0) << listed.output;

  // Two masters are not RedLock: a usage error on one line.
  const auto two = dlock_cli({"--url", url(0), "--url", url(1), "run", "job", "--", "true"});
  EXPECT_EQ(two.code, 64) << two.output;
  EXPECT_NE(two.output.find("at least 3"), std::string::npos) << two.output;
  EXPECT_EQ(line_count(two.output), 1u) << two.output;
}

}  // namespace
}  // namespace dlock::testing
