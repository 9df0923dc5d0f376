// The command line's other kinds, black-box: `dlock sem`, `dlock run --kind fair|read|write`,
// `dlock run A B` (a multi-lock), and `status`/`ls` recognising each kind. Mutual exclusion is
// proven by the commands themselves: each counts itself in and out of a Redis counter with
// redis-cli and records what it saw.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "cli_support.hpp"
#include "dlock/dlock.hpp"

namespace dlock::testing {
namespace {

using namespace std::chrono_literals;

class CliSynchronizers : public Cli {
 protected:
  void SetUp() override {
    if (!embedded::server_available("redis-cli")) GTEST_SKIP() << "redis-cli is not installed";
    Cli::SetUp();
  }

  /// `dlock --url URL ARGS...` in the background, its output captured.
  child_process spawn(std::vector<std::string> args) {
    args.insert(args.begin(), {DLOCK_CLI, "--url", url()});
    return child_process(args, {.capture_stdout = true, .merge_stderr = true});
  }

  /// A shell command that counts itself in `inside`, records the count it saw in `seen`,
  /// stays `pause` seconds, and counts itself out. Extra shell code runs while inside.
  std::vector<std::string> counted(const std::string& pause, const std::string& extra = "") {
    const std::string script =
        "v=$(redis-cli -p \"$1\" INCR \"$2\") && redis-cli -p \"$1\" RPUSH \"$3\" \"$v\" "
        ">/dev/null && " +
        extra + " sleep " + pause + " && redis-cli -p \"$1\" DECR \"$2\" >/dev/null";
    return {"sh", "-c", script, "sh", std::to_string(server().port()), key("inside"), key("seen")};
  }

  /// What the commands saw: every count of `inside` recorded.
  std::vector<long> seen() {
    client c(url());
    std::vector<long> out;
    const auto list = c.redis().command({"LRANGE", key("seen"), "0", "-1"});  // outlives the loop
    for (const auto& e : list.elements())
      out.push_back(std::stol(e.str()));
    return out;
  }

  nlohmann::json status_json(const std::string& name) {
    const auto r = dlock_cli({"--url", url(), "status", name, "--json"});
    EXPECT_EQ(r.code, 0) << r.output;
    return nlohmann::json::parse(r.output);
  }

  /// Polls `status --json` until `pred` holds (or 10 s pass); returns the last answer.
  template <class Pred>
  nlohmann::json status_until(const std::string& name, Pred pred) {
    auto j = status_json(name);
    for (int i = 0; i < 200 && !pred(j); ++i) {
      std::this_thread::sleep_for(50ms);
      j = status_json(name);
    }
    return j;
  }
};

// A command that holds what dlock gave it until dlock forwards a SIGTERM, then exits 0.
const std::vector<std::string> holder = {
    "sh", "-c",
    "trap 'exit 0' TERM; echo \"ready $DLOCK_FENCE $DLOCK_PERMIT\"; "
    "while :; do sleep 0.05; done"};

std::vector<std::string> concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST_F(CliSynchronizers, TwelveSemaphoreRunsNeverExceedThreePermits) {
  std::vector<child_process> runs;
  for (int i = 0; i < 12; ++i) {
    runs.push_back(
        spawn(concat({"sem", key("pool"), "--permits", "3", "--wait", "60s", "--"},
                     counted("0.3", "echo \"permit=$DLOCK_PERMIT fence=$DLOCK_FENCE\" &&"))));
  }
  const std::regex permit_line("permit=([0-9a-f]{32}) fence=([0-9]+)");
  std::vector<std::string> permits;
  for (auto& r : runs) {
    EXPECT_EQ(r.wait(90s), 0);
    const auto out = r.drain();
    std::smatch m;
    ASSERT_TRUE(std::regex_search(out, m, permit_line)) << out;
    EXPECT_GT(std::stoull(m[2].str()), 0u);
    permits.push_back(m[1].str());
  }
  const auto counts = seen();
  ASSERT_EQ(counts.size(), 12u);
  EXPECT_LE(*std::max_element(counts.begin(), counts.end()), 3) << "more than 3 at once";
  EXPECT_EQ(*std::max_element(counts.begin(), counts.end()), 3) << "never 3 at once";
  std::sort(permits.begin(), permits.end());
  EXPECT_EQ(std::unique(permits.begin(), permits.end()), permits.end()) << "a permit id twice";
  // Every permit came back.
  const auto j = status_json(key("pool"));
  EXPECT_EQ(j.at("kind"), "semaphore-or-latch");  // no permit is out: its zset is gone
  EXPECT_EQ(j.at("count"), 3);
}

TEST_F(CliSynchronizers, SemaphoreWaitExitsAndLostPermit) {
  auto a = spawn(concat({"sem", key("one"), "--permits", "1", "--ttl", "1s", "--"}, holder));
  const auto ready = a.wait_for("ready");
  ASSERT_TRUE(ready);
  const auto permit = ready->substr(ready.value().rfind(' ') + 1);
  ASSERT_EQ(permit.size(), 32u) << *ready;
  // None free: one attempt gives up at once, a bounded wait when it ends.
  EXPECT_EQ(dlock_cli({"--url", url(), "sem", key("one"), "--permits", "1", "--wait", "0", "--",
                       "echo", "ran"})
                .code,
            75);
  const auto timed = dlock_cli({"--url", url(), "sem", key("one"), "--permits", "1", "--wait",
                                "300ms", "--", "echo", "ran"});
  EXPECT_EQ(timed.code, 75);
  EXPECT_NE(timed.output.find("not acquired within 300ms"), std::string::npos) << timed.output;
  EXPECT_EQ(timed.output.find("ran"), std::string::npos);
  // The permit released from elsewhere: the holder's renewal finds it gone.
  client c(url());
  EXPECT_TRUE(c.leased_semaphore(key("one")).release(permit));
  EXPECT_TRUE(a.wait_for("dlock: lost a permit of " + key("one")));
  EXPECT_EQ(a.wait(), 76);
  // The command's own status is passed through; usage errors are one line, exit 64.
  EXPECT_EQ(
      dlock_cli({"--url", url(), "sem", key("one"), "--permits", "1", "--", "sh", "-c", "exit 9"})
          .code,
      9);
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--url", url(), "sem", key("one"), "--", "true"},                    // no --permits
           {"--url", url(), "sem", key("one"), "--permits", "0", "--", "true"},  // not >= 1
           {"--url", url(), "sem", key("one"), "--permits", "2", "true"},        // no --
           {"--url", url(), "sem", key("one"), "--permits", "2", "--"},          // no command
       }) {
    const auto r = dlock_cli(args);
    EXPECT_EQ(r.code, 64) << ::testing::PrintToString(args) << "\n" << r.output;
    EXPECT_EQ(line_count(r.output), 1u) << r.output;
  }
}

TEST_F(CliSynchronizers, ReadersOverlapWritersExclude) {
  // Each reader waits, inside, until it sees the other one inside too: only possible if both
  // hold the read side at once (else the first gives up after 10 s and exits 1).
  const std::string both =
      "redis-cli -p \"$1\" INCR \"$2\" >/dev/null; i=0; "
      "while [ \"$(redis-cli -p \"$1\" GET \"$2\")\" != 2 ]; do "
      "i=$((i+1)); [ $i -gt 200 ] && exit 1; sleep 0.05; done; echo overlapped";
  std::vector<child_process> readers;
  for (int i = 0; i < 2; ++i) {
    readers.push_back(spawn({"run", "--kind", "read", "--wait", "30s", key("rw"), "--", "sh", "-c",
                             both, "sh", std::to_string(server().port()), key("both")}));
  }
  for (auto& r : readers) {
    EXPECT_EQ(r.wait(60s), 0);
    EXPECT_NE(r.drain().find("overlapped"), std::string::npos);
  }
  // Writers: never two inside at once.
  std::vector<child_process> writers;
  for (int i = 0; i < 4; ++i) {
    writers.push_back(spawn(
        concat({"run", "--kind", "write", "--wait", "30s", key("rw"), "--"}, counted("0.1"))));
  }
  for (auto& w : writers)
    EXPECT_EQ(w.wait(60s), 0) << w.drain();
  const auto counts = seen();
  ASSERT_EQ(counts.size(), 4u);
  EXPECT_EQ(*std::max_element(counts.begin(), counts.end()), 1) << "two writers at once";
  // A writer excludes readers and writers; a reader excludes writers.
  {
    auto w = spawn(concat({"run", "--kind", "write", key("rw"), "--"}, holder));
    ASSERT_TRUE(w.wait_for("ready"));
    for (const char* kind : {"read", "write"}) {
      EXPECT_EQ(
          dlock_cli({"--url", url(), "run", "--kind", kind, "--wait", "0", key("rw"), "--", "true"})
              .code,
          75)
          << kind;
    }
    const auto j = status_json(key("rw"));
    EXPECT_EQ(j.at("kind"), "read-write");
    EXPECT_EQ(j.at("mode"), "write");
    EXPECT_EQ(j.at("locked"), true);
    w.signal(SIGTERM);
    EXPECT_EQ(w.wait(), 0);
  }
  auto r = spawn(concat({"run", "--kind", "read", key("rw"), "--"}, holder));
  ASSERT_TRUE(r.wait_for("ready"));
  EXPECT_EQ(
      dlock_cli({"--url", url(), "run", "--kind", "write", "--wait", "0", key("rw"), "--", "true"})
          .code,
      75);
  EXPECT_EQ(
      dlock_cli({"--url", url(), "run", "--kind", "read", "--wait", "0", key("rw"), "--", "true"})
          .code,
      0);
  const auto j = status_json(key("rw"));
  EXPECT_EQ(j.at("kind"), "read-write");
  EXPECT_EQ(j.at("mode"), "read");
  EXPECT_EQ(j.at("holders").size(), 1u);
  EXPECT_NE(dlock_cli({"--url", url(), "status", key("rw")}).output.find("mode     read"),
            std::string::npos);
  r.signal(SIGTERM);
  EXPECT_EQ(r.wait(), 0);
}

TEST_F(CliSynchronizers, MultiLocksInOppositeOrdersNeverOverlapNorDeadlock) {
  // The 40 holds run one after another, each a shell with three redis-cli calls: ~6 s on a quiet
  // machine, over 30 s on a loaded one (load 11 on 2 cores made the last waiter give up at 30 s).
  // The wait bounds a deadlock, not a speed.
  std::vector<child_process> runs;
  for (int i = 0; i < 20; ++i) {
    for (const auto& [first, second] : {std::pair{key("A"), key("B")}, {key("B"), key("A")}}) {
      runs.push_back(
          spawn(concat({"run", "--wait", "150s", first, second, "--"}, counted("0.01"))));
    }
  }
  for (auto& r : runs)
    EXPECT_EQ(r.wait(180s), 0) << r.drain();
  const auto counts = seen();
  ASSERT_EQ(counts.size(), 40u);
  EXPECT_EQ(*std::max_element(counts.begin(), counts.end()), 1) << "two holders of A and B";
  client c(url());
  EXPECT_FALSE(c.reentrant(key("A")).is_locked());
  EXPECT_FALSE(c.reentrant(key("B")).is_locked());
}

TEST_F(CliSynchronizers, MultiLockExportsEveryFenceAndLosesAsOne) {
  const auto r = dlock_cli({"--url", url(), "run", key("b"), key("a"), "--", "sh", "-c",
                            "echo \"$DLOCK_NAME|$DLOCK_FENCE|$DLOCK_FENCES\""});
  ASSERT_EQ(r.code, 0) << r.output;
  client c(url());
  const auto fa = c.reentrant(key("a")).fence(), fb = c.reentrant(key("b")).fence();
  EXPECT_EQ(r.output, key("b") + "|" + std::to_string(fb) + "|" + key("b") + "=" +
                          std::to_string(fb) + " " + key("a") + "=" + std::to_string(fa) + "\n");
  // One name held elsewhere: not acquired, and nothing kept.
  {
    auto held = c.reentrant(key("b")).try_acquire();
    EXPECT_EQ(
        dlock_cli({"--url", url(), "run", "--wait", "200ms", key("a"), key("b"), "--", "true"})
            .code,
        75);
    EXPECT_FALSE(c.reentrant(key("a")).is_locked());
  }
  // Losing any of the names is losing the lease.
  auto run = spawn(concat({"run", "--ttl", "1s", key("a"), key("b"), "--"}, holder));
  ASSERT_TRUE(run.wait_for("ready"));
  c.reentrant(key("b")).force_unlock();
  EXPECT_EQ(run.wait(), 76);
  EXPECT_FALSE(c.reentrant(key("a")).is_locked());
  // Several names are a reentrant multi-lock only.
  for (const char* kind : {"simple", "fair", "read", "write"}) {
    const auto u =
        dlock_cli({"--url", url(), "run", "--kind", kind, key("a"), key("b"), "--", "true"});
    EXPECT_EQ(u.code, 64) << kind << ": " << u.output;
    EXPECT_EQ(line_count(u.output), 1u) << u.output;
  }
}

TEST_F(CliSynchronizers, FairLockRunsInArrivalOrderAndStatusShowsItsQueue) {
  std::uint64_t last = 0;
  for (int i = 0; i < 2; ++i) {
    const auto r = dlock_cli({"--url", url(), "run", "--kind", "fair", key("f"), "--", "sh", "-c",
                              "echo \"$DLOCK_NAME $DLOCK_FENCE\""});
    ASSERT_EQ(r.code, 0) << r.output;
    ASSERT_EQ(r.output.rfind(key("f") + " ", 0), 0u) << r.output;
    const auto fence = std::stoull(r.output.substr(key("f").size() + 1));
    EXPECT_GT(fence, last);
    last = fence;
  }
  auto first = spawn(concat({"run", "--kind", "fair", key("f"), "--"}, holder));
  ASSERT_TRUE(first.wait_for("ready"));
  // Three waiters, each queued before the next starts.
  std::vector<child_process> waiters;
  for (int i = 1; i <= 3; ++i) {
    waiters.push_back(
        spawn({"run", "--kind", "fair", key("f"), "--", "redis-cli", "-p",
               std::to_string(server().port()), "RPUSH", key("order"), std::to_string(i)}));
    const auto j = status_until(key("f"), [&](const nlohmann::json& s) {
      return s.contains("queue") && s.at("queue").size() == static_cast<std::size_t>(i);
    });
    ASSERT_EQ(j.at("queue").size(), static_cast<std::size_t>(i)) << j;
  }
  const auto j = status_json(key("f"));
  EXPECT_EQ(j.at("kind"), "fair");
  EXPECT_EQ(j.at("locked"), true);
  EXPECT_EQ(j.at("holders").size(), 1u);
  EXPECT_EQ(j.at("waiters"), 3);
  EXPECT_TRUE(j.at("queue")[0].at("owner").is_string());
  const auto text = dlock_cli({"--url", url(), "status", key("f")}).output;
  EXPECT_NE(text.find("kind     fair"), std::string::npos) << text;
  EXPECT_NE(text.find("queue    " + j.at("queue")[0].at("owner").get<std::string>()),
            std::string::npos)
      << text;
  first.signal(SIGTERM);
  EXPECT_EQ(first.wait(), 0);
  for (auto& w : waiters)
    EXPECT_EQ(w.wait(), 0) << w.drain();
  client c(url());
  std::vector<std::string> order;
  const auto list = c.redis().command({"LRANGE", key("order"), "0", "-1"});  // outlives the loop
  for (const auto& e : list.elements())
    order.push_back(e.str());
  EXPECT_EQ(order, (std::vector<std::string>{"1", "2", "3"}));
}

TEST_F(CliSynchronizers, StatusAndLsRecogniseEveryKind) {
  client c(url());
  auto sem = spawn(concat({"sem", key("sem"), "--permits", "2", "--"}, holder));
  const auto ready = sem.wait_for("ready");
  ASSERT_TRUE(ready);
  const auto permit = ready->substr(ready->rfind(' ') + 1);
  auto fair = spawn(concat({"run", "--kind", "fair", key("fair"), "--"}, holder));
  auto read = spawn(concat({"run", "--kind", "read", key("rw"), "--"}, holder));
  ASSERT_TRUE(fair.wait_for("ready"));
  ASSERT_TRUE(read.wait_for("ready"));
  auto plain = c.reentrant(key("plain")).try_acquire();
  ASSERT_TRUE(c.semaphore(key("count")).try_set_permits(5));

  const auto s = status_json(key("sem"));
  EXPECT_EQ(s.at("kind"), "leased-semaphore");
  EXPECT_EQ(s.at("locked"), true);
  EXPECT_EQ(s.at("available"), 1);
  ASSERT_EQ(s.at("permits").size(), 1u) << s;
  EXPECT_EQ(s.at("permits")[0].at("id"), permit);
  EXPECT_GT(s.at("permits")[0].at("ttl_ms").get<std::int64_t>(), 1000);
  EXPECT_GT(s.at("fence").get<std::uint64_t>(), 0u);
  const auto text = dlock_cli({"--url", url(), "status", key("sem")}).output;
  EXPECT_NE(text.find("kind     leased semaphore"), std::string::npos) << text;
  EXPECT_NE(text.find("permits  1 free, 1 leased: " + permit), std::string::npos) << text;

  const auto n = status_json(key("count"));
  EXPECT_EQ(n.at("kind"), "semaphore-or-latch");
  EXPECT_EQ(n.at("count"), 5);
  EXPECT_EQ(n.at("locked"), false);
  EXPECT_NE(dlock_cli({"--url", url(), "status", key("count")})
                .output.find("semaphore or latch (count 5)"),
            std::string::npos);

  const auto f = status_json(key("fair"));  // nobody queued: looks like the reentrant lock
  EXPECT_TRUE(f.at("kind") == "fair" || f.at("kind") == "reentrant") << f;

  const auto ls = dlock_cli({"--url", url(), "ls", key("*"), "--json"});
  ASSERT_EQ(ls.code, 0) << ls.output;
  std::map<std::string, std::string> kinds;
  const auto listed = nlohmann::json::parse(ls.output);  // outlives the loop
  for (const auto& l : listed.at("locks"))
    kinds[l.at("name").get<std::string>()] = l.at("kind").get<std::string>();
  EXPECT_EQ(kinds[key("sem")], "leased-semaphore");
  EXPECT_EQ(kinds[key("rw")], "read-write");
  EXPECT_EQ(kinds[key("plain")], "reentrant");
  EXPECT_EQ(kinds.count(key("count")), 0u) << "never granted: no fencing counter";
  const auto table = dlock_cli({"--url", url(), "ls", key("*")});
  EXPECT_NE(table.output.find("leased semaphore"), std::string::npos) << table.output;
  EXPECT_NE(table.output.find("read: "), std::string::npos) << table.output;

  for (auto* p : {&sem, &fair, &read}) {
    p->signal(SIGTERM);
    EXPECT_EQ(p->wait(), 0);
  }
}

}  // namespace
}  // namespace dlock::testing
