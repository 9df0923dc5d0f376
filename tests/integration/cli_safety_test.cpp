// The command line under the conditions a red team tried: commands that leave processes behind,
// dlock itself paused past its lease, force-unlocking keys that are not locks, servers that
// restart, load, refuse or are replicas, names that are not UTF-8 or hold braces, newlines or a
// leading dash, and TLS misconfigured.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli_support.hpp"
#include "dlock/dlock.hpp"

namespace dlock::testing {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

class CliSafety : public Cli {
 protected:
  embedded::server_options options_for(std::size_t) const override {
    embedded::server_options o;
    o.extra_args = {"--enable-debug-command", "yes"};
    return o;
  }
  void SetUp() override {
    Cli::SetUp();
    dir_ = std::filesystem::temp_directory_path() /
           ("dlock-cli-safety-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    // A test that failed before releasing its FIFO leaves a reader blocked on it for good (a
    // descendant dlock did not, or could not, stop). Opening the FIFO for writing wakes a reader
    // blocked in its open; unlinking it keeps new readers out; closing it then ends every
    // reader's read at end-of-file. (O_RDWR never blocks on a FIFO under Linux.)
    for (const auto& f : fifos_) {
      const int fd = ::open(f.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
      ::unlink(f.c_str());
      if (fd >= 0) ::close(fd);
    }
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
    Cli::TearDown();
  }
  /// A FIFO the test writes to when a command may go on: the command waits for an event, not
  /// for a time.
  std::string fifo(const std::string& name) {
    const auto path = (dir_ / name).string();
    EXPECT_EQ(::mkfifo(path.c_str(), 0600), 0);
    fifos_.push_back(path);
    return path;
  }
  std::string path(const std::string& name) { return (dir_ / name).string(); }
  /// Waits (bounded) for a condition only the server or another process can make true; on
  /// timeout, fails with what `describe` says of the state reached.
  template <class Check>
  void wait_until(
      Check done, std::function<std::string()> describe = [] { return std::string(); },
      std::chrono::milliseconds limit = 30s) {
    const auto deadline = steady::now() + limit;
    while (!done()) {
      ASSERT_TRUE(steady::now() < deadline) << "the condition never came true" << describe();
      std::this_thread::sleep_for(5ms);
    }
  }
  /// Lets the command reading the FIFO go on. Fails, rather than blocking forever, when no
  /// reader opens it within 30 s (the command is gone: killed, say, after a lost lease).
  static void release_fifo(const std::string& path) {
    const auto deadline = steady::now() + 30s;
    int fd;
    while ((fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC)) < 0) {
      ASSERT_EQ(errno, ENXIO) << std::strerror(errno);  // ENXIO: no reader yet
      ASSERT_TRUE(steady::now() < deadline) << "nothing opened " << path << " to read it";
      std::this_thread::sleep_for(5ms);
    }
    EXPECT_EQ(::write(fd, "go\n", 3), 3);
    ::close(fd);
  }
  static bool alive(pid_t pid) { return ::kill(pid, 0) == 0; }
  /// For a dlock that ended too early: everything it printed, and its exit status.
  static std::string output_and_status(child_process& run) {
    auto out = run.drain();
    return out + " (exit status " + std::to_string(run.wait()) + ")";
  }
  /// Each thread of `pid`: its state letter and the kernel function it waits in.
  static std::string threads_of(pid_t pid) {
    std::string out;
    const auto task = "/proc/" + std::to_string(pid) + "/task";
    std::error_code ignored;
    for (const auto& t : std::filesystem::directory_iterator(task, ignored)) {
      const auto tid = t.path().filename().string();
      std::ifstream wchan(t.path() / "wchan");
      std::string where;
      std::getline(wchan, where);
      out += " [" + tid + " " + state_of(static_cast<pid_t>(std::stoi(tid))) + " " + where + "]";
    }
    return out;
  }
  /// The state letter of /proc/PID/stat ('T': stopped), or '?' if it is gone.
  static char state_of(pid_t pid) {
    std::string stat;
    try {
      std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
      stat.assign(std::istreambuf_iterator<char>(in), {});
    } catch (const std::ios_base::failure&) {
      return '?';  // gone between the open and the read, which libstdc++ throws for
    }
    const auto close = stat.rfind(')');
    return close == std::string::npos || close + 2 >= stat.size() ? '?' : stat[close + 2];
  }

  std::filesystem::path dir_;
  std::vector<std::string> fifos_;
};

TEST_F(CliSafety, TheLockIsHeldUntilEveryProcessTheCommandStartedHasExited) {
  const auto go = fifo("go");
  const auto out = path("late-write");
  // sh starts a grandchild that ignores SIGTERM and writes after the test lets it, then exits.
  // (Only if let: a FIFO closed by TearDown ends the read at end-of-file, with nothing written.)
  auto run = start({key("g"), "--", "sh", "-c",
                    "(trap '' TERM; read x < " + go + " && echo late > " + out + ") & exit 0"});
  const auto note = run.wait_for("dlock: the command exited (status 0)");
  ASSERT_TRUE(note) << "dlock must say it waits for what the command left running";
  client c(url());
  EXPECT_TRUE(c.reentrant(key("g")).is_locked()) << "released while a descendant still runs";
  release_fifo(go);
  EXPECT_EQ(run.wait(), 0);
  EXPECT_TRUE(std::filesystem::exists(out));
  EXPECT_FALSE(c.reentrant(key("g")).is_locked());
}

// dlock finds its descendants by reading /proc/PID/stat of every process. One that exits
// between the open and the read fails the read; that used to throw out of the scan and end
// dlock (exit 70) with the command's tree left running, first seen on a lost lease, where the
// tree is dying as it is scanned. Here: a scan per signal forwarded to what the command left
// running, thousands of them, while processes come and go on the machine. (Before the fix, dlock
// failed within 0.1-0.4 s in each of 5 runs.)
TEST_F(CliSafety, ScanningForDescendantsSurvivesProcessesThatExitMidScan) {
  const auto go = fifo("go");
  const auto pid_file = path("leftover");
  auto run = start(
      {key("scan"), "--", "sh", "-c",
       "(trap '' USR1; sh -c 'echo $PPID' > " + pid_file + "; read x < " + go + ") & exit 0"});
  ASSERT_TRUE(run.wait_for("dlock: the command exited (status 0)")) << output_and_status(run);
  pid_t leftover = 0;
  wait_until([&] { return std::ifstream(pid_file) >> leftover && leftover > 0; });
  // At the lowest priority, so that tests running beside this one do not starve.
  std::vector<child_process> churn;
  for (int i = 0; i < 2; ++i) {
    churn.emplace_back(
        std::vector<std::string>{"nice", "-n", "19", "sh", "-c", "while :; do /bin/true; done"});
  }
  // Each signal dlock reads is forwarded to the leftover (which ignores it) after a scan. Paced,
  // not a busy loop: dlock scans as fast as it can anyway, and signals sent meanwhile merge.
  std::optional<int> ended;
  const auto until = steady::now() + 2s;
  while (steady::now() < until && !(ended = run.try_wait())) {
    run.signal(SIGUSR1);
    std::this_thread::sleep_for(200us);
  }
  churn.clear();
  if (ended) {
    // Whatever ended it, dlock must not have left the leftover running without the lock.
    wait_until([&] { return state_of(leftover) == '?' || state_of(leftover) == 'Z'; });
    if (state_of(leftover) == 'S') ::kill(leftover, SIGKILL);  // not ours to leave behind
    FAIL() << "dlock ended during the scans, status " << *ended << ": " << run.drain();
  }
  release_fifo(go);
  EXPECT_EQ(run.wait(), 0) << run.drain();
}

TEST_F(CliSafety, ALostLeaseStopsEveryDescendantEvenThoseThatLeftTheGroup) {
  const auto pids = path("pids");
  // Two descendants: one in the command's group, one in a session of its own (setsid); both
  // ignore SIGTERM, so only the SIGKILL after --grace ends them.
  auto run = start({"--ttl", "1s", "--grace", "300ms", key("t"), "--", "sh", "-c",
                    "trap '' TERM; (trap '' TERM; echo $(sh -c 'echo $PPID') >> " + pids +
                        "; exec sleep 1000) & setsid sh -c 'trap \"\" TERM; echo $$ >> " + pids +
                        "; exec sleep 1000' & echo ready; wait"});
  ASSERT_TRUE(run.wait_for("ready")) << output_and_status(run);
  wait_until([&] {
    std::ifstream in(pids);
    return std::count(std::istreambuf_iterator<char>(in), {}, '\n') == 2;
  });
  std::vector<pid_t> descendants;
  {
    std::ifstream in(pids);
    for (pid_t p; in >> p;)
      descendants.push_back(p);
  }
  ASSERT_EQ(descendants.size(), 2u);
  for (pid_t p : descendants)
    ASSERT_TRUE(alive(p)) << p;
  client c(url());
  c.reentrant(key("t")).force_unlock();
  EXPECT_EQ(run.wait(), 76) << run.drain();
  for (pid_t p : descendants)
    EXPECT_FALSE(alive(p)) << "descendant " << p << " outlived the lock";
}

TEST_F(CliSafety, DlockPausedPastItsLeaseExits76EvenIfTheCommandSucceeded) {
  const auto go = fifo("go");
  auto run = start({"--ttl", "1s", key("p"), "--", "sh", "-c", "echo ready; read x < " + go});
  ASSERT_TRUE(run.wait_for("ready")) << output_and_status(run);
  run.signal(SIGSTOP);
  wait_until([&] { return state_of(run.pid()) == 'T'; });
  // The lease lapses while dlock is stopped; someone else takes and releases the lock.
  client c(url());
  raw_redis raw(server().port());
  wait_until([&] { return !c.reentrant(key("p")).is_locked(); },
             [&] {
               return " (PTTL " + raw({"PTTL", key("p")}).to_string() + ")";
             });
  auto other = c.reentrant(key("p")).try_acquire_for(10s);
  ASSERT_TRUE(other);
  other.release();
  // The command finishes successfully, unseen by the stopped dlock. Were dlock's lease lost
  // before the stop, the command would be gone and this would fail, not block.
  release_fifo(go);
  run.signal(SIGCONT);
  // Should dlock hang instead of exiting, say where each of its threads waits.
  wait_until([&] { return state_of(run.pid()) == 'Z'; }, [&] { return threads_of(run.pid()); });
  EXPECT_EQ(run.wait(), 76) << run.drain();
}

TEST_F(CliSafety, LostExitCodeTellsALostLockFromTheCommandsOwnStatus) {
  auto run = start({"--ttl", "1s", "--grace", "200ms", "--lost-exit-code", "99", key("x"), "--",
                    "sh", "-c", "echo ready; exec sleep 1000"});
  ASSERT_TRUE(run.wait_for("ready")) << output_and_status(run);
  client(url()).reentrant(key("x")).force_unlock();
  EXPECT_EQ(run.wait(), 99);
  EXPECT_EQ(
      dlock_cli(run_args({"--lost-exit-code", "99", key("y"), "--", "sh", "-c", "exit 76"})).code,
      76)
      << "the command's own 76 passes through";
}

TEST_F(CliSafety, UnlockForceDeletesOnlyLocks) {
  raw_redis raw(server().port());
  raw({"SET", key("session:42"), R"({"user":42,"cart":[1,2]})", "EX", "3600"});
  raw({"HSET", key("user:7"), "name", "Ada", "email", "ada@example.com"});
  raw({"RPUSH", key("queue"), "a", "b"});
  raw({"ZADD", key("ranks"), "1", "a"});
  // A fence counter, and (as it would be named) the counter of the lock "job".
  client c(url());
  c.reentrant(key("job")).try_acquire().release();
  const auto counter = keys_of_lock(key("job")).fence_counter;
  const auto fence = raw({"GET", counter}).str();
  // In a lock's layout, but without an expiry: refused unless the kind is confirmed.
  raw({"SET", key("no-ttl-token"), "0123456789abcdef0123456789abcdef"});
  raw({"HSET", key("no-ttl-hash"), "8743c9c0-0795-4907-87fd-6c719a6b4586:1", "1"});

  auto dump = [&](const std::string& k) { return raw({"DUMP", k}).to_string(); };
  const std::vector<std::pair<std::string, std::string>> refused = {
      {key("session:42"), "holds a string that is not a lock"},
      {key("user:7"), "holds a hash that is not a lock"},
      {key("queue"), "holds a list, not a lock"},
      {key("ranks"), "holds a sorted set, not a lock"},
      {counter, "holds a counter, not a lock"},
      {key("no-ttl-token"), "without an expiry"},
      {key("no-ttl-hash"), "without an expiry"},
  };
  for (const auto& [name, why] : refused) {
    const auto before = dump(name);
    const auto ttl = raw({"PTTL", name}).integer();
    const auto r = dlock_cli({"--url", url(), "unlock", "--force", name});
    EXPECT_EQ(r.code, 65) << name << ": " << r.output;
    EXPECT_EQ(line_count(r.output), 1u) << r.output;
    EXPECT_NE(r.output.find(why), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("nothing was deleted"), std::string::npos) << r.output;
    EXPECT_EQ(dump(name), before) << name << " changed";
    EXPECT_NEAR(static_cast<double>(raw({"PTTL", name}).integer()), static_cast<double>(ttl),
                2000.0);
  }
  EXPECT_EQ(raw({"GET", counter}).str(), fence);
  // The counter stays refused even when a kind is claimed for it.
  EXPECT_EQ(dlock_cli({"--url", url(), "unlock", "--force", "--kind", "simple", counter}).code, 65);
  // Confirming the kind deletes lock-shaped keys without expiry.
  EXPECT_EQ(
      dlock_cli({"--url", url(), "unlock", "--force", "--kind", "simple", key("no-ttl-token")})
          .code,
      0);
  EXPECT_EQ(
      dlock_cli({"--url", url(), "unlock", "--force", "--kind", "reentrant", key("no-ttl-hash")})
          .code,
      0);
  EXPECT_EQ(raw({"EXISTS", key("no-ttl-token"), key("no-ttl-hash")}).integer(), 0);
  // And real locks go, as before.
  auto held = c.simple(key("real")).try_acquire();
  ASSERT_TRUE(held);
  const auto r = dlock_cli({"--url", url(), "unlock", "--force", key("real")});
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("removed simple lock"), std::string::npos) << r.output;
}

// A forced unlock wakes a fair lock's first waiter, who listens on a channel of its own, whatever
// kind the operator named (none here): the waiter does not sleep until its next re-check.
TEST_F(CliSafety, UnlockForceWakesAFairLocksFirstWaiter) {
  client holder(url());
  auto held = holder.fair(key("f")).try_acquire({.lease_time = 120s});
  ASSERT_TRUE(held);
  auto patient = client_options::from_url(url());
  patient.max_recheck = 60s;
  patient.fair_waiter_lease = 60s;
  client waiter(patient);
  auto waiting =
      std::async(std::launch::async, [&] { return waiter.fair(key("f")).try_acquire_for(100s); });
  wait_until([&] { return holder.fair(key("f")).info().waiters == 1; });
  const auto r = dlock_cli({"--url", url(), "unlock", "--force", key("f")});
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("waiters woken"), std::string::npos) << r.output;
  ASSERT_EQ(waiting.wait_for(15s), std::future_status::ready) << "the first waiter slept on";
  EXPECT_TRUE(waiting.get());
}

// A fair waiter ended by a signal hands its place in the queue back as it leaves, as a --wait
// that ran out does: those behind it are not held up for a waiter lease.
TEST_F(CliSafety, AFairWaiterEndedBySigtermLeavesTheQueue) {
  client holder(url());
  auto held = holder.fair(key("q")).try_acquire({.lease_time = 120s});
  ASSERT_TRUE(held);
  const auto queue = derived_key("redisson_lock_queue", key("q"));
  raw_redis raw(server().port());
  auto run = start({"--kind", "fair", key("q"), "--", "true"});
  wait_until([&] { return raw({"LLEN", queue}).integer() == 1; });
  run.signal(SIGTERM);
  EXPECT_EQ(run.wait(), 128 + SIGTERM);
  EXPECT_EQ(raw({"LLEN", queue}).integer(), 0) << "the place was left in the queue";
  EXPECT_EQ(raw({"ZCARD", derived_key("redisson_lock_timeout", key("q"))}).integer(), 0);
}

TEST_F(CliSafety, AWaiterWithWaitSurvivesAServerRestart) {
  client c(url());
  auto held = c.reentrant(key("r")).try_acquire();
  ASSERT_TRUE(held);
  auto run = start({"--wait", "30s", key("r"), "--", "echo", "ran"});
  wait_until([&] { return c.reentrant(key("r")).waiting_clients() == 1; });
  server().kill();  // no persistence: the holder's lock goes with it
  server().start();
  EXPECT_TRUE(run.wait_for("ran", 30s));
  EXPECT_EQ(run.wait(), 0);
}

TEST_F(CliSafety, RunWithWaitStartsWhileTheServerIsStillStarting) {
  server().kill();
  auto run = start({"--wait", "30s", key("s"), "--", "echo", "ran"});
  server().start();
  EXPECT_TRUE(run.wait_for("ran", 30s));
  EXPECT_EQ(run.wait(), 0);
}

TEST_F(CliSafety, ErrorsNameTheServersOwnTextWithDocumentedExitCodes) {
  raw_redis raw(server().port());
  raw({"ACL", "SETUSER", "noscripts", "on", ">pw", "~*", "&*", "+@all", "-eval", "-evalsha"});
  const auto port = std::to_string(server().port());
  auto noperm = dlock_cli({"--url", "redis://noscripts:pw@127.0.0.1:" + port, "run", "--wait", "5s",
                           key("a"), "--", "true"});
  EXPECT_EQ(noperm.code, 77) << noperm.output;
  EXPECT_NE(noperm.output.find("NOPERM"), std::string::npos) << noperm.output;

  raw({"RPUSH", key("queue"), "x"});
  auto list = dlock_cli(run_args({"--wait", "5s", key("queue"), "--", "true"}));
  EXPECT_EQ(list.code, 65) << list.output;
  EXPECT_NE(list.output.find(key("queue") + "' holds a list, not a lock"), std::string::npos)
      << list.output;

  embedded::server_options replica_options;
  replica_options.extra_args = {"--replicaof", "127.0.0.1", port};
  embedded::redis_server replica(replica_options);
  auto ro = dlock_cli({"--url", replica.url(), "run", "--wait", "5s", key("b"), "--", "true"});
  EXPECT_EQ(ro.code, 69) << ro.output;
  EXPECT_NE(ro.output.find("READONLY"), std::string::npos) << ro.output;
  EXPECT_NE(ro.output.find("replica"), std::string::npos) << ro.output;

  raw({"CONFIG", "SET", "maxmemory", "1"});
  auto oom = dlock_cli(run_args({"--wait", "5s", key("c"), "--", "true"}));
  raw({"CONFIG", "SET", "maxmemory", "0"});
  EXPECT_EQ(oom.code, 70) << oom.output;
  EXPECT_NE(oom.output.find("OOM"), std::string::npos) << oom.output;
  for (const auto* r : {&noperm, &list, &ro, &oom})
    EXPECT_EQ(line_count(r->output), 1u) << r->output;
}

// Values no server could honour are usage errors (exit 64, one line) before anything is sent:
// an empty Sentinel master name (which left the URLs taken for plain servers, and the lock
// scripts sent to a sentinel), and counts past a 64-bit integer (which were clamped).
TEST_F(CliSafety, EmptyMasterNamesAndOversizedCountsAreUsageErrors) {
  const std::string too_big = "99999999999999999999";
  const std::vector<std::vector<std::string>> refused = {
      {"--sentinel", "", "--url", url(), "run", key("s"), "--", "true"},
      {"--url", url(), "sem", key("sem"), "--permits", too_big, "--", "true"},
      {"--url", url(), "sem", key("sem"), "--permits", "+3", "--", "true"},
      {"--url", url(), "latch", key("latch"), "set", too_big},
  };
  for (const auto& args : refused) {
    const auto r = dlock_cli(args);
    EXPECT_EQ(r.code, 64) << r.output;
    EXPECT_EQ(line_count(r.output), 1u) << r.output;
  }
  raw_redis raw(server().port());
  EXPECT_EQ(raw({"DBSIZE"}).integer(), 0) << "a refused command wrote something";
  // The largest count Redis stores is accepted.
  EXPECT_EQ(dlock_cli({"--url", url(), "latch", key("latch"), "set", "9223372036854775807"}).code,
            0);
  EXPECT_EQ(raw({"GET", key("latch")}).str(), "9223372036854775807");
}

// An ACL user without PUBLISH: only the wake-up messages are refused. A script used to fail
// after its writes, so a release that happened was reported unconfirmed, and a semaphore or a
// latch was created by a command that exited 77. Now each works and ends cleanly (waiters
// find a change at their next re-check).
TEST_F(CliSafety, AUserWithoutPublishLocksAndReleasesCleanly) {
  raw_redis raw(server().port());
  raw({"ACL", "SETUSER", "nopublish", "on", ">pw", "~*", "&*", "+@all", "-publish", "-spublish"});
  const auto as_user = "redis://nopublish:pw@127.0.0.1:" + std::to_string(server().port());
  const auto run = dlock_cli({"--url", as_user, "run", key("r"), "--", "true"});
  EXPECT_EQ(run.code, 0) << run.output;
  EXPECT_EQ(run.output, "");
  EXPECT_EQ(raw({"EXISTS", key("r")}).integer(), 0);
  const auto sem = dlock_cli({"--url", as_user, "sem", key("s"), "--permits", "2", "--", "true"});
  EXPECT_EQ(sem.code, 0) << sem.output;
  EXPECT_EQ(raw({"GET", key("s")}).str(), "2") << "the permit went back";
  EXPECT_EQ(dlock_cli({"--url", as_user, "latch", key("l"), "set", "1"}).code, 0);
  const auto down = dlock_cli({"--url", as_user, "latch", key("l"), "down"});
  EXPECT_EQ(down.code, 0) << down.output;
  EXPECT_EQ(raw({"EXISTS", key("l")}).integer(), 0);
}

TEST_F(CliSafety, JsonCarriesNamesThatAreNotUtf8) {
  const std::string name = key("caf\xe9-\xff");
  client c(url());
  auto held = c.reentrant(name).try_acquire();
  ASSERT_TRUE(held);
  const auto status = dlock_cli({"--url", url(), "status", name, "--json"});
  ASSERT_EQ(status.code, 0) << status.output;
  const auto j = nlohmann::json::parse(status.output);
  EXPECT_EQ(j.at("name"), key("caf\\xe9-\\xff"));
  EXPECT_TRUE(j.contains("name_base64"));
  const auto ls = dlock_cli({"--url", url(), "ls", "--json"});
  ASSERT_EQ(ls.code, 0) << ls.output;
  const auto locks = nlohmann::json::parse(ls.output).at("locks");
  ASSERT_EQ(locks.size(), 1u);
  EXPECT_EQ(locks[0].at("name_base64"), j.at("name_base64"));
}

TEST_F(CliSafety, NamesAreShownAsWrittenAndCannotForgeRows) {
  client c(url());
  const std::vector<std::string> names = {"job{", "lock:{}",    "}{x",  "{a}",
                                          "b",    "two\nlines", "-dash"};
  for (const auto& n : names) {
    auto l = c.reentrant(n).try_acquire();
    ASSERT_TRUE(l) << n;
    l.release();
  }
  raw_redis raw(server().port());
  EXPECT_EQ(raw({"EXISTS", "redisson_lock_token:job{", "redisson_lock_token:lock:{}",
                 "redisson_lock_token:}{x"})
                .integer(),
            3);
  // Released, they are free names: listed with --all.
  const auto ls = dlock_cli({"--url", url(), "ls", "--all", "--json"});
  ASSERT_EQ(ls.code, 0) << ls.output;
  std::set<std::string> listed;
  const auto parsed = nlohmann::json::parse(ls.output);
  for (const auto& l : parsed.at("locks"))
    listed.insert(l.at("name").get<std::string>());
  // "{a}" and "a" share their keys under Redisson's rule; the plain name is listed.
  EXPECT_EQ(listed,
            (std::set<std::string>{"-dash", "a", "b", "job{", "lock:{}", "two\nlines", "}{x"}))
      << ls.output;
  const auto table = dlock_cli({"--url", url(), "ls", "--all"});
  EXPECT_EQ(line_count(table.output), 1 + listed.size()) << table.output;
  EXPECT_NE(table.output.find("two\\nlines"), std::string::npos) << table.output;
}

TEST_F(CliSafety, OptionsGoAnywhereBeforeTheCommandAndDashNamesAfterDoubleDash) {
  EXPECT_EQ(dlock_cli({"status", key("n"), "--url", url()}).code, 0);
  EXPECT_EQ(dlock_cli({"run", key("n"), "--url", url(), "--", "true"}).code, 0);
  EXPECT_EQ(dlock_cli({"run", "--url", url(), "--wait", "5s", key("n"), "--", "true"}).code, 0);
  const auto dash =
      dlock_cli({"--url", url(), "run", "--", "-dash", "--", "sh", "-c", "echo \"$DLOCK_NAME\""});
  EXPECT_EQ(dash.code, 0) << dash.output;
  EXPECT_EQ(dash.output, "-dash\n");
  EXPECT_EQ(dlock_cli({"--url", url(), "status", "--", "-dash"}).code, 0);
  const auto passthrough = dlock_cli(run_args({key("n"), "--", "sh", "-c", "echo $#", "x", "--"}));
  EXPECT_EQ(passthrough.output, "1\n") << "a second -- belongs to the command";
}

TEST_F(CliSafety, TlsMisconfigurationsSayWhatIsWrong) {
  const auto port = std::to_string(server().port());
  const auto plain =
      dlock_cli({"--url", "rediss://127.0.0.1:" + port + "?verify=none&connect_timeout=500ms",
                 "status", "n"});
  EXPECT_EQ(plain.code, 69) << plain.output;
  EXPECT_NE(plain.output.find("TLS handshake"), std::string::npos) << plain.output;
  const auto key_only =
      dlock_cli({"--url", "rediss://127.0.0.1:" + port + "?key=/etc/hostname", "status", "n"});
  EXPECT_EQ(key_only.code, 64) << key_only.output;
  EXPECT_NE(key_only.output.find("'key' needs 'cert'"), std::string::npos) << key_only.output;
  test_ca ca(dir_.string());
  const auto cert_only =
      dlock_cli({"--url", "rediss://127.0.0.1:" + port + "?cert=" + ca.client_cert, "status", "n"});
  EXPECT_NE(cert_only.output.find("key= was not given"), std::string::npos) << cert_only.output;
  EXPECT_EQ(cert_only.output.find("''"), std::string::npos) << cert_only.output;
}

}  // namespace
}  // namespace dlock::testing
