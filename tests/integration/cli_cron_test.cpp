// `dlock run` as cron jobs use it: --min-hold (ShedLock's lockAtLeastFor), --max-hold,
// --conflict-exit-code (flock -E) and -c STRING (flock -c), against a real redis-server.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "cli_support.hpp"
#include "dlock/dlock.hpp"

namespace dlock::testing {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

class CliCron : public Cli {
 protected:
  void SetUp() override {
    Cli::SetUp();
    dir_ = std::filesystem::temp_directory_path() /
           ("dlock-cli-cron-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
    Cli::TearDown();
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  bool locked(const std::string& name) { return client(url()).reentrant(key(name)).is_locked(); }
  /// Waits (bounded) for something another process makes true.
  template <class Check>
  static void wait_until(Check done, std::chrono::milliseconds limit = 30s) {
    const auto deadline = steady::now() + limit;
    while (!done()) {
      ASSERT_TRUE(steady::now() < deadline) << "the condition never came true";
      std::this_thread::sleep_for(5ms);
    }
  }
  /// The number a command wrote to `file`, once it has written all of it (a line).
  static pid_t pid_in(const std::string& file) {
    pid_t pid = 0;
    wait_until([&] {
      std::ifstream in(file);
      std::string line;
      return std::getline(in, line) && !in.eof() && (pid = std::stoi(line)) > 0;
    });
    return pid;
  }
  static bool alive(pid_t pid) { return ::kill(pid, 0) == 0; }
  static std::string output_and_status(child_process& run) {
    auto out = run.drain();
    return out + " (exit status " + std::to_string(run.wait()) + ")";
  }

  std::filesystem::path dir_;
};

TEST_F(CliCron, MinHoldKeepsTheLockAfterACommandThatExitsAtOnce) {
  const auto done = path("done");
  const auto started = steady::now();
  auto run = start({"--min-hold", "3s", key("m"), "--", "sh", "-c", "echo ran > " + done});
  wait_until([&] { return std::filesystem::exists(done); });
  // The command has ended; the lock is still held, so another run on the name is turned away.
  const auto other = dlock_cli(run_args({"--wait", "0", key("m"), "--", "echo", "second"}));
  EXPECT_EQ(other.code, 75) << other.output;
  EXPECT_EQ(other.output.find("second"), std::string::npos) << other.output;
  EXPECT_FALSE(run.try_wait()) << "dlock ended before --min-hold had passed";
  EXPECT_EQ(run.wait(), 0) << run.drain();
  const auto took = steady::now() - started;
  EXPECT_GE(took, 3s);
  EXPECT_LT(took, 30s);
  EXPECT_FALSE(locked("m")) << "released once --min-hold had passed";
}

TEST_F(CliCron, AZeroMinHoldAddsNoWait) {
  const auto started = steady::now();
  EXPECT_EQ(dlock_cli(run_args({"--min-hold", "0s", key("z"), "--", "sh", "-c", "exit 4"})).code,
            4);
  EXPECT_LT(steady::now() - started, 30s);
  EXPECT_FALSE(locked("z"));
}

TEST_F(CliCron, ASigtermDuringMinHoldReleasesAtOnce) {
  const auto done = path("done");
  const auto started = steady::now();
  auto run = start({"--min-hold", "10m", key("t"), "--", "sh", "-c", "echo ran > " + done});
  wait_until([&] { return std::filesystem::exists(done); });
  wait_until([&] { return locked("t"); });
  run.signal(SIGTERM);
  EXPECT_EQ(run.wait(), 128 + SIGTERM);
  EXPECT_LT(steady::now() - started, 5min);
  EXPECT_FALSE(locked("t"));
}

TEST_F(CliCron, ALeaseLostDuringMinHoldExits76) {
  const auto done = path("done");
  auto run =
      start({"--ttl", "1s", "--min-hold", "10m", key("l"), "--", "sh", "-c", "echo ran > " + done});
  wait_until([&] { return std::filesystem::exists(done); });
  client(url()).reentrant(key("l")).force_unlock();
  const auto output = run.drain();
  EXPECT_EQ(run.wait(), 76) << output;
  EXPECT_NE(output.find("before --min-hold had passed"), std::string::npos) << output;
}

TEST_F(CliCron, MaxHoldStopsTheCommandAndEverythingItStarted) {
  const auto pids = path("pids");
  // The shell's own pid and its background child's, one line each.
  auto run = start({"--max-hold", "1s", "--grace", "5s", key("x"), "--", "sh", "-c",
                    "sleep 60 & echo $$ > " + pids + ".tmp; echo $! >> " + pids + ".tmp; mv " +
                        pids + ".tmp " + pids + "; wait"});
  wait_until([&] { return std::filesystem::exists(pids); });
  std::vector<pid_t> tree;
  {
    std::ifstream in(pids);
    for (pid_t p; in >> p;)
      tree.push_back(p);
  }
  ASSERT_EQ(tree.size(), 2u);
  const auto line = run.wait_for("dlock: ");
  ASSERT_TRUE(line) << output_and_status(run);
  EXPECT_EQ(*line, "dlock: " + key("x") + " held for 1s (--max-hold): stopping the command");
  EXPECT_EQ(run.wait(), 79) << run.drain();
  for (pid_t p : tree)
    EXPECT_FALSE(alive(p)) << p << " outlived --max-hold";
  EXPECT_FALSE(locked("x"));
}

TEST_F(CliCron, ACommandEndingBeforeMaxHoldKeepsItsStatus) {
  EXPECT_EQ(dlock_cli(run_args({"--max-hold", "1m", key("q"), "--", "sh", "-c", "exit 5"})).code,
            5);
  EXPECT_FALSE(locked("q"));
}

TEST_F(CliCron, ConflictExitCodeReplaces75Only) {
  client c(url());
  auto held = c.reentrant(key("c")).try_acquire();
  ASSERT_TRUE(held);
  const auto busy = dlock_cli(
      run_args({"--wait", "0", "--conflict-exit-code", "3", key("c"), "--", "echo", "ran"}));
  EXPECT_EQ(busy.code, 3) << busy.output;
  EXPECT_EQ(busy.output.find("ran"), std::string::npos) << busy.output;
  EXPECT_EQ(
      dlock_cli(run_args({"--wait", "0", "--conflict-exit-code", "0", key("c"), "--", "true"}))
          .code,
      0);
  held.release();
  EXPECT_EQ(
      dlock_cli(run_args({"--conflict-exit-code", "3", key("c"), "--", "sh", "-c", "exit 6"})).code,
      6);
  const auto unreachable = dlock_cli(
      {"--url", "redis://127.0.0.1:1", "run", "--conflict-exit-code", "3", "n", "--", "true"});
  EXPECT_EQ(unreachable.code, 69) << unreachable.output;
  // dlock sem shares it: no permit free.
  auto permit_holder = c.leased_semaphore(key("s"));
  ASSERT_TRUE(permit_holder.try_set_permits(1));
  auto permit = permit_holder.try_acquire();
  ASSERT_TRUE(permit);
  const auto sem = dlock_cli({"--url", url(), "sem", key("s"), "--permits", "1", "--wait", "0",
                              "--conflict-exit-code", "4", "--", "true"});
  EXPECT_EQ(sem.code, 4) << sem.output;
}

TEST_F(CliCron, ShellStringRunsThroughBinSh) {
  const auto out = path("out");
  const auto r = dlock_cli(run_args({key("sh"), "-c", "echo $((1+2)) > " + out + "; exit 7"}));
  EXPECT_EQ(r.code, 7) << r.output;
  std::ifstream in(out);
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text, "3");
  EXPECT_FALSE(locked("sh"));
  // --shell is its long name, and the shell gets the lock's environment.
  const auto env = dlock_cli(run_args({"--shell", "echo \"$DLOCK_NAME\"", key("sh")}));
  EXPECT_EQ(env.code, 0) << env.output;
  EXPECT_EQ(env.output, key("sh") + "\n");
}

TEST_F(CliCron, ShellStringUnderMaxHoldStopsTheShellsChildren) {
  const auto pid_file = path("pid");
  auto run = start({"--max-hold", "500ms", key("y"), "-c",
                    "sleep 60 & echo $! > " + pid_file + ".tmp; mv " + pid_file + ".tmp " +
                        pid_file + "; wait"});
  wait_until([&] { return std::filesystem::exists(pid_file); });
  const pid_t child = pid_in(pid_file);
  EXPECT_EQ(run.wait(), 79) << run.drain();
  EXPECT_FALSE(alive(child)) << "the shell's child outlived --max-hold";
  EXPECT_FALSE(locked("y"));
}

TEST_F(CliCron, UsageErrorsExit64WithOneLine) {
  const std::vector<std::vector<std::string>> cases = {
      run_args({key("u"), "-c", "true", "--", "true"}),  // both
      run_args({"--min-hold", "5s", "--max-hold", "1s", key("u"), "--", "true"}),
      run_args({"--conflict-exit-code", "300", key("u"), "--", "true"}),
      run_args({"--conflict-exit-code", "-1", key("u"), "--", "true"}),
      run_args({"--max-hold", "0", key("u"), "--", "true"}),
      run_args({"--min-hold", "soon", key("u"), "--", "true"}),
      run_args({key("u")}),  // neither
  };
  for (const auto& args : cases) {
    const auto r = dlock_cli(args);
    EXPECT_EQ(r.code, 64) << ::testing::PrintToString(args) << "\n" << r.output;
    EXPECT_EQ(line_count(r.output), 1u) << r.output;
    EXPECT_EQ(r.output.rfind("dlock: ", 0), 0u) << r.output;
  }
  EXPECT_FALSE(locked("u"));
}

// -vv logs every grant and release to stderr, beside the command's own output; without -v,
// nothing of the kind is printed.
TEST_F(CliCron, VerboseLogsGrantsAndReleasesToStderr) {
  const auto loud = dlock_cli(run_args({"-vv", key("v"), "--", "sh", "-c", "echo ran >&2"}));
  EXPECT_EQ(loud.code, 0) << loud.output;
  EXPECT_NE(loud.output.find("dlock: debug: reentrant lock '" + key("v") + "' acquired after "),
            std::string::npos)
      << loud.output;
  EXPECT_NE(loud.output.find("dlock: debug: reentrant lock '" + key("v") + "' released after "),
            std::string::npos)
      << loud.output;
  EXPECT_NE(loud.output.find("ran\n"), std::string::npos) << loud.output;
  const auto quiet = dlock_cli(run_args({key("v"), "--", "true"}));
  EXPECT_EQ(quiet.code, 0);
  EXPECT_EQ(quiet.output, "") << "nothing without -v";
  // -v leaves grants out (debug) but reports what an operator must read.
  const auto info = dlock_cli(run_args({"-v", key("v"), "--", "true"}));
  EXPECT_EQ(info.output, "") << info.output;
}

// -v reports a lease lost under the command as an error line naming the lock, before dlock's own
// verdict (exit 76).
TEST_F(CliCron, VerboseReportsALostLease) {
  const auto started = path("started");
  auto run = start({"-v", "--ttl", "600ms", "--grace", "1s", key("lost"), "--", "sh", "-c",
                    "touch " + started + "; sleep 30"});
  wait_until([&] { return std::filesystem::exists(started); });
  raw_redis(server().port())({"DEL", key("lost")});
  EXPECT_EQ(run.wait(), 76);
  const auto out = run.drain();
  EXPECT_NE(out.find("dlock: error: reentrant lock '" + key("lost") + "' LOST (not held)"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace dlock::testing
