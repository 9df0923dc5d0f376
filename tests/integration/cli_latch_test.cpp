// `dlock latch`, black-box: the built binary is spawned and judged by its exit codes, its output
// and what it leaves in Redis.
#include <gtest/gtest.h>

#include <thread>

#include "cli_support.hpp"
#include "dlock/dlock.hpp"

namespace dlock::testing {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

class CliLatch : public Cli {
 protected:
  outcome latch(std::vector<std::string> rest) {
    rest.insert(rest.begin(), {"--url", url(), "latch"});
    return dlock_cli(std::move(rest));
  }
  // A `dlock latch NAME wait ...` in the background.
  child_process start_wait(const std::string& name, std::vector<std::string> flags) {
    std::vector<std::string> a = {DLOCK_CLI, "--url", url(), "latch", name, "wait"};
    a.insert(a.end(), flags.begin(), flags.end());
    return child_process(a, {.capture_stdout = true, .merge_stderr = true});
  }
  // Waits (bounded) until `n` clients listen on the latch's channel.
  void await_subscribers(const std::string& name, std::int64_t n) {
    raw_redis raw(server().port());
    const std::string channel = "redisson_countdownlatch__channel__{" + name + "}";
    const auto limit = steady::now() + 30s;
    while (raw({"PUBSUB", "NUMSUB", channel}).at(1).integer() != n) {
      ASSERT_LT(steady::now(), limit) << "the waiter never subscribed";
      std::this_thread::yield();
    }
  }
};

TEST_F(CliLatch, AWaitingProcessExitsZeroOnceNDownsHaveRun) {
  const auto set = latch({key("l"), "set", "3"});
  EXPECT_EQ(set.code, 0) << set.output;
  EXPECT_EQ(set.output, "");
  auto waiter = start_wait(key("l"), {"--wait", "30s"});
  await_subscribers(key("l"), 1);
  for (const char* left : {"2", "1"}) {
    const auto down = latch({key("l"), "down"});
    EXPECT_EQ(down.code, 0) << down.output;
    EXPECT_EQ(down.output, std::string(left) + "\n");
    EXPECT_FALSE(waiter.try_wait()) << "the waiter ended before the count reached 0";
  }
  const auto last = latch({key("l"), "down"});
  EXPECT_EQ(last.output, "0\n");
  EXPECT_EQ(waiter.wait(30s), 0) << waiter.drain();
  raw_redis raw(server().port());
  EXPECT_EQ(raw({"EXISTS", key("l")}).integer(), 0);
  // A latch that does not exist is at 0: waiting ends at once; counting it down changes nothing.
  EXPECT_EQ(latch({key("l"), "wait"}).code, 0);
  EXPECT_EQ(latch({key("l"), "down"}).output, "0\n");
  EXPECT_EQ(raw({"EXISTS", key("l")}).integer(), 0);
}

TEST_F(CliLatch, AWaitThatEndsFirstExits75) {
  ASSERT_EQ(latch({key("w"), "set", "1"}).code, 0);
  const auto r = latch({key("w"), "wait", "--wait", "200ms"});
  EXPECT_EQ(r.code, 75) << r.output;
  EXPECT_EQ(r.output, "dlock: latch '" + key("w") + "' did not reach 0 within 200ms\n");
  EXPECT_EQ(latch({"--wait", "0", key("w"), "wait"}).code, 75) << "one check";
  raw_redis raw(server().port());
  EXPECT_EQ(raw({"GET", key("w")}).str(), "1");
}

TEST_F(CliLatch, SetTwiceExitsOneAndShowsTheCount) {
  ASSERT_EQ(latch({key("s"), "set", "2"}).code, 0);
  const auto again = latch({key("s"), "set", "5"});
  EXPECT_EQ(again.code, 1);
  EXPECT_EQ(again.output, "dlock: latch '" + key("s") + "' already exists (count 2)\n");
  raw_redis raw(server().port());
  EXPECT_EQ(raw({"GET", key("s")}).str(), "2") << "Redisson's layout, unchanged";
}

TEST_F(CliLatch, OtherDataIsRefusedWith65AndLeftAlone) {
  raw_redis raw(server().port());
  raw({"RPUSH", key("list"), "x"});
  for (const std::vector<std::string>& action :
       {std::vector<std::string>{"set", "2"}, {"down"}, {"wait", "--wait", "1s"}}) {
    auto args = action;
    args.insert(args.begin(), key("list"));
    const auto r = latch(args);
    EXPECT_EQ(r.code, 65) << r.output;
    EXPECT_EQ(r.output, "dlock: latch '" + key("list") + "' holds a list, not a count\n");
  }
  EXPECT_EQ(raw({"LLEN", key("list")}).integer(), 1);
}

TEST_F(CliLatch, UsageErrorsExit64AndAnUnreachableServer69) {
  const std::vector<std::vector<std::string>> cases = {
      {key("u"), "set"},
      {key("u"), "set", "0"},
      {key("u"), "set", "x"},
      {key("u"), "set", "1", "2"},
      {key("u"), "down", "3"},
      {key("u"), "frob"},
      {key("u")},
      {key("u"), "wait", "--wait", "soon"},
      {key("u"), "down", "--wait", "1s"},
  };
  for (const auto& args : cases) {
    const auto r = latch(args);
    EXPECT_EQ(r.code, 64) << ::testing::PrintToString(args) << "\n" << r.output;
    EXPECT_EQ(line_count(r.output), 1u) << r.output;
    EXPECT_EQ(r.output.rfind("dlock: ", 0), 0u) << r.output;
  }
  const auto redlock =
      dlock_cli({"--url", url(), "--url", url(), "--url", url(), "latch", key("u"), "down"});
  EXPECT_EQ(redlock.code, 64) << redlock.output;
  raw_redis raw(server().port());
  EXPECT_EQ(raw({"EXISTS", key("u")}).integer(), 0) << "nothing was set";
  const auto unreachable = dlock_cli({"--url", "redis://127.0.0.1:1", "latch", key("u"), "down"});
  EXPECT_EQ(unreachable.code, 69) << unreachable.output;
}

TEST_F(CliLatch, NamesThatStartWithADashOrHoldNewlines) {
  for (const std::string& name : {std::string("-dash"), key("new\nline")}) {
    const auto set = latch({"--", name, "set", "1"});
    EXPECT_EQ(set.code, 0) << set.output;
    EXPECT_EQ(latch({"--", name, "down"}).output, "0\n");
    EXPECT_EQ(latch({"--", name, "wait"}).code, 0);
  }
  const auto exists = latch({"--", key("new\nline"), "set", "1"});
  ASSERT_EQ(exists.code, 0);
  const auto again = latch({"--", key("new\nline"), "set", "1"});
  EXPECT_EQ(again.code, 1);
  EXPECT_EQ(line_count(again.output), 1u) << "the newline is escaped: " << again.output;
}

}  // namespace
}  // namespace dlock::testing
