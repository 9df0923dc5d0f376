// Locks across real processes: mutual exclusion, a holder killed with SIGKILL, a holder paused
// with SIGSTOP past its lease, event-driven hand-off, a clean exit right after a lease is lost,
// interop with the Redisson and SET-NX layouts through redis-cli, and ten thousand watchdog
// leases.
#include <gtest/gtest.h>
#include <signal.h>

#include <set>
#include <sstream>
#include <thread>

#include "child_process.hpp"
#include "dlock/dlock.hpp"
#include "redis_fixture.hpp"

namespace dlock::testing {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

std::string channel_of(const std::string& name) {
  return "redisson_lock__channel:{" + name + "}";
}

/// Waits (bounded) until `n` clients listen on a lock's channel: they are waiting for it.
void wait_for_listeners(raw_redis& raw, const std::string& name, std::int64_t n) {
  const auto limit = steady::now() + 30s;
  while (raw({"PUBSUB", "NUMSUB", channel_of(name)}).at(1).integer() < n) {
    ASSERT_LT(steady::now(), limit) << "waiters never subscribed";
    std::this_thread::sleep_for(2ms);
  }
}

/// Calls of the lock traffic dlock clients send themselves: scripts and (un)subscriptions, what
/// a polling client would multiply. The scripts' inner commands are not counted (commandstats
/// lists them too), nor is the one-off connection handshake (CLIENT SETNAME per connection).
std::int64_t client_commands(raw_redis& raw) {
  std::istringstream info(raw({"INFO", "commandstats"}).str());
  std::int64_t total = 0;
  for (std::string line; std::getline(info, line);) {
    for (const char* name : {"evalsha", "eval", "subscribe", "unsubscribe"}) {
      const std::string prefix = std::string("cmdstat_") + name + ":calls=";
      if (line.rfind(prefix, 0) == 0) total += std::stoll(line.substr(prefix.size()));
    }
  }
  return total;
}

class MultiProcess : public redis_test, public ::testing::WithParamInterface<std::string> {
 protected:
  lease acquire_for(const client& c, const std::string& name, std::chrono::milliseconds wait) {
    if (GetParam() == "simple") return c.simple(name).try_acquire_for(wait);
    return c.reentrant(name).try_acquire_for(wait);
  }
};

INSTANTIATE_TEST_SUITE_P(Kinds, MultiProcess, ::testing::Values("reentrant", "simple"),
                         [](const auto& param_info) { return param_info.param; });

TEST_P(MultiProcess, EightProcessesKeepANonAtomicCounterExact) {
  std::vector<child_process> workers;
  for (int i = 0; i < 8; ++i) {
    workers.emplace_back(std::vector<std::string>{worker_path(), "count", url(), GetParam(),
                                                  key("lock"), key("counter"), "500"},
                         captured);
  }
  for (auto& w : workers) {
    EXPECT_EQ(w.wait_for("done", 300s), "done");
    EXPECT_EQ(w.wait(), 0);
  }
  raw_redis raw(server().port());
  EXPECT_EQ(raw({"GET", key("counter")}).str(), "4000");
  EXPECT_EQ(raw({"EXISTS", key("lock")}).integer(), 0);
}

TEST_P(MultiProcess, AKilledHoldersLockComesBackAfterItsLeaseNotBefore) {
  constexpr auto lease_time = 2000ms;
  child_process holder({worker_path(), "hold", url(), GetParam(), key("lock"),
                        std::to_string(lease_time.count()), "500", key("resource")},
                       captured);
  ASSERT_TRUE(holder.wait_for("acquired"));
  raw_redis raw(server().port());
  const auto asked = steady::now();
  const auto pttl = std::chrono::milliseconds(raw({"PTTL", key("lock")}).integer());
  ASSERT_GT(pttl, 0ms);
  holder.signal(SIGKILL);
  EXPECT_EQ(holder.wait(), 128 + SIGKILL);
  const auto killed = steady::now();

  client c(url());
  auto l = acquire_for(c, key("lock"), 10s);
  const auto acquired = steady::now();
  ASSERT_TRUE(l);
  // The lease outlives its holder: nobody gets the lock before it runs out...
  EXPECT_GE(acquired - asked, pttl - 5ms);
  // ...and the waiter, woken by the lease's end rather than by polling, gets it soon after.
  EXPECT_LE(acquired - killed, lease_time + 1s);
}

TEST_P(MultiProcess, APausedHolderLearnsItLostTheLeaseAndItsStaleWriteIsRejected) {
  child_process holder(
      {worker_path(), "hold", url(), GetParam(), key("lock"), "1000", "250", key("resource")},
      captured);
  const auto acquired = holder.wait_for("acquired ");
  ASSERT_TRUE(acquired);
  const auto old_fence = std::stoull(acquired->substr(9));
  ASSERT_EQ(holder.wait_for("wrote"), "wrote 1");
  holder.signal(SIGSTOP);  // paused mid-work, as by a long GC or a VM migration

  client c(url());
  auto l = acquire_for(c, key("lock"), 20s);
  ASSERT_TRUE(l) << "the paused holder's lease should have run out";
  EXPECT_GT(l.fence(), old_fence);
  EXPECT_TRUE(fenced_set(c, key("resource"), "second holder", l.fence()).written);

  holder.signal(SIGCONT);
  const auto lost = holder.wait_for("lost");
  ASSERT_TRUE(lost);
  EXPECT_NE(lost->find("callback=1 valid=0"), std::string::npos) << *lost;
  EXPECT_EQ(holder.wait_for("fenced"), "fenced written=0 highest=" + std::to_string(l.fence()));
  EXPECT_EQ(holder.wait(), 0);
  raw_redis raw(server().port());
  EXPECT_EQ(raw({"GET", key("resource")}).str(), "second holder");
  EXPECT_TRUE(l.valid()) << "the new holder was not disturbed";
}

// The same pause, but the holder writes the data on the lock's server with write_while_held,
// every 2 ms: once another client has taken the lock, none of its writes lands, whether its own
// expiry watch or the server's check refuses it first after it resumes.
TEST_P(MultiProcess, APausedHoldersWritesUnderItsLeaseNeverLandOnceAnotherTookTheLock) {
  child_process holder(
      {worker_path(), "write-held", url(), GetParam(), key("lock"), "1000", "250", key("resource")},
      captured);
  ASSERT_TRUE(holder.wait_for("writing"));
  holder.signal(SIGSTOP);

  client c(url());
  auto l = acquire_for(c, key("lock"), 20s);
  ASSERT_TRUE(l) << "the paused holder's lease should have run out";
  const auto written = l.write_while_held({{"SET", key("resource"), "second holder"}});
  ASSERT_EQ(written.size(), 1u);
  EXPECT_TRUE(written[0].is_string() && written[0].str() == "OK") << written[0].to_string();

  holder.signal(SIGCONT);
  const auto refused = holder.wait_for("refused");
  ASSERT_TRUE(refused);
  EXPECT_NE(refused->find("valid=0"), std::string::npos) << *refused;
  EXPECT_EQ(holder.wait(), 0);
  raw_redis raw(server().port());
  EXPECT_EQ(raw({"GET", key("resource")}).str(), "second holder");
  EXPECT_TRUE(l.valid()) << "the new holder was not disturbed";
}

// 8 waiters in each of two processes queue for a lock; when it is released each gets it in
// turn and releases at once. The waiters sleep until they are told: across the whole run the
// clients send at most 57 / 16 = 3.56 commands per acquisition (the count is worked out in
// topology_test.cpp's twin of this test; a polling client sends hundreds).
TEST_P(MultiProcess, HandOffAmongSixteenWaitersInTwoProcessesWithoutPolling) {
  client c(url());
  auto held = acquire_for(c, key("lock"), 0ms);
  ASSERT_TRUE(held);
  raw_redis raw(server().port());
  const auto before = client_commands(raw);
  std::vector<child_process> workers;
  for (int i = 0; i < 2; ++i) {
    workers.emplace_back(
        std::vector<std::string>{worker_path(), "handoff", url(), GetParam(), key("lock"), "8"},
        captured);
  }
  for (auto& w : workers)
    ASSERT_TRUE(w.wait_for("started"));
  wait_for_listeners(raw, key("lock"), 2);
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
  EXPECT_EQ(fences.size(), 16u) << "every grant has its own fencing token";
  const double per_acquisition = static_cast<double>(client_commands(raw) - before) / 16.0;
  std::cout << "[ info ] " << per_acquisition << " client commands per acquisition\n";
  EXPECT_LE(per_acquisition, 57.0 / 16);
}

// A lost lease wakes its holder, which closes its client and returns from main while the I/O
// thread may still be finishing the loss. Closing the client must join that thread all the
// same: when a handler there kept the client open, the teardown finished on a thread of its own
// that raced exit's cleanups, and one `dlock run` in 40-100 died of SIGSEGV after main returned
// (exit 139 instead of 76). The worker draws the loss out and checks it is alone once closed.
class ExitAfterLoss : public redis_test {};

TEST_F(ExitAfterLoss, ClosingTheClientJoinsItsIOThreadEvenWhileALossIsBeingHandled) {
  for (int i = 0; i < 10; ++i) {
    child_process p({worker_path(), "lose-and-exit", url(), key("lock"), "20"}, captured);
    ASSERT_TRUE(p.wait_for("acquired")) << p.drain();
    const int status = p.wait(30s);
    ASSERT_EQ(status, 0) << "process " << i << ": exit status " << status << "; output:\n"
                         << p.drain();
  }
}

// ---- interop through redis-cli ----

// Redisson's RLock protocol, written out here to act as a foreign client: acquire when the hash
// is absent or already ours (count + 1, lease), else answer the PTTL; release by count - 1, and at
// zero delete and publish "0" on redisson_lock__channel:{NAME}.
constexpr const char* redisson_style_acquire = R"(
local mine = redis.call('exists', KEYS[1]) == 1 and redis.call('hexists', KEYS[1], ARGV[2]) == 1
if redis.call('exists', KEYS[1]) == 0 or mine then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1]))";

constexpr const char* redisson_style_release = R"(
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 0
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[1])
return 1)";

class Interop : public redis_test {
 protected:
  /// Runs redis-cli against the test server and returns its one line of output.
  std::string cli(std::vector<std::string> args) {
    args.insert(args.begin(),
                {embedded::default_programs().cli, "-p", std::to_string(server().port())});
    child_process p(args, captured);
    auto line = p.read_line(30s);
    EXPECT_EQ(p.wait(), 0);
    return line.value_or("<no output>");
  }
  std::string foreign_acquire(const std::string& name, const std::string& owner) {
    return cli({"EVAL", redisson_style_acquire, "1", name, "30000", owner});
  }
};

TEST_F(Interop, DlocksReentrantLockAndARedissonClientExcludeEachOther) {
  client c(url());
  auto mine = c.reentrant(key("a")).try_acquire();
  ASSERT_TRUE(mine);
  const auto refused = foreign_acquire(key("a"), "redisson-uuid:1");
  EXPECT_GT(std::stoll(refused), 0) << "a Redisson acquire answers the holder's PTTL";
  mine.release();
  EXPECT_EQ(foreign_acquire(key("a"), "redisson-uuid:1"), "") << "nil: granted once free";
  EXPECT_FALSE(c.reentrant(key("a")).try_acquire());
  EXPECT_EQ(c.reentrant(key("a")).holder()->owner, "redisson-uuid:1");
}

TEST_F(Interop, ARedissonUnlockMessageWakesAWaitingDlockAtOnce) {
  auto o = client_options::from_url(url());
  o.max_recheck = 60s;  // so only the message can wake the waiter in time
  client c(o);
  ASSERT_EQ(foreign_acquire(key("a"), "redisson-uuid:7"), "");
  auto waiting = c.reentrant(key("a")).acquire_future(50s);
  raw_redis raw(server().port());
  wait_for_listeners(raw, key("a"), 1);
  const auto released = steady::now();
  EXPECT_EQ(cli({"EVAL", redisson_style_release, "2", key("a"), channel_of(key("a")), "0", "30000",
                 "redisson-uuid:7"}),
            "1");
  ASSERT_EQ(waiting.wait_for(20s), std::future_status::ready)
      << "the holder's lease (30 s) and the recheck (60 s) are far away: the message must wake it";
  auto l = waiting.get();
  EXPECT_TRUE(l);
  std::cout
      << "[ info ] woken "
      << std::chrono::duration_cast<std::chrono::microseconds>(steady::now() - released).count()
      << " us after the foreign release\n";
}

TEST_F(Interop, DlocksSimpleLockAndSetNxClientsExcludeEachOther) {
  client c(url());
  auto mine = c.simple(key("s")).try_acquire();
  ASSERT_TRUE(mine);
  EXPECT_EQ(cli({"SET", key("s"), "other", "NX", "PX", "10000"}), "") << "nil: refused";
  EXPECT_FALSE(c.reentrant(key("s")).try_acquire()) << "and dlock's other kind is refused too";
  mine.release();
  EXPECT_EQ(cli({"SET", key("s"), "node-redlock-token", "NX", "PX", "10000"}), "OK");
  EXPECT_FALSE(c.simple(key("s")).try_acquire());
  EXPECT_EQ(c.simple(key("s")).holder()->owner, "node-redlock-token");
}

// ---- many leases ----

TEST(ManyLeases, TenThousandWatchdogLeasesRenewedInBatches) {
  embedded::redis_server server;
  auto o = client_options::from_url(server.url());
  // Leases and rounds long enough for a sanitizer on a loaded machine: the reason is with the
  // same test over every topology (topology_test.cpp).
  o.watchdog_lease = 9s;
  o.watchdog_period = 3s;
  client c(o);
  constexpr int count = 10'000;
  constexpr int threads = 16;
  std::vector<lease> leases(count);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = t; i < count; i += threads) {
        leases[static_cast<std::size_t>(i)] =
            c.reentrant("many:" + std::to_string(i)).try_acquire();
      }
    });
  }
  for (auto& w : workers)
    w.join();
  ASSERT_TRUE(std::all_of(leases.begin(), leases.end(), [](const lease& l) { return l.held(); }));
  EXPECT_EQ(c.stats().watched_leases, static_cast<std::uint64_t>(count));

  // Wait for three whole renewal rounds to complete after the last grant.
  const auto start = c.stats();
  while (c.stats().leases_renewed < start.leases_renewed + 3 * count) {
    std::this_thread::sleep_for(20ms);
  }
  const auto after = c.stats();
  EXPECT_EQ(after.leases_lost, 0u);
  EXPECT_TRUE(std::all_of(leases.begin(), leases.end(), [](const lease& l) { return l.valid(); }));
  const double per_call = static_cast<double>(after.leases_renewed - start.leases_renewed) /
                          static_cast<double>(after.renewal_calls - start.renewal_calls);
  std::cout << "[ info ] " << per_call << " leases per renewal call\n";
  EXPECT_GE(per_call, 100.0);

  raw_redis raw(server.port());
  const script count_existing(
      "local n = 0 for _, k in ipairs(KEYS) do n = n + redis.call('exists', k) end return n");
  std::vector<std::string> names;
  for (int i = 0; i < count; ++i)
    names.push_back("many:" + std::to_string(i));
  std::vector<std::string_view> views(names.begin(), names.end());
  EXPECT_EQ(c.redis().eval(count_existing, views, {}).integer(), count);

  for (auto& l : leases)
    EXPECT_TRUE(l.release());
  EXPECT_EQ(c.stats().watched_leases, 0u);
  EXPECT_EQ(c.redis().eval(count_existing, views, {}).integer(), 0);
}

}  // namespace
}  // namespace dlock::testing
