// The multi-process lock tests, one body each, on a standalone server, a Sentinel set and a
// 3-master cluster: mutual exclusion across processes, a holder killed with SIGKILL, a holder
// paused past its lease and fenced off, event-driven hand-off, and ten thousand watchdog leases
// renewed in pipelined rounds.
#include <gtest/gtest.h>
#include <signal.h>

#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "child_process.hpp"
#include "deployments.hpp"
#include "dlock/dlock.hpp"
#include "redis_fixture.hpp"

namespace dlock::testing {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

std::string channel_of(const std::string& name) {
  return "redisson_lock__channel:{" + name + "}";
}

class Topology : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { d_ = start_deployment(GetParam()); }
  void TearDown() override { d_.reset(); }

  deployment& d() { return *d_; }
  std::string key(std::string_view name) const {
    const auto* t = ::testing::UnitTest::GetInstance()->current_test_info();
    return std::string(t->name()).substr(0, 24) + ":" + std::string(name);
  }
  raw_redis raw_for(std::string_view key) { return raw_redis(d().port_for(key)); }

  /// Waits (bounded) until `n` clients listen on a lock's unlock channel.
  void wait_for_listeners(const std::string& name, std::int64_t n) {
    const auto channel = channel_of(name);
    auto raw = raw_for(channel);
    const auto limit = steady::now() + 30s;
    while (raw({"PUBSUB", d().numsub(), channel}).at(1).integer() < n) {
      ASSERT_LT(steady::now(), limit) << "waiters never subscribed";
      std::this_thread::sleep_for(2ms);
    }
  }

  /// Scripts and (un)subscriptions the clients sent, over every master.
  std::int64_t client_commands() {
    std::int64_t total = 0;
    for (const auto port : d().master_ports()) {
      raw_redis raw(port);
      std::istringstream info(raw({"INFO", "commandstats"}).str());
      for (std::string line; std::getline(info, line);) {
        for (const char* name :
             {"evalsha", "eval", "subscribe", "unsubscribe", "ssubscribe", "sunsubscribe"}) {
          const std::string prefix = std::string("cmdstat_") + name + ":calls=";
          if (line.rfind(prefix, 0) == 0) total += std::stoll(line.substr(prefix.size()));
        }
      }
    }
    return total;
  }

 private:
  std::unique_ptr<deployment> d_;
};

INSTANTIATE_TEST_SUITE_P(Deployments, Topology, ::testing::ValuesIn(all_deployments),
                         [](const auto& param_info) { return param_info.param; });

TEST_P(Topology, EightProcessesKeepANonAtomicCounterExact) {
  std::vector<child_process> workers;
  for (int i = 0; i < 8; ++i) {
    workers.emplace_back(std::vector<std::string>{worker_path(), "count", d().worker_target(),
                                                  "reentrant", key("lock"), key("counter"), "500"},
                         captured);
  }
  for (auto& w : workers) {
    EXPECT_EQ(w.wait_for("done", 300s), "done");
    EXPECT_EQ(w.wait(), 0);
  }
  EXPECT_EQ(raw_for(key("counter"))({"GET", key("counter")}).str(), "4000");
  EXPECT_EQ(raw_for(key("lock"))({"EXISTS", key("lock")}).integer(), 0);
}

TEST_P(Topology, AKilledHoldersLockComesBackAfterItsLeaseNotBefore) {
  constexpr auto lease_time = 2000ms;
  child_process holder({worker_path(), "hold", d().worker_target(), "reentrant", key("lock"),
                        std::to_string(lease_time.count()), "500", key("resource")},
                       captured);
  ASSERT_TRUE(holder.wait_for("acquired"));
  const auto asked = steady::now();
  const auto pttl =
      std::chrono::milliseconds(raw_for(key("lock"))({"PTTL", key("lock")}).integer());
  ASSERT_GT(pttl, 0ms);
  holder.signal(SIGKILL);
  EXPECT_EQ(holder.wait(), 128 + SIGKILL);
  const auto killed = steady::now();

  client c(d().options());
  auto l = c.reentrant(key("lock")).try_acquire_for(10s);
  const auto acquired = steady::now();
  ASSERT_TRUE(l);
  EXPECT_GE(acquired - asked, pttl - 5ms);
  EXPECT_LE(acquired - killed, lease_time + 1s);
}

TEST_P(Topology, APausedHolderLearnsItLostTheLeaseAndItsStaleWriteIsRejected) {
  child_process holder({worker_path(), "hold", d().worker_target(), "simple", key("lock"), "1000",
                        "250", key("resource")},
                       captured);
  const auto acquired = holder.wait_for("acquired ");
  ASSERT_TRUE(acquired);
  const auto old_fence = std::stoull(acquired->substr(9));
  ASSERT_EQ(holder.wait_for("wrote"), "wrote 1");
  holder.signal(SIGSTOP);

  client c(d().options());
  auto l = c.simple(key("lock")).try_acquire_for(20s);
  ASSERT_TRUE(l) << "the paused holder's lease should have run out";
  EXPECT_GT(l.fence(), old_fence);
  EXPECT_TRUE(fenced_set(c, key("resource"), "second holder", l.fence()).written);

  holder.signal(SIGCONT);
  const auto lost = holder.wait_for("lost");
  ASSERT_TRUE(lost);
  EXPECT_NE(lost->find("callback=1 valid=0"), std::string::npos) << *lost;
  EXPECT_EQ(holder.wait_for("fenced"), "fenced written=0 highest=" + std::to_string(l.fence()));
  EXPECT_EQ(holder.wait(), 0);
  EXPECT_EQ(raw_for(key("resource"))({"GET", key("resource")}).str(), "second holder");
  EXPECT_TRUE(l.valid());
}

TEST_P(Topology, HandOffAmongSixteenWaitersInTwoProcessesWithoutPolling) {
  client c(d().options());
  auto held = c.reentrant(key("lock")).try_acquire();
  ASSERT_TRUE(held);
  const auto before = client_commands();
  std::vector<child_process> workers;
  for (int i = 0; i < 2; ++i) {
    workers.emplace_back(std::vector<std::string>{worker_path(), "handoff", d().worker_target(),
                                                  "reentrant", key("lock"), "8"},
                         captured);
  }
  for (auto& w : workers)
    ASSERT_TRUE(w.wait_for("started"));
  wait_for_listeners(key("lock"), 2);
  held.release();

  std::set<std::string> fences;
  for (auto& w : workers) {
    for (int t = 0; t < 8; ++t) {
      const auto line = w.wait_for("acquired", 60s);
      ASSERT_TRUE(line) << "a waiter never got the lock";
      fences.insert(line->substr(line->rfind(' ') + 1));
    }
    EXPECT_EQ(w.wait_for("done"), "done");
    EXPECT_EQ(w.wait(), 0);
  }
  EXPECT_EQ(fences.size(), 16u);
  const double per_acquisition = static_cast<double>(client_commands() - before) / 16.0;
  std::cout << "[ info ] " << GetParam() << ": " << per_acquisition
            << " client commands per acquisition\n";
  // Without polling and without a herd: each process's first waiter finds the lock held (2
  // attempts; its other threads queue behind it), each of the 17 releases (ours included) wakes
  // at most the two processes' front waiters (34 attempts, 16 of them winning), and each process
  // subscribes and unsubscribes once (4): at most 57 / 16 = 3.56. How many woken waiters lose
  // depends on timing (2.69-3.06 measured; 3.0, the bound before, failed once under load).
  // Every waiter attempting on each release, or polling, costs several more per acquisition.
  EXPECT_LE(per_acquisition, 57.0 / 16);
}

// Ten thousand watchdog leases: every round renews them all, each node's share in one
// pipelined write, so one round trip per node renews hundreds of leases.
TEST_P(Topology, TenThousandWatchdogLeasesRenewedInPipelinedRounds) {
  auto o = d().options();
  // A round's replies must come back within the period (its deadline) and the leases within the
  // lease. While 16 threads take the 10,000 locks, a round waits behind their calls; under a
  // sanitizer on a loaded 2-vCPU machine that took over a second, and a 3 s lease with 1 s
  // rounds lost 187-5,286 leases (ASan, 2026-11-27). What is measured is how many leases a round
  // renews per call, not how tight a lease the client keeps under such a load.
  o.watchdog_lease = 9s;
  o.watchdog_period = 3s;
  client c(o);
  constexpr int count = 10'000;
  constexpr int threads = 16;
  std::vector<lease> leases(count);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = t; i < count; i += threads)
        leases[static_cast<std::size_t>(i)] =
            c.reentrant("many:" + std::to_string(i)).try_acquire();
    });
  }
  for (auto& w : workers)
    w.join();
  ASSERT_TRUE(std::all_of(leases.begin(), leases.end(), [](const lease& l) { return l.held(); }));
  const auto masters = c.masters();
  auto writes = [&] {
    std::uint64_t n = 0;
    for (auto* m : masters)
      n += m->counters().writes;
    return n;
  };
  // Three whole rounds after the last grant, with nothing else on the connections.
  const auto start = c.stats();
  const auto writes_before = writes();
  while (c.stats().leases_renewed < start.leases_renewed + 3 * count)
    std::this_thread::sleep_for(20ms);
  const auto after = c.stats();
  const auto rounds_writes = writes() - writes_before;
  EXPECT_EQ(after.leases_lost, 0u);
  EXPECT_TRUE(std::all_of(leases.begin(), leases.end(), [](const lease& l) { return l.valid(); }));
  const double per_write = static_cast<double>(after.leases_renewed - start.leases_renewed) /
                           static_cast<double>(std::max<std::uint64_t>(1, rounds_writes));
  std::cout << "[ info ] " << GetParam() << ": " << masters.size() << " masters, " << per_write
            << " leases renewed per write (round trip) per node\n";
  EXPECT_GE(per_write, 100.0);
  for (auto& l : leases)
    EXPECT_TRUE(l.release());
  EXPECT_EQ(c.stats().watched_leases, 0u);
}

}  // namespace
}  // namespace dlock::testing
