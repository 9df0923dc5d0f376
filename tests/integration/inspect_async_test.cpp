// The looking and setting-up calls without parking a thread: a lock's is_locked_async,
// info_async and force_unlock_async; a semaphore's try_set_permits_async, add_permits_async,
// available_async and info_async; a latch's try_set_count_async, count_async and remove_async.
// Each as a callback, a C++20 awaitable and an asio operation, against real servers: the same
// answers and server state as the blocking forms, the same errors in the server's words, on the
// client's I/O thread (where the blocking forms are refused), nothing sent for an argument error.
#include <gtest/gtest.h>

#include <asio/co_spawn.hpp>
#include <asio/use_awaitable.hpp>
#include <future>
#include <sstream>
#include <thread>

#include "async_support.hpp"
#include "deployments.hpp"
#include "dlock/asio.hpp"
#include "dlock/dlock.hpp"
#include "io_runner.hpp"
#include "polling.hpp"
#include "redis_fixture.hpp"

namespace dlock::testing {
namespace {

using namespace std::chrono_literals;

template <class T>
using called = called_back<call_result<T>>;

// `before + middle + after`, built by appending: GCC 12's -Wrestrict misfires on the operator+
// chains.
std::string joined(std::string before, const std::string& middle, const std::string& after) {
  before.append(middle);
  before.append(after);
  return before;
}

// The coroutines below are lambdas held in a named variable: a coroutine's frame reaches the
// lambda's captures through the closure, which must outlive every suspension.

class InspectAsync : public redis_test {};

// ---- locks ----

TEST_F(InspectAsync, ALocksInfoAndIsLockedMatchTheBlockingFormsAndCompleteOnTheIoThread) {
  client c(url());
  auto lock = c.reentrant(key("l"));
  std::promise<called<bool>> free;
  lock.is_locked_async(into(free, c.simple(key("p"))));
  auto got_free = settle(free.get_future());
  ASSERT_FALSE(got_free.result.error) << got_free.result.message;
  EXPECT_FALSE(got_free.result.value);
  EXPECT_TRUE(got_free.on_io_thread);

  auto held = lock.try_acquire({.lease_time = 30s});
  ASSERT_TRUE(held);
  // A waiter elsewhere: the info counts it.
  client other(url());
  auto waiting = other.reentrant(key("l")).acquire_future(30s);
  wait_until([&] { return lock.waiting_clients() >= 1; });

  std::promise<called<bool>> locked;
  lock.is_locked_async(into(locked, c.simple(key("p"))));
  EXPECT_TRUE(settle(locked.get_future()).result.value);
  std::promise<called<lock_info>> info;
  lock.info_async(into(info, c.simple(key("p"))));
  auto got = settle(info.get_future());
  ASSERT_FALSE(got.result.error) << got.result.message;
  EXPECT_TRUE(got.on_io_thread);
  const auto blocking = lock.info();
  EXPECT_EQ(got.result.value.type, lock_type::reentrant);
  ASSERT_EQ(got.result.value.holders.size(), 1u);
  EXPECT_EQ(got.result.value.holders[0].owner, blocking.holders.at(0).owner);
  EXPECT_EQ(got.result.value.holders[0].holds, 1);
  EXPECT_EQ(got.result.value.fence, held.fence());
  ASSERT_TRUE(got.result.value.ttl);
  EXPECT_GT(*got.result.value.ttl, 20s);
  EXPECT_EQ(got.result.value.waiters, 1);
  EXPECT_TRUE(held.release());
  EXPECT_TRUE(settle(std::move(waiting)));
}

TEST_F(InspectAsync, AFairLocksInfoListsItsQueueAndItsForceUnlockWakesTheFirstInLine) {
  client a(url());
  auto fair = a.fair(key("f"));
  auto held = fair.try_acquire();
  ASSERT_TRUE(held);
  client b(url());
  auto waiting = b.fair(key("f")).acquire_future(30s);
  wait_until([&] { return fair.queue().size() == 1; });
  // Its own channel is live: the wake-up can only come as a message now.
  raw_redis raw(server().port());
  const auto channel = joined("redisson_lock__channel:{", key("f"), "}:") + fair.queue().at(0);
  wait_until([&] { return raw({"PUBSUB", "NUMSUB", channel}).at(1).integer() == 1; });
  std::promise<called<lock_info>> info;
  fair.info_async(into(info, a.simple(key("p"))));
  auto got = settle(info.get_future());
  ASSERT_FALSE(got.result.error) << got.result.message;
  EXPECT_EQ(got.result.value.type, lock_type::fair);
  EXPECT_EQ(got.result.value.queue, fair.queue());
  EXPECT_EQ(got.result.value.waiters, 1);

  std::promise<called<lock_info>> removed;
  fair.force_unlock_async(force_unlock_check::layout_and_expiry, into(removed, a.simple(key("p"))));
  auto gone = settle(removed.get_future());
  ASSERT_FALSE(gone.result.error) << gone.result.message;
  EXPECT_EQ(gone.result.value.type, lock_type::reentrant) << "the hash it removed";
  EXPECT_EQ(gone.result.value.fence, held.fence());
  auto next = settle(std::move(waiting));
  EXPECT_TRUE(next) << "the first in line took the lock";
  EXPECT_GT(next.fence(), held.fence());
  EXPECT_GE(b.stats().unlock_messages, 1u) << "woken by a message, not by its re-check";
}

TEST_F(InspectAsync, AForceUnlockRemovesAHeldLockWakesAWaiterAndTheHolderLearnsOfIt) {
  auto o = client_options::from_url(url());
  o.watchdog_lease = 3s;
  o.watchdog_period = 100ms;
  client c(o);
  std::promise<lease_lost_reason> lost;
  // Renewed by the watchdog: its next renewal finds the lock gone.
  auto held = c.simple(key("l")).try_acquire(
      {.on_lost = [&](lease_lost_reason why) { lost.set_value(why); }});
  ASSERT_TRUE(held);
  client other(url());
  auto waiting = other.simple(key("l")).acquire_future(30s);
  wait_until([&] { return c.simple(key("l")).waiting_clients() >= 1; });
  std::promise<called<lock_info>> removed;
  c.simple(key("l")).force_unlock_async(force_unlock_check::confirmed_kind,
                                        into(removed, c.simple(key("p"))));
  auto gone = settle(removed.get_future());
  ASSERT_FALSE(gone.result.error) << gone.result.message;
  EXPECT_TRUE(gone.on_io_thread);
  EXPECT_EQ(gone.result.value.type, lock_type::simple);
  ASSERT_EQ(gone.result.value.holders.size(), 1u);
  auto next = settle(std::move(waiting));
  EXPECT_TRUE(next) << "the waiter was woken";
  EXPECT_EQ(settle(lost.get_future()), lease_lost_reason::not_held);
}

TEST_F(InspectAsync, AKeyThatIsNotALockIsReportedInTheServersWordsAndLeftAsItWas) {
  raw_redis raw(server().port());
  client c(url());
  raw({"RPUSH", key("list"), "a", "b"});
  std::promise<called<lock_info>> removed;
  c.reentrant(key("list"))
      .force_unlock_async(force_unlock_check::layout_and_expiry, into(removed, c.simple(key("p"))));
  auto got = settle(removed.get_future());
  EXPECT_EQ(got.result.error, errc::wrong_type);
  EXPECT_EQ(got.result.message, joined("'", key("list"), "' holds a list, not a lock"));
  EXPECT_EQ(raw({"LLEN", key("list")}).integer(), 2) << "nothing deleted";
  try {
    c.reentrant(key("list")).force_unlock();
    ADD_FAILURE() << "the blocking form deleted a list";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::wrong_type);
    EXPECT_EQ(std::string(e.what()).rfind(got.result.message, 0), 0u)
        << "the two forms say the same: " << e.what();
  }
  std::promise<called<lock_info>> info;
  c.reentrant(key("list")).info_async(into(info, c.simple(key("p"))));
  auto seen = settle(info.get_future());
  ASSERT_FALSE(seen.result.error) << seen.result.message;
  EXPECT_EQ(seen.result.value.type, lock_type::other);
  EXPECT_EQ(seen.result.value.content, "a list");
}

TEST_F(InspectAsync, EachCallWorksInsideAnotherCompletionWhereBlockingFormsAreRefused) {
  client c(url());
  auto lock = c.simple(key("l"));
  auto held = lock.try_acquire({.lease_time = 30s});
  ASSERT_TRUE(held);
  auto sem = c.semaphore(key("s"));
  auto latch = c.latch(key("latch"));
  std::promise<std::string> done;
  lock.is_locked_async([&](call_result<bool> locked) {
    // On the I/O thread: a blocking call would wait for itself.
    std::error_code refused;
    try {
      (void)lock.info();
    } catch (const error& e) {
      refused = e.code();
    }
    lock.info_async([&, locked, refused](call_result<lock_info> info) {
      sem.try_set_permits_async(3, [&, locked, refused, info](call_result<bool> set) {
        latch.try_set_count_async(2, [&, locked, refused, info, set](call_result<bool> counted) {
          latch.count_async([&, locked, refused, info, set, counted](call_result<std::int64_t> n) {
            std::ostringstream out;
            out << locked.value << ' ' << (refused == errc::invalid_argument) << ' '
                << info.value.holders.size() << ' ' << set.value << ' ' << counted.value << ' '
                << n.value;
            done.set_value(out.str());
          });
        });
      });
    });
  });
  EXPECT_EQ(settle(done.get_future()), "1 1 1 1 1 2");
  EXPECT_EQ(sem.available(), 3);
  EXPECT_EQ(latch.count(), 2);
}

// ---- semaphores ----

TEST_F(InspectAsync, SettingAndAddingPermitsChangeTheCountOnceAndWakeAWaiter) {
  raw_redis raw(server().port());
  client c(url());
  auto sem = c.semaphore(key("s"));
  std::promise<called<bool>> first, second;
  sem.try_set_permits_async(0, into(first, c.simple(key("p"))));
  auto set = settle(first.get_future());
  ASSERT_FALSE(set.result.error) << set.result.message;
  EXPECT_TRUE(set.result.value);
  EXPECT_TRUE(set.on_io_thread);
  sem.try_set_permits_async(5, into(second, c.simple(key("p"))));
  EXPECT_FALSE(settle(second.get_future()).result.value) << "set already: left as it was";
  EXPECT_EQ(raw({"GET", key("s")}).str(), "0");

  client other(url());
  auto waiting = other.semaphore(key("s")).acquire_future(30s, {.permits = 2});
  wait_until([&] { return sem.info().waiters >= 1; });
  std::promise<called<void>> added;
  sem.add_permits_async(2, into(added, c.simple(key("p"))));
  auto add = settle(added.get_future());
  EXPECT_FALSE(add.result.error) << add.result.message;
  auto permits = settle(std::move(waiting));
  EXPECT_TRUE(permits) << "the waiter was woken by the added permits";
  EXPECT_EQ(raw({"GET", key("s")}).str(), "0");
  std::promise<called<void>> removed;
  sem.add_permits_async(-1, into(removed, c.simple(key("p"))));
  EXPECT_FALSE(settle(removed.get_future()).result.error);
  std::promise<called<std::int64_t>> free;
  sem.available_async(into(free, c.simple(key("p"))));
  EXPECT_EQ(settle(free.get_future()).result.value, -1) << "below zero, as documented";
}

TEST_F(InspectAsync, BadCountsAndWrongTypesAreRefusedWithNothingSentOrChanged) {
  raw_redis raw(server().port());
  client c(url());
  const auto calls = script_calls(raw);
  std::promise<called<bool>> negative;
  c.semaphore(key("s")).try_set_permits_async(-1, into(negative, c.simple(key("p"))));
  auto got = settle(negative.get_future());
  EXPECT_EQ(got.result.error, errc::invalid_argument);
  EXPECT_EQ(got.result.message, "a permit count cannot be negative");
  EXPECT_TRUE(got.on_io_thread) << "argument errors come through the callback too";
  std::promise<called<bool>> zero;
  c.latch(key("latch")).try_set_count_async(0, into(zero, c.simple(key("p"))));
  EXPECT_EQ(settle(zero.get_future()).result.error, errc::invalid_argument);
  EXPECT_EQ(script_calls(raw), calls) << "nothing sent";

  raw({"RPUSH", key("list"), "x"});
  std::promise<called<void>> added;
  c.leased_semaphore(key("list")).add_permits_async(1, into(added, c.simple(key("p"))));
  auto wrong = settle(added.get_future());
  EXPECT_EQ(wrong.result.error, errc::wrong_type);
  EXPECT_NE(wrong.result.message.find("list"), std::string::npos) << wrong.result.message;
  std::promise<called<semaphore_info>> info;
  c.semaphore(key("list")).info_async(into(info, c.simple(key("p"))));
  EXPECT_EQ(settle(info.get_future()).result.error, errc::wrong_type);
  std::promise<called<std::int64_t>> count;
  c.latch(key("list")).count_async(into(count, c.simple(key("p"))));
  auto latch_wrong = settle(count.get_future());
  EXPECT_EQ(latch_wrong.result.error, errc::wrong_type);
  EXPECT_EQ(latch_wrong.result.message,
            joined("latch '", key("list"), "' holds a list, not a count"));
  std::promise<called<bool>> remove;
  c.latch(key("list")).remove_async(into(remove, c.simple(key("p"))));
  EXPECT_EQ(settle(remove.get_future()).result.error, errc::wrong_type);
  EXPECT_EQ(raw({"LRANGE", key("list"), "0", "-1"}).elements().size(), 1u) << "left as it was";
}

TEST_F(InspectAsync, ALeasedSemaphoresInfoListsItsPermitsAndAvailableCountsTheFree) {
  client c(url());
  auto sem = c.leased_semaphore(key("s"));
  ASSERT_TRUE(sem.try_set_permits(3));
  auto permit = sem.try_acquire({.lease_time = 60s, .permits = 2});
  ASSERT_TRUE(permit);
  std::promise<called<semaphore_info>> info;
  sem.info_async(into(info, c.simple(key("p"))));
  auto got = settle(info.get_future());
  ASSERT_FALSE(got.result.error) << got.result.message;
  EXPECT_TRUE(got.result.value.exists);
  EXPECT_EQ(got.result.value.available, 1);
  ASSERT_EQ(got.result.value.leased.size(), 2u) << "one entry per permit";
  // The lease's id is its permits' ids, each 32 hex digits.
  const auto& [a, b] =
      std::pair(got.result.value.leased[0].first, got.result.value.leased[1].first);
  EXPECT_NE(a, b);
  EXPECT_EQ(a.size() + b.size(), permit.permit_id().size());
  EXPECT_NE(permit.permit_id().find(a), std::string::npos);
  EXPECT_NE(permit.permit_id().find(b), std::string::npos);
  EXPECT_GT(got.result.value.leased[0].second, 30s);
  std::promise<called<std::int64_t>> free;
  sem.available_async(into(free, c.simple(key("p"))));
  EXPECT_EQ(settle(free.get_future()).result.value, 1);
  EXPECT_TRUE(permit.release());
  EXPECT_EQ(sem.available(), 3);
}

// ---- latches ----

TEST_F(InspectAsync, ALatchIsSetCountedAndRemovedAndTheRemovalOpensItsWaiters) {
  raw_redis raw(server().port());
  client c(url());
  auto latch = c.latch(key("l"));
  std::promise<called<bool>> set, again;
  latch.try_set_count_async(3, into(set, c.simple(key("p"))));
  EXPECT_TRUE(settle(set.get_future()).result.value);
  latch.try_set_count_async(9, into(again, c.simple(key("p"))));
  EXPECT_FALSE(settle(again.get_future()).result.value) << "exists already";
  std::promise<called<std::int64_t>> count;
  latch.count_async(into(count, c.simple(key("p"))));
  auto n = settle(count.get_future());
  EXPECT_EQ(n.result.value, 3);
  EXPECT_TRUE(n.on_io_thread);

  std::promise<latch_wait_result> opened;
  latch.wait_async(30s, [&](latch_wait_result r) { opened.set_value(r); });
  wait_until([&] {
    return raw({"PUBSUB", "NUMSUB", joined("redisson_countdownlatch__channel__{", key("l"), "}")})
               .at(1)
               .integer() >= 1;
  });
  std::promise<called<bool>> removed, twice;
  latch.remove_async(into(removed, c.simple(key("p"))));
  EXPECT_TRUE(settle(removed.get_future()).result.value);
  EXPECT_TRUE(settle(opened.get_future()).reached);
  latch.remove_async(into(twice, c.simple(key("p"))));
  EXPECT_FALSE(settle(twice.get_future()).result.value) << "gone already";
  EXPECT_EQ(raw({"EXISTS", key("l")}).integer(), 0);
}

// ---- a stalled server, a client dropped mid-call ----

TEST_F(InspectAsync, AStalledServerEndsEachCallWithTimeoutAndTheClientRecovers) {
  auto o = client_options::from_url(url());
  o.connection.command_timeout = 300ms;
  client c(o);
  auto sem = c.semaphore(key("s"));
  ASSERT_TRUE(sem.try_set_permits(1));
  server().pause();
  std::promise<called<semaphore_info>> info;
  std::promise<called<lock_info>> removed;
  sem.info_async(into(info, c.simple(key("p"))));
  c.simple(key("l")).force_unlock_async(force_unlock_check::layout_and_expiry,
                                        into(removed, c.simple(key("p"))));
  auto timed_out = settle(info.get_future());
  auto not_removed = settle(removed.get_future());
  server().resume();
  // The first call to time out may cost its connection: a call behind it on that connection
  // then ends with connection_lost.
  EXPECT_EQ(timed_out.result.error, errc::timeout) << timed_out.result.message;
  EXPECT_TRUE(not_removed.result.error == errc::timeout ||
              not_removed.result.error == errc::connection_lost)
      << not_removed.result.message;
  EXPECT_EQ(sem.available(), 1) << "the late replies were discarded; later calls get their own";
}

TEST_F(InspectAsync, ACallSentFromATimeoutsCompletionWaitsForTheReconnectAndSucceeds) {
  auto o = client_options::from_url(url());
  o.connection.command_timeout = 1s;
  o.command_connections = 1;  // the call sent from the completion goes where the stall was
  client c(o);
  auto sem = c.semaphore(key("s"));
  ASSERT_TRUE(sem.try_set_permits(2));
  std::promise<call_result<semaphore_info>> first;
  std::promise<call_result<std::int64_t>> second;
  server().pause();
  sem.info_async([&](call_result<semaphore_info> r) {
    // The stalled connection is dropped before this runs, so this call waits for the next one
    // rather than failing with it.
    sem.available_async([&](call_result<std::int64_t> n) { second.set_value(n); });
    first.set_value(r);
  });
  auto timed_out = settle(first.get_future());
  server().resume();
  EXPECT_EQ(timed_out.error, errc::timeout) << timed_out.message;
  auto n = settle(second.get_future());
  EXPECT_FALSE(n.error) << n.message;
  EXPECT_EQ(n.value, 2);
}

TEST_F(InspectAsync, ACallInFlightWhenTheClientsLastHandleGoesEndsOnceWithAnError) {
  std::promise<call_result<lock_info>> info;
  std::promise<call_result<std::int64_t>> count;
  {
    auto o = client_options::from_url(url());
    o.connection.command_timeout = 300ms;
    client c(o);
    EXPECT_FALSE(c.reentrant(key("l")).is_locked());  // connected
    server().pause();
    c.reentrant(key("l")).info_async([&](call_result<lock_info> r) { info.set_value(r); });
    c.latch(key("latch")).count_async([&](call_result<std::int64_t> r) { count.set_value(r); });
  }  // the client, the lock and the latch go while both calls wait for the server
  // A pending call does not keep the client open: it ends once (a second completion would throw
  // from set_value), failed by the teardown or by its command timeout, whichever comes first.
  auto i = settle(info.get_future());
  auto n = settle(count.get_future());
  server().resume();
  const auto ended = [](std::error_code ec) {
    return ec == errc::client_closed || ec == errc::timeout || ec == errc::connection_lost;
  };
  EXPECT_TRUE(ended(i.error)) << i.message;
  EXPECT_TRUE(ended(n.error)) << n.message;
}

// ---- the awaitables ----

TEST_F(InspectAsync, EveryCallAwaitedYieldsWhatTheBlockingFormReturnsOrThrowsItsError) {
  raw_redis raw(server().port());
  client c(url());
  auto lock = c.reentrant(key("l"));
  auto held = lock.try_acquire({.lease_time = 30s});
  ASSERT_TRUE(held);
  auto sem = c.leased_semaphore(key("s"));
  auto latch = c.latch(key("latch"));
  raw({"SET", key("text"), "not a count"});
  struct seen {
    bool locked = false, set = false, set_latch = false, removed = false;
    lock_info info, unlocked;
    semaphore_info permits;
    std::int64_t available = -1, count = -1;
    std::error_code negative, not_a_count;
  } s;
  std::promise<void> done;
  auto look = [&]() -> spawned {
    s.locked = co_await lock.is_locked_async();
    s.info = co_await lock.info_async();
    s.set = co_await sem.try_set_permits_async(2);
    co_await sem.add_permits_async(3);
    s.available = co_await sem.available_async();
    s.permits = co_await sem.info_async();
    try {
      co_await sem.try_set_permits_async(-5);
    } catch (const error& e) {
      s.negative = e.code();
    }
    s.set_latch = co_await latch.try_set_count_async(4);
    s.count = co_await latch.count_async();
    s.removed = co_await latch.remove_async();
    try {
      co_await c.latch(key("text")).count_async();
    } catch (const error& e) {
      s.not_a_count = e.code();
    }
    s.unlocked = co_await lock.force_unlock_async();
    done.set_value();
  };
  look();
  settle(done.get_future());
  EXPECT_TRUE(s.locked);
  EXPECT_EQ(s.info.type, lock_type::reentrant);
  EXPECT_EQ(s.info.fence, held.fence());
  EXPECT_TRUE(s.set);
  EXPECT_EQ(s.available, 5);
  EXPECT_TRUE(s.permits.exists);
  EXPECT_EQ(s.permits.available, 5);
  EXPECT_EQ(s.negative, errc::invalid_argument);
  EXPECT_TRUE(s.set_latch);
  EXPECT_EQ(s.count, 4);
  EXPECT_TRUE(s.removed);
  EXPECT_EQ(s.not_a_count, errc::wrong_type);
  EXPECT_EQ(s.unlocked.type, lock_type::reentrant);
  EXPECT_EQ(raw({"EXISTS", key("l")}).integer(), 0);
  EXPECT_EQ(raw({"GET", key("text")}).str(), "not a count");
}

// ---- asio ----

#ifdef ASIO_HAS_CO_AWAIT
TEST_F(InspectAsync, AsioOperationsRunOnTheCoroutinesThreadWithDlockErrorCodes) {
  raw_redis raw(server().port());
  client c(url());
  auto lock = c.simple(key("l"));
  auto held = lock.try_acquire({.lease_time = 30s});
  ASSERT_TRUE(held);
  auto sem = c.semaphore(key("s"));
  auto latch = c.latch(key("latch"));
  raw({"RPUSH", key("list"), "x"});
  io_runner runner;
  std::promise<void> done;
  bool locked = false, set = false, set_latch = false, removed = false, all_on_runner = true;
  std::int64_t available = -1, count = -1;
  lock_info info, unlocked;
  semaphore_info permits;
  std::error_code wrong_type;
  asio::co_spawn(
      runner.io,
      [&]() -> asio::awaitable<void> {
        const auto on_runner = [&] { all_on_runner &= std::this_thread::get_id() == runner.id(); };
        locked = co_await dlock::async_is_locked(lock, asio::use_awaitable);
        info = co_await dlock::async_info(lock, asio::use_awaitable);
        on_runner();
        set = co_await dlock::async_try_set_permits(sem, 1, asio::use_awaitable);
        co_await dlock::async_add_permits(sem, 2, asio::use_awaitable);
        available = co_await dlock::async_available(sem, asio::use_awaitable);
        permits = co_await dlock::async_info(sem, asio::use_awaitable);
        on_runner();
        set_latch = co_await dlock::async_try_set_count(latch, 2, asio::use_awaitable);
        count = co_await dlock::async_count(latch, asio::use_awaitable);
        removed = co_await dlock::async_remove(latch, asio::use_awaitable);
        try {
          co_await dlock::async_force_unlock(
              c.simple(key("list")), force_unlock_check::layout_and_expiry, asio::use_awaitable);
        } catch (const std::system_error& e) {
          wrong_type = e.code();
        }
        unlocked = co_await dlock::async_force_unlock(lock, force_unlock_check::confirmed_kind,
                                                      asio::use_awaitable);
        on_runner();
      },
      [&](std::exception_ptr e) {
        EXPECT_FALSE(e);
        done.set_value();
      });
  ASSERT_EQ(done.get_future().wait_for(30s), std::future_status::ready);
  EXPECT_TRUE(all_on_runner);
  EXPECT_TRUE(locked);
  EXPECT_EQ(info.type, lock_type::simple);
  EXPECT_TRUE(set);
  EXPECT_EQ(available, 3);
  EXPECT_EQ(permits.available, 3);
  EXPECT_TRUE(set_latch);
  EXPECT_EQ(count, 2);
  EXPECT_TRUE(removed);
  EXPECT_EQ(wrong_type, errc::wrong_type);
  EXPECT_EQ(raw({"LLEN", key("list")}).integer(), 1);
  EXPECT_EQ(unlocked.type, lock_type::simple);
  EXPECT_EQ(raw({"EXISTS", key("l")}).integer(), 0);
}
#endif  // ASIO_HAS_CO_AWAIT

// ---- RedLock ----

class InspectAsyncOverRedLock : public redis_test {
 protected:
  std::size_t server_count() const override { return 3; }
};

TEST_F(InspectAsyncOverRedLock, InfoReadsAMasterThatHoldsTheLockAndForceUnlockClearsEvery) {
  client c(client_options::redlock_masters({url(0), url(1), url(2)}));
  auto lock = c.simple(key("l"));
  auto held = lock.try_acquire({.lease_time = 30s});
  ASSERT_TRUE(held);
  // The first master lost it: the answer is another master's, which still shows the lock.
  raw_redis first(server(0).port());
  first({"DEL", key("l")});
  std::promise<called<lock_info>> info;
  lock.info_async(into(info, c.simple(key("p"))));
  auto got = settle(info.get_future());
  ASSERT_FALSE(got.result.error) << got.result.message;
  EXPECT_EQ(got.result.value.type, lock_type::simple);
  std::promise<called<lock_info>> removed;
  lock.force_unlock_async(force_unlock_check::confirmed_kind, into(removed, c.simple(key("p"))));
  auto gone = settle(removed.get_future());
  ASSERT_FALSE(gone.result.error) << gone.result.message;
  EXPECT_EQ(gone.result.value.type, lock_type::simple);
  for (std::size_t i = 0; i < 3; ++i) {
    raw_redis raw(server(i).port());
    EXPECT_EQ(raw({"EXISTS", key("l")}).integer(), 0) << "master " << i;
  }
  std::promise<called<std::int64_t>> available;
  c.semaphore(key("s")).available_async(into(available, c.simple(key("p"))));
  EXPECT_EQ(settle(available.get_future()).result.error, errc::invalid_argument);
  std::promise<called<bool>> set;
  c.latch(key("latch")).try_set_count_async(1, into(set, c.simple(key("p"))));
  EXPECT_EQ(settle(set.get_future()).result.error, errc::invalid_argument);
}

// ---- on every deployment ----

class InspectAsyncTopology : public ::testing::TestWithParam<std::string> {};

INSTANTIATE_TEST_SUITE_P(Deployments, InspectAsyncTopology, ::testing::ValuesIn(all_deployments),
                         [](const auto& param_info) { return param_info.param; });

TEST_P(InspectAsyncTopology, InfoPermitsAndCountsAnswer) {
  auto d = start_deployment(GetParam());
  client c(d->options());
  auto held = c.reentrant("inspect-async:lock").try_acquire({.lease_time = 30s});
  ASSERT_TRUE(held);
  auto sem = c.semaphore("inspect-async:sem");
  auto latch = c.latch("inspect-async:latch");
  std::promise<called<lock_info>> info;
  std::promise<called<bool>> set, set_latch;
  c.reentrant("inspect-async:lock").info_async(into(info, c.simple("inspect-async:p")));
  sem.try_set_permits_async(4, into(set, c.simple("inspect-async:p")));
  latch.try_set_count_async(2, into(set_latch, c.simple("inspect-async:p")));
  auto i = settle(info.get_future());
  ASSERT_FALSE(i.result.error) << i.result.message;
  EXPECT_EQ(i.result.value.type, lock_type::reentrant);
  EXPECT_EQ(i.result.value.fence, held.fence());
  EXPECT_TRUE(settle(set.get_future()).result.value);
  EXPECT_TRUE(settle(set_latch.get_future()).result.value);
  std::promise<called<std::int64_t>> available, count;
  sem.available_async(into(available, c.simple("inspect-async:p")));
  latch.count_async(into(count, c.simple("inspect-async:p")));
  EXPECT_EQ(settle(available.get_future()).result.value, 4);
  EXPECT_EQ(settle(count.get_future()).result.value, 2);
  EXPECT_TRUE(held.release());
}

}  // namespace
}  // namespace dlock::testing
