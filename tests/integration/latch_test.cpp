// The countdown latch against a real redis-server: Redisson's layout and messages (checked with
// plain commands and redis-cli), waiters in separate processes, waiting with and without a
// deadline, asynchronous waits and the client going away under them, and names or keys a red
// team would try. `dlock latch` is tested in cli_latch_test.cpp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <future>
#include <optional>
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
  return "redisson_countdownlatch__channel__{" + name + "}";
}

// Waits (bounded) until `channel` has `n` subscribers: waiters are listening, or have gone.
void await_subscribers(raw_redis& raw, const std::string& channel, std::int64_t n) {
  const auto limit = steady::now() + 30s;
  while (raw({"PUBSUB", "NUMSUB", channel}).at(1).integer() != n) {
    ASSERT_LT(steady::now(), limit) << channel << " never had " << n << " subscribers";
    std::this_thread::yield();
  }
}

// Runs `call`, expecting a dlock::error with `code`; returns its message.
template <class F>
std::string expect_error(errc code, F&& call) {
  try {
    call();
    ADD_FAILURE() << "no error";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    return e.what();
  }
  return {};
}

// steady_clock is CLOCK_MONOTONIC, one clock for every process on the machine: the children
// report their events in it, so the parent can order them.
std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(steady::now().time_since_epoch())
      .count();
}

// ---- the child processes: this test binary, run with a filter selecting the disabled test ----
//   DLOCK_LATCH_ROLE  "waiter": waits up to 30 s for DLOCK_LATCH_NAME, then prints
//                     "woke reached=R count=C at=NS" (C: the count read right after waking);
//                     "counter": waits for the go latch DLOCK_LATCH_GO, counts DLOCK_LATCH_NAME
//                     down once, prints "down sent=NS acked=NS" (before sending, after the reply)
//   DLOCK_LATCH_URL   the server
// Anything unexpected prints "latch-failed WHY".

constexpr const char* child_test = "LatchChild.DISABLED_Role";

void say(const std::string& line) {
  std::cout << line << std::endl;  // flushed: the parent is reading
}

TEST(LatchChild, DISABLED_Role) {
  const char* role = std::getenv("DLOCK_LATCH_ROLE");
  if (!role) GTEST_SKIP() << "run by the multi-process tests only";
  try {
    auto o = client_options::from_url(std::getenv("DLOCK_LATCH_URL"));
    // No periodic re-check within the wait: a waiter can only be woken by the channel's message
    // (or the check that follows its subscription), which is what the parent tests.
    o.max_recheck = 60s;
    client c(o);
    auto latch = c.latch(std::getenv("DLOCK_LATCH_NAME"));
    if (std::string(role) == "waiter") {
      const bool reached = latch.wait_for(30s);
      const auto at = now_ns();
      say("woke reached=" + std::to_string(reached) + " count=" + std::to_string(latch.count()) +
          " at=" + std::to_string(at));
    } else {
      if (!c.latch(std::getenv("DLOCK_LATCH_GO")).wait_for(30s)) {
        say("latch-failed no go within 30 s");
        return;
      }
      const auto sent = now_ns();
      latch.count_down();
      say("down sent=" + std::to_string(sent) + " acked=" + std::to_string(now_ns()));
    }
  } catch (const std::exception& e) {
    say(std::string("latch-failed ") + e.what());
  }
}

std::string self_path() {
  char buf[PATH_MAX];
  const auto n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw std::runtime_error("cannot read /proc/self/exe");
  return std::string(buf, static_cast<std::size_t>(n));
}

child_process spawn_child(const std::string& role, const std::string& url, const std::string& name,
                          const std::string& go = {}) {
  embedded::spawn_options o = captured;
  o.env = {"DLOCK_LATCH_ROLE=" + role, "DLOCK_LATCH_URL=" + url, "DLOCK_LATCH_NAME=" + name,
           "DLOCK_LATCH_GO=" + go};
  return child_process(
      {self_path(), std::string("--gtest_filter=") + child_test, "--gtest_also_run_disabled_tests"},
      o);
}

// The number after "KEY=" in a child's line.
std::int64_t field(const std::string& line, const std::string& key) {
  const auto at = line.find(key + "=");
  if (at == std::string::npos) throw std::runtime_error("no " + key + " in: " + line);
  return std::stoll(line.substr(at + key.size() + 1));
}

// The child's line starting with `prefix`; fails the test with what it said instead otherwise.
std::optional<std::string> report(child_process& child, const std::string& prefix) {
  const auto deadline = steady::now() + 60s;
  std::string said;
  while (steady::now() < deadline) {
    const auto line = child.read_line(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now()));
    if (!line) break;
    if (line->starts_with(prefix)) return line;
    said += *line + "\n";
  }
  ADD_FAILURE() << "no '" << prefix << "' from the child; it said:\n" << said;
  return std::nullopt;
}

// True if the child has printed no line starting with `prefix` so far (reads without waiting).
bool has_not_said(child_process& child, const std::string& prefix) {
  while (auto line = child.read_line(0ms)) {
    if (line->starts_with(prefix)) return false;
  }
  return true;
}

class Latch : public redis_test {};

TEST_F(Latch, FiveProcessesCountDownAndThreeWaitingProcessesWakeOnlyAtZero) {
  client c(url());
  ASSERT_TRUE(c.latch(key("l")).try_set_count(5));
  ASSERT_TRUE(c.latch(key("go")).try_set_count(1));
  raw_redis raw(server().port());
  std::vector<child_process> waiters, counters;
  for (int i = 0; i < 3; ++i)
    waiters.push_back(spawn_child("waiter", url(), key("l")));
  await_subscribers(raw, channel_of(key("l")), 3);
  for (int i = 0; i < 5; ++i)
    counters.push_back(spawn_child("counter", url(), key("l"), key("go")));
  await_subscribers(raw, channel_of(key("go")), 5);
  for (auto& w : waiters)
    EXPECT_TRUE(has_not_said(w, "woke")) << "woke before any count-down";
  EXPECT_EQ(c.latch(key("l")).count(), 5);

  c.latch(key("go")).count_down();  // all five count down at once
  std::int64_t last_sent = 0, last_acked = 0;
  for (auto& counter : counters) {
    const auto line = report(counter, "down ");
    ASSERT_TRUE(line);
    last_sent = std::max(last_sent, field(*line, "sent"));
    last_acked = std::max(last_acked, field(*line, "acked"));
    EXPECT_EQ(counter.wait(), 0);
  }
  std::vector<std::int64_t> woke;
  for (auto& w : waiters) {
    const auto line = report(w, "woke ");
    ASSERT_TRUE(line);
    EXPECT_EQ(field(*line, "reached"), 1) << *line;
    // The count read right after waking: the waiter woke because the latch had reached 0.
    EXPECT_EQ(field(*line, "count"), 0) << *line;
    woke.push_back(field(*line, "at"));
    EXPECT_EQ(w.wait(), 0);
  }
  // No waiter woke before the last count-down was even sent. (The fifth count-down's message
  // may reach a waiter before its reply reaches the counter, so "after it was acknowledged"
  // cannot be asserted; the count of 0 read on waking says the same from the server's side.)
  for (const auto at : woke)
    EXPECT_GE(at, last_sent);
  // One message woke them all: far closer together than a re-check (60 s) would have.
  const auto [first, last] = std::minmax_element(woke.begin(), woke.end());
  EXPECT_LT(*last - *first, std::chrono::nanoseconds(10s).count());
  EXPECT_EQ(raw({"EXISTS", key("l")}).integer(), 0) << "deleted at zero, as Redisson does";
  await_subscribers(raw, channel_of(key("l")), 0);
}

TEST_F(Latch, SetsOnceCountsDownAndIsDeletedAtZero) {
  client c(url());
  auto latch = c.latch(key("l"));
  EXPECT_EQ(latch.count(), 0) << "a latch that does not exist";
  EXPECT_TRUE(latch.wait_for(0ms)) << "a latch that does not exist is reached";
  EXPECT_TRUE(latch.try_set_count(3));
  EXPECT_FALSE(latch.try_set_count(5)) << "set only once";
  EXPECT_EQ(latch.count(), 3);
  raw_redis raw(server().port());
  EXPECT_EQ(raw({"GET", key("l")}).str(), "3") << "Redisson's layout: a bare count";
  std::vector<client> clients;
  for (int i = 0; i < 3; ++i)
    clients.emplace_back(url());
  std::vector<std::future<bool>> waiters;
  for (auto& w : clients)
    waiters.push_back(std::async(std::launch::async,
                                 [&w, name = key("l")] { return w.latch(name).wait_for(30s); }));
  await_subscribers(raw, channel_of(key("l")), 3);
  latch.count_down();
  latch.count_down();
  EXPECT_EQ(latch.count(), 1);
  EXPECT_EQ(raw({"PUBSUB", "NUMSUB", channel_of(key("l"))}).at(1).integer(), 3) << "still waiting";
  for (auto& w : waiters)
    EXPECT_EQ(w.wait_for(0ms), std::future_status::timeout) << "not before zero";
  latch.count_down();
  for (auto& w : waiters)
    EXPECT_TRUE(w.get());
  EXPECT_EQ(raw({"EXISTS", key("l")}).integer(), 0);
  latch.count_down();
  EXPECT_EQ(latch.count(), 0) << "counting down a finished latch changes nothing";
  EXPECT_EQ(raw({"EXISTS", key("l")}).integer(), 0);
  EXPECT_TRUE(latch.try_set_count(2)) << "a finished latch can be set again";
  expect_error(errc::invalid_argument, [&] { latch.try_set_count(0); });
  expect_error(errc::invalid_argument, [&] { c.latch(""); });
}

TEST_F(Latch, AWaitWithADeadlineReturnsNotReachedWhenItPassesAndUnsubscribes) {
  client c(url());
  auto latch = c.latch(key("d"));
  ASSERT_TRUE(latch.try_set_count(1));
  const auto start = steady::now();
  EXPECT_FALSE(latch.wait_for(200ms));
  EXPECT_GE(steady::now() - start, 200ms);
  EXPECT_FALSE(latch.wait_for(0ms)) << "a single check";
  std::promise<latch_wait_result> async;
  latch.wait_async(150ms, [&](latch_wait_result r) { async.set_value(std::move(r)); });
  const auto r = async.get_future().get();
  EXPECT_FALSE(r.reached);
  EXPECT_FALSE(r.error) << r.message;
  raw_redis raw(server().port());
  await_subscribers(raw, channel_of(key("d")), 0);  // the client is still open
  EXPECT_EQ(latch.count(), 1);
}

TEST_F(Latch, AnAsyncWaitCompletesAtZero) {
  client c(url());
  auto latch = c.latch(key("a"));
  ASSERT_TRUE(latch.try_set_count(2));
  std::promise<latch_wait_result> woken;
  latch.wait_async(30s, [&](latch_wait_result r) { woken.set_value(std::move(r)); });
  raw_redis raw(server().port());
  await_subscribers(raw, channel_of(key("a")), 1);
  latch.count_down();
  latch.count_down();
  const auto r = woken.get_future().get();
  EXPECT_TRUE(r.reached);
  EXPECT_FALSE(r.error) << r.message;
  await_subscribers(raw, channel_of(key("a")), 0);
}

TEST_F(Latch, APlainDecrAndPublishAsRedissonDoesWakesADlockWaiter) {
  client c(url());
  auto latch = c.latch(key("r"));
  ASSERT_TRUE(latch.try_set_count(1));
  std::promise<latch_wait_result> woken;
  latch.wait_async(30s, [&](latch_wait_result r) { woken.set_value(std::move(r)); });
  raw_redis raw(server().port());
  await_subscribers(raw, channel_of(key("r")), 1);
  // What Redisson's countDown() does, as plain commands: DECR, at zero DEL and PUBLISH 0. As
  // one transaction, as Redisson's script is one: the waiter's re-checks then see the count 1
  // or no latch, never a 0 left before the message (which would end its wait early).
  raw({"MULTI"});
  raw({"DECR", key("r")});
  raw({"DEL", key("r")});
  raw({"PUBLISH", channel_of(key("r")), "0"});
  const auto results = raw({"EXEC"});
  EXPECT_EQ(results.at(0).integer(), 0) << "the count went to 0";
  EXPECT_EQ(results.at(2).integer(), 1) << "the dlock waiter was listening";
  const auto r = woken.get_future().get();
  EXPECT_TRUE(r.reached);
  EXPECT_FALSE(r.error) << r.message;
}

TEST_F(Latch, PublishesRedissonsMessagesOnItsChannel) {
  // A Redisson waiter's view: redis-cli subscribed to the channel sees "1" when a count is set
  // and "0" when it reaches zero (and when the latch is removed), nothing in between.
  child_process listener({embedded::default_programs().cli, "-p", std::to_string(server().port()),
                          "SUBSCRIBE", channel_of(key("m"))},
                         captured);
  raw_redis raw(server().port());
  await_subscribers(raw, channel_of(key("m")), 1);
  auto next_message = [&] {
    if (!listener.wait_for("message")) return std::string("(none)");
    EXPECT_EQ(listener.read_line(), channel_of(key("m")));
    return listener.read_line().value_or("(none)");
  };
  client c(url());
  auto latch = c.latch(key("m"));
  ASSERT_TRUE(latch.try_set_count(2));
  EXPECT_EQ(next_message(), "1");
  latch.count_down();
  latch.count_down();
  EXPECT_EQ(next_message(), "0");
  ASSERT_TRUE(latch.try_set_count(4));
  EXPECT_EQ(next_message(), "1");
  EXPECT_TRUE(latch.remove());
  EXPECT_EQ(next_message(), "0") << "remove wakes Redisson's waiters too";
}

TEST_F(Latch, RemoveWakesWaiters) {
  client c(url());
  auto latch = c.latch(key("x"));
  ASSERT_TRUE(latch.try_set_count(2));
  auto waiting = std::async(std::launch::async, [&] { return latch.wait_for(30s); });
  raw_redis raw(server().port());
  await_subscribers(raw, channel_of(key("x")), 1);
  EXPECT_TRUE(latch.remove());
  EXPECT_TRUE(waiting.get());
  EXPECT_FALSE(latch.remove()) << "nothing left to remove";
}

TEST_F(Latch, KeysOfOtherTypesAreRefusedAndLeftAlone) {
  client c(url());
  raw_redis raw(server().port());
  raw({"RPUSH", key("list"), "x"});
  raw({"HSET", key("hash"), "f", "v"});
  raw({"SET", key("text"), "hello"});
  raw({"SET", key("padded"), "007"});
  raw({"SET", key("huge"), "99999999999999999999"});
  const std::vector<std::pair<std::string, std::string>> keys = {
      {key("list"), "holds a list, not a count"},
      {key("hash"), "holds a hash, not a count"},
      {key("text"), "holds a string that is not a count"},
      {key("padded"), "holds a string that is not a count"},
      {key("huge"), "holds a string that is not a count"}};
  for (const auto& [name, why] : keys) {
    auto latch = c.latch(name);
    const std::vector<std::function<void()>> calls = {
        [&] { latch.try_set_count(2); }, [&] { latch.count_down(); },  [&] { latch.count(); },
        [&] { latch.remove(); },         [&] { latch.wait_for(0ms); }, [&] { latch.wait_for(30s); },
    };
    for (const auto& call : calls) {
      const auto what = expect_error(errc::wrong_type, call);
      EXPECT_NE(what.find("latch '" + name + "' " + why), std::string::npos) << what;
    }
    std::promise<latch_wait_result> async;
    latch.wait_async(30s, [&](latch_wait_result r) { async.set_value(std::move(r)); });
    const auto r = async.get_future().get();
    EXPECT_EQ(r.error, errc::wrong_type) << r.message;
  }
  EXPECT_EQ(raw({"LRANGE", key("list"), "0", "-1"}).at(0).str(), "x");
  EXPECT_EQ(raw({"LLEN", key("list")}).integer(), 1);
  EXPECT_EQ(raw({"HGET", key("hash"), "f"}).str(), "v");
  EXPECT_EQ(raw({"HLEN", key("hash")}).integer(), 1);
  EXPECT_EQ(raw({"GET", key("text")}).str(), "hello");
  EXPECT_EQ(raw({"GET", key("padded")}).str(), "007");
  EXPECT_EQ(raw({"GET", key("huge")}).str(), "99999999999999999999");
  await_subscribers(raw, channel_of(key("list")), 0);  // every wait let go of its channel
}

TEST_F(Latch, AwkwardNamesWork) {
  client c(url());
  raw_redis raw(server().port());
  for (const std::string& name : {key("a{b}c"), key("{x}"), key("}{"), key("new\nline"),
                                  key(std::string("\xff\xfe\0z", 4)), key("a b-c")}) {
    auto latch = c.latch(name);
    ASSERT_TRUE(latch.try_set_count(2));
    EXPECT_EQ(raw({"GET", name}).str(), "2");
    auto waiting = std::async(std::launch::async, [&] { return latch.wait_for(30s); });
    // Redisson's channel for it: the name in braces, even when it holds braces itself.
    await_subscribers(raw, channel_of(name), 1);
    latch.count_down();
    EXPECT_EQ(latch.count(), 1);
    latch.count_down();
    EXPECT_TRUE(waiting.get());
    EXPECT_EQ(raw({"EXISTS", name}).integer(), 0);
  }
}

TEST_F(Latch, DestroyingTheClientEndsAPendingAsyncWaitWithClientClosed) {
  raw_redis raw(server().port());
  for (const auto wait : {std::chrono::milliseconds::max(), std::chrono::milliseconds(30s)}) {
    std::promise<latch_wait_result> done;
    {
      client c(url());
      auto latch = c.latch(key("k"));
      latch.try_set_count(1);
      latch.wait_async(wait, [&](latch_wait_result r) { done.set_value(std::move(r)); });
      await_subscribers(raw, channel_of(key("k")), 1);
    }  // the client's last handle goes while the wait is pending
    const auto r = done.get_future().get();
    EXPECT_FALSE(r.reached);
    EXPECT_EQ(r.error, errc::client_closed) << r.message;
    await_subscribers(raw, channel_of(key("k")), 0);
    EXPECT_EQ(raw({"GET", key("k")}).str(), "1") << "closing changes nothing on the server";
  }
  // The same when the last handle goes before the wait has even started on the I/O thread.
  std::promise<latch_wait_result> done;
  client(url()).latch(key("k")).wait_async(std::chrono::milliseconds::max(),
                                           [&](latch_wait_result r) { done.set_value(r); });
  EXPECT_EQ(done.get_future().get().error, errc::client_closed);
}

TEST_F(Latch, BlockingCallsAreRefusedOnTheIoThread) {
  client c(url());
  auto latch = c.latch(key("io"));
  ASSERT_TRUE(latch.try_set_count(1));
  std::promise<std::vector<std::error_code>> codes;
  latch.wait_async(0ms, [&](latch_wait_result) {
    std::vector<std::error_code> out;
    for (const auto& call : std::vector<std::function<void()>>{
             [&] { latch.wait_for(1s); }, [&] { latch.count(); }, [&] { latch.count_down(); }}) {
      try {
        call();
        out.push_back({});
      } catch (const error& e) {
        out.push_back(e.code());
      }
    }
    codes.set_value(out);
  });
  for (const auto& ec : codes.get_future().get())
    EXPECT_EQ(ec, errc::invalid_argument);
  EXPECT_EQ(latch.count(), 1) << "nothing counted down";
}

// ---- on every deployment: the channel where the count lives (sharded pub/sub on a cluster) ----

class LatchDeployments : public ::testing::TestWithParam<std::string> {};

INSTANTIATE_TEST_SUITE_P(Deployments, LatchDeployments, ::testing::ValuesIn(all_deployments),
                         [](const auto& param_info) { return param_info.param; });

TEST_P(LatchDeployments, AWaiterWakesAtZeroAndNamesWithBracesAreRefusedOnlyOnACluster) {
  const auto d = start_deployment(GetParam());
  client c(d->options());
  const std::string name = "latch:deployments";
  auto latch = c.latch(name);
  ASSERT_TRUE(latch.try_set_count(2));
  auto waiting = std::async(std::launch::async, [&] { return latch.wait_for(30s); });
  {
    raw_redis raw(d->port_for(channel_of(name)));
    const auto limit = steady::now() + 30s;
    while (raw({"PUBSUB", d->numsub(), channel_of(name)}).at(1).integer() != 1) {
      ASSERT_LT(steady::now(), limit) << "the waiter never subscribed";
      std::this_thread::yield();
    }
  }
  latch.count_down();
  EXPECT_EQ(latch.count(), 1);
  latch.count_down();
  EXPECT_TRUE(waiting.get());
  EXPECT_EQ(raw_redis(d->port_for(name))({"EXISTS", name}).integer(), 0);
  // "a{b}c" hashes by "b"; its channel "...{a{b}c}" by "a{b": another slot on a cluster.
  auto braced = c.latch("a{b}c");
  if (GetParam() == "cluster") {
    expect_error(errc::invalid_argument, [&] { braced.try_set_count(1); });
    std::promise<latch_wait_result> refused;
    braced.wait_async(1s, [&](latch_wait_result r) { refused.set_value(std::move(r)); });
    EXPECT_EQ(refused.get_future().get().error, errc::invalid_argument);
  } else {
    EXPECT_TRUE(braced.try_set_count(1));
    braced.count_down();
    EXPECT_TRUE(braced.wait_for(0ms));
  }
}

}  // namespace
}  // namespace dlock::testing
