// The countdown latch against a real redis-server: Redisson's layout and messages, waiting with
// and without a deadline, asynchronous waits, and names or keys a red team would try. Waiters in
// separate processes are in cli_synchronizers_test.cpp (through `dlock latch`).
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "dlock/dlock.hpp"
#include "redis_fixture.hpp"

namespace dlock::testing {
namespace {

using namespace std::chrono_literals;

class Latch : public redis_test {
 protected:
  static std::string channel_of(const std::string& name) {
    std::string out = "redisson_countdownlatch__channel__{";
    out += name;
    out += "}";
    return out;
  }
  // Waits (bounded) until `n` clients listen on the latch's channel.
  void await_listeners(raw_redis& raw, const std::string& name, int n) {
    const auto limit = std::chrono::steady_clock::now() + 10s;
    while (raw({"PUBSUB", "NUMSUB", channel_of(name)}).at(1).integer() < n) {
      ASSERT_LT(std::chrono::steady_clock::now(), limit) << "waiters never subscribed";
      std::this_thread::yield();
    }
  }
};

TEST_F(Latch, CountsDownInRedissonsLayoutAndWakesEveryWaiterAtZero) {
  client c(url());
  auto latch = c.latch(key("l"));
  EXPECT_TRUE(latch.try_set_count(3));
  EXPECT_FALSE(latch.try_set_count(5)) << "set only once";
  EXPECT_EQ(latch.count(), 3);
  raw_redis raw(server().port());
  EXPECT_EQ(raw({"GET", key("l")}).str(), "3");
  std::vector<client> clients;
  for (int i = 0; i < 3; ++i)
    clients.emplace_back(url());
  std::vector<std::future<bool>> waiters;
  for (auto& w : clients)
    waiters.push_back(std::async(std::launch::async,
                                 [&w, name = key("l")] { return w.latch(name).wait_for(30s); }));
  await_listeners(raw, key("l"), 3);
  latch.count_down();
  latch.count_down();
  EXPECT_EQ(latch.count(), 1);
  for (auto& w : waiters)
    EXPECT_EQ(w.wait_for(20ms), std::future_status::timeout) << "not before zero";
  latch.count_down();
  for (auto& w : waiters)
    EXPECT_TRUE(w.get());
  EXPECT_EQ(raw({"EXISTS", key("l")}).integer(), 0) << "deleted at zero, as Redisson does";
  latch.count_down();
  EXPECT_EQ(latch.count(), 0) << "counting down a finished latch changes nothing";
  EXPECT_TRUE(latch.wait_for(0ms)) << "a latch that does not exist is reached";
}

TEST_F(Latch, AWaitWithADeadlineReturnsNotReachedWhenItPasses) {
  client c(url());
  auto latch = c.latch(key("d"));
  ASSERT_TRUE(latch.try_set_count(1));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(latch.wait_for(200ms));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 200ms);
  EXPECT_FALSE(latch.wait_for(0ms)) << "a single check";
  std::promise<latch_wait_result> async;
  latch.wait_async(150ms, [&](latch_wait_result r) { async.set_value(std::move(r)); });
  const auto r = async.get_future().get();
  EXPECT_FALSE(r.reached);
  EXPECT_FALSE(r.error);
}

TEST_F(Latch, ARedissonCountDownWakesADlockWaiterAndRemoveWakesToo) {
  client c(url());
  auto latch = c.latch(key("r"));
  ASSERT_TRUE(latch.try_set_count(1));
  std::promise<latch_wait_result> woken;
  latch.wait_async(30s, [&](latch_wait_result r) { woken.set_value(std::move(r)); });
  raw_redis raw(server().port());
  await_listeners(raw, key("r"), 1);
  // What Redisson's countDown() does: DECR, at zero DEL and publish 0.
  raw({"EVAL",
       "if redis.call('decr', KEYS[1]) <= 0 then redis.call('del', KEYS[1]); "
       "redis.call('publish', KEYS[2], '0') end",
       "2", key("r"), channel_of(key("r"))});
  EXPECT_TRUE(woken.get_future().get().reached);
  ASSERT_TRUE(latch.try_set_count(2));
  auto waiting = std::async(std::launch::async, [&] { return latch.wait_for(30s); });
  await_listeners(raw, key("r"), 1);
  EXPECT_TRUE(latch.remove());
  EXPECT_TRUE(waiting.get());
  EXPECT_FALSE(latch.remove()) << "nothing left to remove";
}

TEST_F(Latch, KeysOfOtherTypesAreRefusedAndLeftAlone) {
  client c(url());
  raw_redis raw(server().port());
  raw({"RPUSH", key("list"), "x"});
  raw({"SET", key("text"), "hello"});
  for (const auto& name : {key("list"), key("text")}) {
    auto latch = c.latch(name);
    for (const auto& call : std::vector<std::function<void()>>{
             [&] { latch.try_set_count(2); }, [&] { latch.count_down(); }, [&] { latch.count(); },
             [&] { latch.wait_for(100ms); }}) {
      try {
        call();
        ADD_FAILURE() << name << ": no error";
      } catch (const error& e) {
        EXPECT_EQ(e.code(), errc::wrong_type) << name << ": " << e.what();
      }
    }
  }
  EXPECT_EQ(raw({"LLEN", key("list")}).integer(), 1);
  EXPECT_EQ(raw({"GET", key("text")}).str(), "hello");
  try {
    c.latch(key("x")).try_set_count(0);
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
  }
}

TEST_F(Latch, AwkwardNamesWork) {
  client c(url());
  for (const std::string& name :
       {key("new\nline"), key(std::string("\xff\xfe", 2)), key("a b-c")}) {
    auto latch = c.latch(name);
    ASSERT_TRUE(latch.try_set_count(1));
    auto waiting = std::async(std::launch::async, [&] { return latch.wait_for(30s); });
    raw_redis raw(server().port());
    await_listeners(raw, name, 1);
    latch.count_down();
    EXPECT_TRUE(waiting.get());
  }
}

TEST_F(Latch, APendingAsyncWaitKeepsItsClientUntilItEnds) {
  std::promise<latch_wait_result> done;
  {
    client c(url());
    ASSERT_TRUE(c.latch(key("k")).try_set_count(1));
    c.latch(key("k")).wait_async(300ms, [&](latch_wait_result r) { done.set_value(std::move(r)); });
  }  // the last handle goes while the wait is pending
  const auto r = done.get_future().get();
  EXPECT_FALSE(r.reached);
  EXPECT_FALSE(r.error) << r.message;
}

}  // namespace
}  // namespace dlock::testing
