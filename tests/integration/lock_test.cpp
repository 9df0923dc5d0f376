// Locks within one process against a real redis-server: grants and releases, reentrancy,
// ownership, fencing, lost leases, waiting, the watchdog, and the std Lockable shape.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "dlock/dlock.hpp"
#include "dlock_lua_scripts.hpp"
#include "polling.hpp"
#include "redis_fixture.hpp"

namespace dlock::testing {
namespace {

using namespace std::chrono_literals;

// The std requirements, checked at compile time.
template <class L>
concept basic_lockable = requires(L l) {
  l.lock();
  l.unlock();
  { l.unlock() }
  noexcept;
};
template <class L>
concept lockable = basic_lockable<L> && requires(L l) {
  { l.try_lock() } -> std::same_as<bool>;
};
template <class L>
concept timed_lockable = lockable<L> && requires(L l) {
  { l.try_lock_for(std::chrono::milliseconds(1)) } -> std::same_as<bool>;
  { l.try_lock_until(std::chrono::steady_clock::now()) } -> std::same_as<bool>;
  { l.try_lock_until(std::chrono::system_clock::now()) } -> std::same_as<bool>;
};
static_assert(timed_lockable<reentrant_lock>);
static_assert(timed_lockable<simple_lock>);
static_assert(!std::is_copy_constructible_v<lease> && std::is_nothrow_move_constructible_v<lease>);
static_assert(std::is_nothrow_destructible_v<lease>);

/// Waits (bounded) for a flag set from another thread.
class signal {
 public:
  void set() {
    std::lock_guard lock(mutex_);
    set_ = true;
    cv_.notify_all();
  }
  bool wait(std::chrono::milliseconds limit = 20s) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, limit, [&] { return set_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool set_ = false;
};

class Locks : public redis_test {
 protected:
  client make_client(std::chrono::milliseconds watchdog = 30s) {
    auto o = client_options::from_url(url());
    o.watchdog_lease = watchdog;
    return client(o);
  }
};

TEST_F(Locks, SimpleLockUsesTheSetNxLayoutWithARandomToken) {
  auto c = make_client();
  auto lock = c.simple(key("job"));
  auto first = lock.try_acquire({.lease_time = 10s});
  ASSERT_TRUE(first);
  raw_redis raw(server().port());
  const auto token = raw({"GET", key("job")}).str();
  EXPECT_EQ(token.size(), 32u) << "128 random bits in hex";
  const auto ttl = raw({"PTTL", key("job")}).integer();
  EXPECT_GT(ttl, 9000);
  EXPECT_LE(ttl, 10000);
  // Every token is at least the server's clock in microseconds at its grant (so it stays above
  // whatever an earlier counter of this name handed out before a restart or flush).
  const auto first_fence = first.fence();
  EXPECT_GT(first_fence, 1'600'000'000'000'000u);
  EXPECT_FALSE(lock.try_acquire()) << "not reentrant: a second grant is refused";
  EXPECT_TRUE(first.release());
  EXPECT_FALSE(first.release()) << "idempotent";
  EXPECT_TRUE(raw({"GET", key("job")}).is_nil());
  auto second = lock.try_acquire();
  ASSERT_TRUE(second);
  EXPECT_NE(raw({"GET", key("job")}).str(), token) << "every grant has a fresh token";
  EXPECT_GT(second.fence(), first_fence);
}

TEST_F(Locks, ReentrantLockUsesRedissonsHashLayout) {
  auto c = make_client();
  auto lock = c.reentrant(key("res"));
  auto a = lock.try_acquire();
  ASSERT_TRUE(a);
  raw_redis raw(server().port());
  const auto fields = raw({"HGETALL", key("res")});
  ASSERT_EQ(fields.elements().size(), 2u);
  EXPECT_EQ(fields.at(0).str().rfind(c.id() + ":", 0), 0u) << fields.at(0).str();
  EXPECT_EQ(fields.at(1).str(), "1");
  // The watchdog's default lease of 30 s.
  EXPECT_GT(raw({"PTTL", key("res")}).integer(), 29000);
  EXPECT_EQ(raw({"GET", "redisson_lock_token:{" + key("res") + "}"}).str(),
            std::to_string(a.fence()));
}

TEST_F(Locks, ReentrancyThreeDeepReleasedThreeTimes) {
  auto c = make_client();
  auto lock = c.reentrant(key("r"));
  auto h1 = lock.try_acquire();
  auto h2 = lock.try_acquire();
  auto h3 = lock.try_acquire_for(1s);
  ASSERT_TRUE(h1 && h2 && h3);
  EXPECT_EQ(lock.hold_count(), 3);
  EXPECT_EQ(h1.fence(), h3.fence()) << "re-entries share the hold's fencing token";
  raw_redis raw(server().port());
  raw({"SUBSCRIBE", "redisson_lock__channel:{" + key("r") + "}"});  // this connection now listens
  EXPECT_TRUE(h3.release());
  EXPECT_EQ(lock.hold_count(), 2);
  EXPECT_TRUE(h2.release());
  EXPECT_EQ(lock.hold_count(), 1);
  EXPECT_TRUE(lock.is_locked());
  EXPECT_TRUE(h1.release());
  EXPECT_FALSE(lock.is_locked());
  // The last release published Redisson's unlock message "0" on the lock's channel.
  const auto message = raw({"PING"});  // the next frame on a subscribed connection
  ASSERT_TRUE(message.is_array()) << message.to_string();
  EXPECT_EQ(message.at(0).str(), "message");
  EXPECT_EQ(message.at(2).str(), "0");
}

TEST_F(Locks, AReleaseByANonOwnerIsRefusedAndChangesNothing) {
  auto holder = make_client();
  auto other = make_client();
  auto held = holder.reentrant(key("r")).try_acquire();
  ASSERT_TRUE(held);
  raw_redis raw(server().port());
  const auto before = raw({"HGETALL", key("r")});
  const auto ttl_before = raw({"PTTL", key("r")}).integer();
  // Another client, and another thread of the same client, may not release it.
  auto foreign = other.reentrant(key("r"));
  // Holds nothing: a no-op, counted as a failure, never a throw.
  [&]() DLOCK_NO_THREAD_SAFETY_ANALYSIS { foreign.unlock(); }();
  EXPECT_EQ(other.stats().release_failures, 1u);
  // The release script itself refuses an owner field that does not hold the lock.
  const script release{std::string(lua::reentrant_release)};
  const std::string channel = "redisson_lock__channel:{" + key("r") + "}";
  EXPECT_TRUE(other.redis()
                  .eval(release, {key("r"), channel}, {"30000", other.id() + ":1", "0", "publish"})
                  .is_nil());
  std::thread([&] {
    auto stranger = holder.reentrant(key("r"));
    EXPECT_FALSE(stranger.try_acquire()) << "another thread is another owner";
    EXPECT_FALSE(stranger.held_by_current_thread());
  }).join();
  EXPECT_EQ(raw({"HGETALL", key("r")}), before);
  EXPECT_LE(raw({"PTTL", key("r")}).integer(), ttl_before);
  // A simple lock compares the token: a wrong one deletes nothing.
  auto s_held = holder.simple(key("s")).try_acquire();
  ASSERT_TRUE(s_held);
  const script simple_release{std::string(lua::simple_release)};
  EXPECT_TRUE(other.redis()
                  .eval(simple_release, {key("s"), "redisson_lock__channel:{" + key("s") + "}"},
                        {"not-the-token", "0", "publish"})
                  .is_nil());
  EXPECT_TRUE(holder.simple(key("s")).is_locked());
  EXPECT_TRUE(s_held.release());
}

TEST_F(Locks, ABusyAttemptAnswersWithTheHoldersRemainingLeaseAndChangesNothing) {
  // The acquire scripts sent by hand for a second owner while a first holds the lock: the answer
  // carries the holder's PTTL (what a waiter sleeps on), -1 for a holder without an expiry, and
  // the holder's key is left as it was.
  auto c = make_client();
  raw_redis raw(server().port());
  const script simple{std::string(lua::simple_acquire)};
  const script reentrant{std::string(lua::reentrant_acquire)};
  const script multi{std::string(lua::multi_acquire)};
  const auto s_name = key("busy-s"), r_name = key("busy-r");
  const auto s_keys = keys_of_lock(s_name), r_keys = keys_of_lock(r_name);
  ASSERT_EQ(
      c.redis().eval(simple, {s_name, s_keys.fence_counter}, {"holder", "30000"}).at(0).integer(),
      1);
  ASSERT_EQ(c.redis()
                .eval(reentrant, {r_name, r_keys.fence_counter}, {"30000", "holder:1"})
                .at(0)
                .integer(),
            1);
  const auto s_before = raw({"GET", s_name}).str();
  const auto r_before = raw({"HGETALL", r_name});
  for (const bool with_expiry : {true, false}) {
    SCOPED_TRACE(with_expiry ? "with an expiry" : "without an expiry");
    if (!with_expiry) {
      raw({"PERSIST", s_name});
      raw({"PERSIST", r_name});
    }
    const auto remaining = [&](const reply& pttl) {
      if (!with_expiry) {
        EXPECT_EQ(pttl.integer(), -1);
      } else {
        EXPECT_GT(pttl.integer(), 0);
        EXPECT_LE(pttl.integer(), 30000);
      }
    };
    const auto s_busy = c.redis().eval(simple, {s_name, s_keys.fence_counter}, {"other", "10000"});
    ASSERT_EQ(s_busy.at(0).integer(), 0) << s_busy.to_string();
    remaining(s_busy.at(1));
    const auto r_busy =
        c.redis().eval(reentrant, {r_name, r_keys.fence_counter}, {"10000", "other:1"});
    ASSERT_EQ(r_busy.at(0).integer(), 0) << r_busy.to_string();
    remaining(r_busy.at(1));
    // The multi-lock names which of its names is held: the second here.
    const auto m_busy =
        c.redis().eval(multi,
                       {key("busy-free"), keys_of_lock(key("busy-free")).fence_counter, r_name,
                        r_keys.fence_counter},
                       {"10000", "other:1"});
    ASSERT_EQ(m_busy.at(0).integer(), 0) << m_busy.to_string();
    EXPECT_EQ(m_busy.at(1).integer(), 2);
    remaining(m_busy.at(2));
    EXPECT_EQ(raw({"EXISTS", key("busy-free")}).integer(), 0) << "all or nothing";
    EXPECT_EQ(raw({"GET", s_name}).str(), s_before);
    EXPECT_EQ(raw({"HGETALL", r_name}), r_before);
  }
  raw({"DEL", s_name, r_name});
}

TEST_F(Locks, ExplicitOwnerIdsMoveALeaseBetweenThreads) {
  auto c = make_client();
  auto lock = c.reentrant(key("r"));
  lease taken;
  std::thread([&] { taken = lock.try_acquire({.owner = "order-42"}); }).join();
  ASSERT_TRUE(taken);
  EXPECT_EQ(lock.hold_count("order-42"), 1);
  // The same owner id re-enters from any thread.
  std::thread([&] {
    auto again = lock.try_acquire({.owner = "order-42"});
    EXPECT_TRUE(again);
    EXPECT_EQ(lock.hold_count("order-42"), 2);
  }).join();
  EXPECT_EQ(lock.hold_count("order-42"), 1);
  std::thread([&] { EXPECT_TRUE(taken.release()); }).join();
  EXPECT_FALSE(lock.is_locked());
  EXPECT_THROW(c.simple(key("s")).try_acquire({.owner = "x"}), error);
}

TEST_F(Locks, BadArgumentsAreTypedErrorsAndChangeNothing) {
  auto c = make_client();
  EXPECT_THROW(c.reentrant(""), error);
  auto lock = c.simple(key("s"));
  try {
    lock.try_acquire({.lease_time = 0ms});
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
  }
  EXPECT_THROW(lock.try_acquire({.lease_time = -5s}), error);
  EXPECT_FALSE(lock.is_locked());
  auto held = lock.try_acquire();
  ASSERT_TRUE(held);
  EXPECT_THROW(held.extend(0ms), error);
  EXPECT_TRUE(lock.is_locked());
  EXPECT_THROW(client_options{}.connection.from_url("nonsense"), error);
  auto bad = client_options::from_url(url());
  bad.watchdog_period = 40s;
  EXPECT_THROW(client{bad}, error);
  // A name that holds some other kind of data is reported (not taken for a held lock), and not
  // clobbered.
  raw_redis raw(server().port());
  raw({"RPUSH", key("list"), "x"});
  for (auto* acquire :
       {+[](client&cl, const std::string&n) { return cl.simple(n).try_acquire(); },
        +[](client&cl, const std::string&n) { return cl.reentrant(n).try_acquire(); }}) {
    try {
      acquire(c, key("list"));
      ADD_FAILURE() << "a list was taken for a lock";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::wrong_type);
      EXPECT_NE(std::string(e.what()).find("holds a list, not a lock"), std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(raw({"LLEN", key("list")}).integer(), 1);
}

TEST_F(Locks, AWaiterGetsTheLockWhenItIsReleased) {
  auto c = make_client();
  auto other = make_client();
  auto held = c.reentrant(key("r")).try_acquire();
  ASSERT_TRUE(held);
  auto waiting =
      std::async(std::launch::async, [&] { return other.reentrant(key("r")).acquire(); });
  // The waiter subscribes before it sleeps; once it listens, release.
  while (c.reentrant(key("r")).waiting_clients() == 0)
    std::this_thread::sleep_for(1ms);
  const auto first_fence = held.fence();
  held.release();
  auto got = waiting.get();
  EXPECT_TRUE(got);
  EXPECT_GT(got.fence(), first_fence);
  // Woken by an event, not a re-check timer: by the unlock message, or by the attempt its
  // subscription's confirmation makes, when the release came between the server's taking the
  // subscription and the client's reading the confirmation. Then the grant (on a command
  // connection) can be read before the message (on the subscription's), and a reentrant
  // waiter's queue, empty once granted, unsubscribes at once: the message is dropped unread.
  // That attempt is its second (the first was the direct one), the message path's its third.
  wait_until([&] {
    const auto s = other.stats();
    return s.unlock_messages >= 1 || s.attempts == 2;
  });
}

TEST_F(Locks, TryAcquireForEndsAtItsDeadline) {
  auto c = make_client();
  auto held = c.simple(key("s")).try_acquire();
  ASSERT_TRUE(held);
  auto other = make_client();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(other.simple(key("s")).try_acquire_for(300ms));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 300ms);
  EXPECT_FALSE(other.simple(key("s")).try_acquire_for(-1s)) << "negative wait: one attempt";
  EXPECT_FALSE(other.simple(key("s")).try_acquire_until(std::chrono::steady_clock::now() - 1h));
}

// Local waiters of one client whose deadlines pass in the same instant leave the queue together:
// each timer ends its waiter and wakes the next one, which is ending too. An earlier design woke
// that next waiter through a reference into the queue the wake-up had just erased.
TEST_F(Locks, ManyLocalWaitersWhoseDeadlinesPassTogetherAllTimeOut) {
  auto holder = make_client();
  auto held = holder.simple(key("s")).try_acquire();
  ASSERT_TRUE(held);
  auto c = make_client();
  constexpr int waiters = 16;
  const auto deadline = std::chrono::steady_clock::now() + 300ms;
  std::vector<std::future<bool>> results;
  for (int i = 0; i < waiters; ++i) {
    results.push_back(std::async(std::launch::async, [&] {
      return static_cast<bool>(c.simple(key("s")).try_acquire_until(deadline));
    }));
  }
  for (auto& r : results)
    EXPECT_FALSE(r.get());
  // The queue is empty and consistent: the next waiter of this client gets the lock once it is
  // released.
  auto next =
      std::async(std::launch::async, [&] { return c.simple(key("s")).try_acquire_for(10s); });
  EXPECT_TRUE(held.release());
  EXPECT_TRUE(next.get());
}

TEST_F(Locks, DeadlineHoldsWhenTheServerStopsAnswering) {
  auto o = client_options::from_url(url());
  o.connection.command_timeout = 30s;
  client c(o);
  server().pause();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(c.simple(key("s")).try_acquire_for(400ms));
  const auto took = std::chrono::steady_clock::now() - start;
  server().resume();
  EXPECT_LT(took, 10s) << "bounded by the call's deadline, not the 30 s command timeout";
  // The attempt that timed out may have been granted after all; it is undone, so the lock is
  // free for others.
  auto other = make_client();
  EXPECT_TRUE(other.simple(key("s")).try_acquire_for(5s));
}

TEST_F(Locks, FixedLeaseExpiresAndIsReportedLost) {
  auto c = make_client();
  std::atomic<int> reason{-1};
  auto l = c.simple(key("s")).try_acquire(
      {.lease_time = 200ms, .on_lost = [&](lease_lost_reason r) { reason = static_cast<int>(r); }});
  ASSERT_TRUE(l);
  EXPECT_FALSE(l.watchdog());
  auto token = l.stop_token();
  EXPECT_FALSE(token.stop_requested());
  signal stopped;
  std::stop_callback on_stop(token, [&] { stopped.set(); });
  ASSERT_TRUE(stopped.wait());
  // The callback runs before the stop token is signalled.
  EXPECT_EQ(reason.load(), static_cast<int>(lease_lost_reason::expired));
  EXPECT_FALSE(l.valid());
  EXPECT_EQ(l.lost_reason(), lease_lost_reason::expired);
  EXPECT_FALSE(l.release()) << "nothing left to release";
}

TEST_F(Locks, ExtendPushesAFixedLeaseOut) {
  auto c = make_client();
  auto l = c.simple(key("s")).try_acquire({.lease_time = 1s});
  ASSERT_TRUE(l);
  EXPECT_TRUE(l.extend(20s));
  raw_redis raw(server().port());
  EXPECT_GT(raw({"PTTL", key("s")}).integer(), 19000);
  EXPECT_GT(l.valid_until(), std::chrono::steady_clock::now() + 19s);
  raw({"DEL", key("s")});
  EXPECT_FALSE(l.extend(20s)) << "no longer held";
  EXPECT_EQ(l.lost_reason(), lease_lost_reason::not_held);
  EXPECT_THROW(l.extend(1s), error);
}

TEST_F(Locks, ForceUnlockIsNoticedByTheWatchdogAndWakesWaiters) {
  auto o = client_options::from_url(url());
  o.watchdog_lease = 3s;
  o.watchdog_period = 100ms;
  client c(o);
  signal lost;
  auto l = c.reentrant(key("r")).try_acquire({.on_lost = [&](lease_lost_reason r) {
    if (r == lease_lost_reason::not_held) lost.set();
  }});
  ASSERT_TRUE(l);
  auto admin = make_client();
  const auto removed = admin.reentrant(key("r")).force_unlock();
  EXPECT_EQ(removed.type, lock_type::reentrant);
  ASSERT_EQ(removed.holders.size(), 1u);
  EXPECT_EQ(removed.holders[0].owner.rfind(c.id(), 0), 0u);
  EXPECT_EQ(removed.fence, l.fence());
  EXPECT_EQ(admin.reentrant(key("r")).force_unlock().type, lock_type::none);
  ASSERT_TRUE(lost.wait());
  EXPECT_FALSE(l.valid());
  signal stopped;  // the stop token follows the callback
  std::stop_callback on_stop(l.stop_token(), [&] { stopped.set(); });
  EXPECT_TRUE(stopped.wait());
}

TEST_F(Locks, WatchdogKeepsALeaseAliveBeyondItsTime) {
  auto o = client_options::from_url(url());
  o.watchdog_lease = 600ms;
  o.watchdog_period = 100ms;
  client c(o);
  auto l = c.reentrant(key("r")).try_acquire();
  ASSERT_TRUE(l);
  EXPECT_TRUE(l.watchdog());
  // Wait for several renewal rounds to have happened, not for wall time.
  while (c.stats().leases_renewed < 8)
    std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(l.valid());
  raw_redis raw(server().port());
  EXPECT_EQ(raw({"EXISTS", key("r")}).integer(), 1);
  EXPECT_TRUE(l.release());
  const auto renewed = c.stats().leases_renewed;
  EXPECT_EQ(c.stats().watched_leases, 0u) << "release stops renewal at once";
  EXPECT_EQ(raw({"EXISTS", key("r")}).integer(), 0);
  EXPECT_LE(c.stats().leases_renewed, renewed + 1);
}

TEST_F(Locks, WatchdogLosesTheLeaseWhenTheServerIsGoneTooLong) {
  auto o = client_options::from_url(url());
  o.watchdog_lease = 500ms;
  o.watchdog_period = 100ms;
  o.connection.command_timeout = 200ms;
  client c(o);
  signal lost;
  auto l = c.reentrant(key("r")).try_acquire({.on_lost = [&](lease_lost_reason r) {
    if (r == lease_lost_reason::expired) lost.set();
  }});
  ASSERT_TRUE(l);
  server().pause();
  const bool noticed = lost.wait();
  server().resume();
  EXPECT_TRUE(noticed);
  EXPECT_FALSE(l.valid());
  signal stopped;  // the stop token follows the callback
  std::stop_callback on_stop(l.stop_token(), [&] { stopped.set(); });
  EXPECT_TRUE(stopped.wait());
}

TEST_F(Locks, FencedWritesRejectAStaleHolder) {
  auto c = make_client();
  auto lock = c.simple(key("s"));
  auto old_holder = lock.try_acquire({.lease_time = 5s});
  ASSERT_TRUE(old_holder);
  EXPECT_TRUE(fenced_set(c, key("data"), "v1", old_holder.fence()).written);
  lock.force_unlock();
  auto new_holder = lock.try_acquire();
  ASSERT_TRUE(new_holder);
  EXPECT_GT(new_holder.fence(), old_holder.fence());
  EXPECT_TRUE(fenced_set(c, key("data"), "v2", new_holder.fence()).written);
  const auto stale = fenced_set(c, key("data"), "stale", old_holder.fence());
  EXPECT_FALSE(stale.written);
  EXPECT_EQ(stale.highest, new_holder.fence());
  EXPECT_EQ(c.redis().command({"GET", key("data")}).str(), "v2");
  EXPECT_TRUE(fenced_set(c, key("data"), "v3", new_holder.fence()).written) << "same token again";
}

TEST_F(Locks, IntrospectionReportsHolderTtlFenceAndWaiters) {
  auto c = make_client();
  auto lock = c.reentrant(key("r"));
  EXPECT_FALSE(lock.is_locked());
  EXPECT_FALSE(lock.holder());
  EXPECT_FALSE(lock.remaining_ttl());
  EXPECT_EQ(lock.fence(), 0u);
  auto l = lock.try_acquire({.lease_time = 10s});
  auto again = lock.try_acquire();
  ASSERT_TRUE(l && again);
  const auto h = lock.holder();
  ASSERT_TRUE(h);
  EXPECT_EQ(h->holds, 2);
  EXPECT_TRUE(lock.held_by_current_thread());
  EXPECT_GT(*lock.remaining_ttl(), 1s);
  EXPECT_EQ(lock.fence(), l.fence());
  EXPECT_EQ(lock.waiting_clients(), 0);
  auto simple = c.simple(key("s"));
  auto s = simple.try_acquire();
  EXPECT_EQ(simple.holder()->holds, 1);
  const auto info = simple.info();
  EXPECT_EQ(info.type, lock_type::simple);
  ASSERT_EQ(info.holders.size(), 1u);
  EXPECT_EQ(info.holders[0].owner.size(), 32u);
  EXPECT_EQ(info.fence, s.fence());
  EXPECT_EQ(c.simple(key("free")).info().type, lock_type::none);
  // Force-unlocking a name that is not a lock deletes nothing.
  c.redis().command({"RPUSH", key("list"), "x"});
  EXPECT_THROW(c.simple(key("list")).force_unlock(), error);
  EXPECT_EQ(c.redis().command({"LLEN", key("list")}).integer(), 1);
  EXPECT_EQ(c.simple(key("list")).info().type, lock_type::other);
}

TEST_F(Locks, InfoTellsTheKindOfLockFromTheKeysWhicheverLockAsks) {
  auto c = make_client();
  const auto kind_of = [&](const std::string& name) { return c.reentrant(name).info().kind; };
  EXPECT_EQ(kind_of(key("free")), lock_type::none);
  auto reentrant = c.reentrant(key("r")).try_acquire();
  EXPECT_EQ(kind_of(key("r")), lock_type::reentrant);
  auto simple = c.simple(key("s")).try_acquire();
  EXPECT_EQ(kind_of(key("s")), lock_type::simple);
  auto read = c.read_write(key("rw")).read().try_acquire();
  const auto rw = c.simple(key("rw")).info();
  EXPECT_EQ(rw.type, lock_type::reentrant) << "its hash, read alone";
  EXPECT_EQ(rw.kind, lock_type::read_write);
  // A fair lock shares the reentrant lock's hash; its queue tells it apart once someone waits.
  auto fair = c.fair(key("f")).try_acquire();
  ASSERT_TRUE(reentrant && simple && read && fair);
  EXPECT_EQ(kind_of(key("f")), lock_type::reentrant);
  auto other = make_client();
  auto waiting = other.fair(key("f")).acquire_future(30s);
  wait_until([&] { return c.fair(key("f")).queue().size() == 1; });
  const auto queued = c.reentrant(key("f")).info();
  EXPECT_EQ(queued.type, lock_type::reentrant);
  EXPECT_EQ(queued.kind, lock_type::fair);
  EXPECT_EQ(c.fair(key("f")).info().kind, lock_type::fair);
  fair.release();
  ASSERT_EQ(waiting.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(waiting.get());
  // Free between two holders: only the queue is left to say what it is.
  c.redis().command({"RPUSH", derived_key("redisson_lock_queue", key("q")), "someone:1"});
  const auto between = c.reentrant(key("q")).info();
  EXPECT_EQ(between.type, lock_type::none);
  EXPECT_EQ(between.kind, lock_type::fair);
  c.redis().command({"RPUSH", key("list"), "x"});
  EXPECT_EQ(kind_of(key("list")), lock_type::other);
  // What a force-unlock removed says it too.
  EXPECT_EQ(c.reentrant(key("rw")).force_unlock().kind, lock_type::read_write);
}

TEST_F(Locks, StdScopedLockOverTwoDlockLocksAndAStdMutex) {
  auto c = make_client();
  auto a = c.reentrant(key("a"));
  auto b = c.simple(key("b"));
  std::mutex local;
  {
    std::scoped_lock all(a, b, local);
    EXPECT_TRUE(a.is_locked());
    EXPECT_TRUE(b.is_locked());
    EXPECT_EQ(a.local_holds(), 1u);
  }
  EXPECT_FALSE(a.is_locked());
  EXPECT_FALSE(b.is_locked());
  {
    std::unique_lock guard(a, std::defer_lock);
    EXPECT_TRUE(guard.try_lock_for(1s));
    std::lock(b, local);  // std::lock's try-and-back-off protocol
    // std::lock carries no thread-safety annotation, so the analysis cannot see b held.
    [&]() DLOCK_NO_THREAD_SAFETY_ANALYSIS { b.unlock(); }();
    local.unlock();
  }
  EXPECT_FALSE(a.is_locked());
  EXPECT_FALSE(b.is_locked());
  // std::lock on two dlock locks, one of which is held elsewhere for a moment.
  auto other = make_client();
  auto blocker = other.simple(key("b")).try_acquire({.lease_time = 300ms});
  ASSERT_TRUE(blocker);
  std::lock(a, b);  // waits out the 300 ms lease without deadlocking
  [&]() DLOCK_NO_THREAD_SAFETY_ANALYSIS {
    a.unlock();
    b.unlock();
  }();
}

TEST_F(Locks, AsyncAcquisitionParksNoThread) {
  auto c = make_client();
  auto held = c.reentrant(key("r")).try_acquire();
  ASSERT_TRUE(held);
  auto other = make_client();
  std::promise<lease> got;
  other.reentrant(key("r")).acquire_async(10s,
                                          [&](acquire_result r) {
                                            EXPECT_FALSE(r.error);
                                            got.set_value(std::move(r.held));
                                          },
                                          {.owner = "async-worker"});
  auto fut = got.get_future();
  EXPECT_EQ(fut.wait_for(50ms), std::future_status::timeout);
  held.release();
  auto l = fut.get();
  EXPECT_TRUE(l);
  EXPECT_EQ(other.reentrant(key("r")).hold_count("async-worker"), 1);
  // The future form, and a wait that ends empty.
  auto none = c.reentrant(key("r")).acquire_future(100ms).get();
  EXPECT_FALSE(none);
  auto bad = c.simple(key("s")).acquire_future(1s, {.lease_time = -1s});
  EXPECT_THROW(bad.get(), error);
}

TEST_F(Locks, LocalWaitersAreServedInArrivalOrder) {
  auto c = make_client();
  auto holder = make_client();
  auto held = holder.simple(key("s")).try_acquire();
  ASSERT_TRUE(held);
  std::mutex order_mutex;
  std::vector<int> order;
  std::vector<std::future<void>> waiters;
  auto lock = c.simple(key("s"));
  // Submissions from one thread reach the I/O thread in order: that is the arrival order.
  for (int i = 0; i < 6; ++i) {
    std::promise<void> done;
    waiters.push_back(done.get_future());
    lock.acquire_async(20s, [&, i, done = std::make_shared<std::promise<void>>(std::move(done))](
                                acquire_result r) mutable {
      EXPECT_FALSE(r.error);
      lease l = std::move(r.held);
      {
        std::lock_guard g(order_mutex);
        order.push_back(i);
      }
      l.release();  // on the I/O thread: sent without waiting
      done->set_value();
    });
  }
  held.release();
  for (auto& w : waiters)
    w.get();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5}));
}

}  // namespace
}  // namespace dlock::testing

namespace dlock::testing {
namespace {

TEST_F(Locks, LocalHandOffsNeverOverlapNorShutOutAnotherClientsWaiter) {
  // Threads of one client hand the lock to each other, each next attempt sent right behind the
  // release (one round trip). A waiter in another client must still get its turn while they go
  // on: once it is heard waiting, the local waiters let it go first.
  for (const std::string kind : {"reentrant", "simple"}) {
    SCOPED_TRACE(kind);
    auto shared = make_client();
    auto other = make_client();
    const auto name = key("handoff-" + kind);
    auto lock_in = [&](const client& c) -> basic_lock {
      if (kind == "simple") return c.simple(name);
      return c.reentrant(name);
    };
    std::atomic<int> inside{0};
    std::atomic<bool> stop{false};
    std::atomic<std::int64_t> grants{0};
    std::mutex fences_mutex;
    std::vector<std::uint64_t> fences;  // in grant order: each grant records under the lock
    auto hold = [&](lease& l) {
      EXPECT_EQ(inside.fetch_add(1), 0) << "two holders at once";
      {
        std::lock_guard g(fences_mutex);
        fences.push_back(l.fence());
      }
      inside.fetch_sub(1);
      EXPECT_TRUE(l.release());
    };
    std::vector<std::thread> workers;
    for (int t = 0; t < 4; ++t) {
      workers.emplace_back([&] {
        auto lock = lock_in(shared);
        while (!stop) {
          auto l = lock.try_acquire_for(20s);
          ASSERT_TRUE(l);
          hold(l);
          ++grants;
        }
      });
    }
    wait_until([&] { return grants >= 200; });
    auto theirs = lock_in(other).try_acquire_for(10s);
    ASSERT_TRUE(theirs) << "shut out by a client handing the lock around locally";
    const auto at_their_grant = grants.load();
    hold(theirs);
    wait_until([&] { return grants >= at_their_grant + 200; });
    stop = true;
    for (auto& w : workers)
      w.join();
    std::lock_guard g(fences_mutex);
    EXPECT_TRUE(std::is_sorted(fences.begin(), fences.end()));
    EXPECT_EQ(std::adjacent_find(fences.begin(), fences.end()), fences.end()) << "a fence twice";
  }
}

TEST_F(Locks, DroppingTheLastClientHandleEndsPendingAcquisitions) {
  auto holder = make_client();
  auto held = holder.simple(key("s")).try_acquire();
  ASSERT_TRUE(held);
  std::promise<std::error_code> ended;
  {
    auto c = make_client();
    c.simple(key("s")).acquire_async(
        30s, [&](acquire_result r) { ended.set_value(r.held ? std::error_code{} : r.error); });
  }  // the client's last handle goes: the waiting acquisition is told, not left hanging
  auto f = ended.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(f.get(), errc::client_closed);
  EXPECT_TRUE(held.valid());
}

}  // namespace
}  // namespace dlock::testing
