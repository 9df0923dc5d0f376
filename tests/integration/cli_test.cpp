// The dlock command line, black-box: the built binary is spawned and judged by its exit codes,
// its output and what it leaves in Redis.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dirent.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "cli_support.hpp"
#include "dlock/dlock.hpp"
#include "prometheus_text.hpp"

namespace dlock::testing {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

TEST_F(Cli, UsageErrorsExit64WithOneLine) {
  const std::vector<std::vector<std::string>> cases = {
      {"run", "--bogus", "x", "--", "true"},
      {"--url", url(), "run", "--wait", "10x", "n", "--", "true"},
      {"--url", url(), "run", "--ttl", "-1s", "n", "--", "true"},
      {"--url", "http://nope", "run", "n", "--", "true"},
      {"--url", url(), "run", "n", "true"},                               // missing --
      {"--url", url(), "run", "n", "--"},                                 // nothing to run
      {"--url", url(), "run", "--kind", "fair", "n", "m", "--", "true"},  // one name only
      {"--url", url(), "--url", url(), "run", "n", "--", "true"},         // RedLock: reserved
      {"--url", url(), "unlock", "n"},                                    // --force required
      {"--url", url(), "status"},
      {"frobnicate"},
      {},
  };
  for (const auto& args : cases) {
    const auto r = dlock_cli(args);
    EXPECT_EQ(r.code, 64) << ::testing::PrintToString(args) << "\n" << r.output;
    EXPECT_EQ(line_count(r.output), 1u) << r.output;
    EXPECT_EQ(r.output.rfind("dlock: ", 0), 0u) << r.output;
  }
}

TEST_F(Cli, HelpAndVersion) {
  const auto version = dlock_cli({"--version"});
  EXPECT_EQ(version.code, 0);
  EXPECT_EQ(version.output, std::string("dlock ") + dlock::version + "\n");
  const auto help = dlock_cli({"--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.output.find("Exit codes"), std::string::npos);
  for (const char* cmd : {"run", "status", "ls", "unlock"}) {
    const auto h = dlock_cli({cmd, "--help"});
    EXPECT_EQ(h.code, 0) << cmd;
    EXPECT_NE(h.output.find("Example"), std::string::npos) << cmd << ": " << h.output;
  }
}

TEST_F(Cli, UnreachableServerExits69) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--url", "redis://127.0.0.1:1", "run", "n", "--", "true"},
           {"--url", "redis://127.0.0.1:1", "status", "n"},
       }) {
    const auto r = dlock_cli(args);
    EXPECT_EQ(r.code, 69) << r.output;
    EXPECT_EQ(line_count(r.output), 1u) << r.output;
  }
  // The URL may come from the environment.
  EXPECT_EQ(dlock_cli({"status", "n"}, {"DLOCK_URL=redis://127.0.0.1:1"}).code, 69);
  EXPECT_EQ(dlock_cli({"status", "n"}, {"DLOCK_URL=" + url()}).code, 0);
}

TEST_F(Cli, NotAcquiredWithinTheWaitExits75) {
  client c(url());
  auto held = c.reentrant(key("job")).try_acquire();
  ASSERT_TRUE(held);
  auto once = dlock_cli(run_args({"--wait", "0", key("job"), "--", "echo", "ran"}));
  EXPECT_EQ(once.code, 75);
  EXPECT_EQ(once.output.find("ran"), std::string::npos) << "the command must not run";
  auto timed = dlock_cli(run_args({"--wait", "300ms", key("job"), "--", "echo", "ran"}));
  EXPECT_EQ(timed.code, 75);
  EXPECT_NE(timed.output.find("not acquired within 300ms"), std::string::npos) << timed.output;
  auto simple = c.simple(key("s")).try_acquire();
  EXPECT_EQ(dlock_cli(run_args({"--kind", "simple", "--wait", "0", key("s"), "--", "true"})).code,
            75);
}

TEST_F(Cli, ExitStatusOfTheCommandIsPassedThrough) {
  EXPECT_EQ(dlock_cli(run_args({key("a"), "--", "sh", "-c", "exit 7"})).code, 7);
  EXPECT_EQ(dlock_cli(run_args({key("a"), "--", "sh", "-c", "kill -TERM $$"})).code, 128 + SIGTERM);
  EXPECT_EQ(dlock_cli(run_args({key("a"), "--", "/nonexistent/program"})).code, 127);
  EXPECT_EQ(dlock_cli(run_args({key("a"), "--", "/etc/passwd"})).code, 126);
  client c(url());
  EXPECT_FALSE(c.reentrant(key("a")).is_locked()) << "released after every run";
}

TEST_F(Cli, CommandSeesTheLockNameAndAnIncreasingFencingToken) {
  std::uint64_t last = 0;
  for (int i = 0; i < 3; ++i) {
    const auto r =
        dlock_cli(run_args({key("job"), "--", "sh", "-c", "echo \"$DLOCK_NAME $DLOCK_FENCE\""}));
    ASSERT_EQ(r.code, 0) << r.output;
    const auto space = r.output.find(' ');
    EXPECT_EQ(r.output.substr(0, space), key("job"));
    const auto fence = std::stoull(r.output.substr(space + 1));
    EXPECT_GT(fence, last);
    last = fence;
  }
}

TEST_F(Cli, SignalsAreForwardedToTheCommand) {
  auto run = start({key("job"), "--", "sh", "-c",
                    "trap 'echo got-term; exit 3' TERM; echo ready; "
                    "while :; do sleep 0.05; done"});
  ASSERT_TRUE(run.wait_for("ready"));
  run.signal(SIGTERM);
  EXPECT_TRUE(run.wait_for("got-term"));
  EXPECT_EQ(run.wait(), 3);
  client c(url());
  EXPECT_FALSE(c.reentrant(key("job")).is_locked());
}

TEST_F(Cli, LosingTheLeaseStopsTheCommandAndExits76) {
  auto run = start({"--ttl", "2s", key("job"), "--", "sh", "-c", "echo ready; exec sleep 60"});
  ASSERT_TRUE(run.wait_for("ready"));
  const auto removed = dlock_cli({"--url", url(), "unlock", "--force", key("job")});
  const auto unlocked = steady::now();
  EXPECT_EQ(removed.code, 0);
  EXPECT_NE(removed.output.find("removed reentrant lock " + key("job")), std::string::npos)
      << removed.output;
  const auto message = run.wait_for("dlock: lost the lock");
  ASSERT_TRUE(message);
  EXPECT_EQ(run.wait(), 76);
  EXPECT_LT(steady::now() - unlocked, 2s) << "noticed within the lease";
  EXPECT_NE(dlock_cli({"--url", url(), "unlock", "--force", key("job")}).output.find("nothing"),
            std::string::npos);
}

TEST_F(Cli, ACommandThatIgnoresSigtermIsKilledAfterTheGrace) {
  auto run = start({"--ttl", "1s", "--grace", "300ms", key("job"), "--", "sh", "-c",
                    "trap '' TERM; echo ready; while :; do sleep 0.05; done"});
  ASSERT_TRUE(run.wait_for("ready"));
  client c(url());
  c.reentrant(key("job")).force_unlock();
  EXPECT_EQ(run.wait(), 76);
}

TEST_F(Cli, StatusAndLsPrintTheDocumentedJson) {
  client c(url());
  auto held = c.reentrant(key("busy")).try_acquire({.lease_time = 60s});
  auto again = c.reentrant(key("busy")).try_acquire();
  ASSERT_TRUE(held && again);
  c.simple(key("done")).try_acquire().release();  // known (it has a fencing counter), now free

  const auto status = dlock_cli({"--url", url(), "status", key("busy"), "--json"});
  ASSERT_EQ(status.code, 0) << status.output;
  const auto j = nlohmann::json::parse(status.output);
  EXPECT_EQ(j.at("name"), key("busy"));
  EXPECT_EQ(j.at("kind"), "reentrant");
  EXPECT_EQ(j.at("locked"), true);
  ASSERT_EQ(j.at("holders").size(), 1u);
  EXPECT_EQ(j.at("holders")[0].at("owner").get<std::string>().rfind(c.id(), 0), 0u);
  EXPECT_EQ(j.at("holders")[0].at("holds"), 2);
  EXPECT_GT(j.at("ttl_ms").get<std::int64_t>(), 50'000);
  EXPECT_EQ(j.at("fence"), held.fence());
  EXPECT_EQ(j.at("waiters"), 0);

  const auto free =
      nlohmann::json::parse(dlock_cli({"--url", url(), "status", key("nothing"), "--json"}).output);
  EXPECT_EQ(free.at("kind"), "free");
  EXPECT_EQ(free.at("locked"), false);
  EXPECT_TRUE(free.at("ttl_ms").is_null());
  EXPECT_TRUE(free.at("holders").empty());

  // By default only what is in use; --all adds the free names.
  const auto in_use = dlock_cli({"--url", url(), "ls", key("*"), "--json"});
  ASSERT_EQ(in_use.code, 0) << in_use.output;
  const auto held_only = nlohmann::json::parse(in_use.output).at("locks");
  ASSERT_EQ(held_only.size(), 1u) << in_use.output;
  EXPECT_EQ(held_only[0].at("name"), key("busy"));
  const auto ls = dlock_cli({"--url", url(), "ls", key("*"), "--all", "--json"});
  ASSERT_EQ(ls.code, 0) << ls.output;
  const auto locks = nlohmann::json::parse(ls.output).at("locks");
  ASSERT_EQ(locks.size(), 2u) << ls.output;
  EXPECT_EQ(locks[0].at("name"), key("busy"));
  EXPECT_EQ(locks[0].at("locked"), true);
  EXPECT_EQ(locks[1].at("name"), key("done"));
  EXPECT_EQ(locks[1].at("locked"), false);
  EXPECT_EQ(nlohmann::json::parse(dlock_cli({"--url", url(), "ls", "nomatch*", "--json"}).output)
                .at("locks")
                .size(),
            0u);
  const auto table = dlock_cli({"--url", url(), "ls"});
  EXPECT_NE(table.output.find("NAME"), std::string::npos);
  EXPECT_NE(table.output.find(key("busy")), std::string::npos);
  const auto human = dlock_cli({"--url", url(), "status", key("busy")});
  EXPECT_NE(human.output.find("reentrant"), std::string::npos);
}

class CliContention : public Cli, public ::testing::WithParamInterface<std::string> {};
INSTANTIATE_TEST_SUITE_P(Kinds, CliContention, ::testing::Values("reentrant", "simple"),
                         [](const auto& param_info) { return param_info.param; });

TEST_P(CliContention, TwentyConcurrentRunsNeverLoseAnUpdate) {
  const auto file = server().dir() + "/counter";
  std::ofstream(file) << "0\n";
  std::vector<child_process> runs;
  for (int i = 0; i < 20; ++i) {
    runs.push_back(start({"--kind", GetParam(), key("job"), "--", "sh", "-c",
                          "n=$(cat \"$1\"); echo $((n+1)) > \"$1\"", "sh", file}));
  }
  for (auto& r : runs)
    EXPECT_EQ(r.wait(), 0) << r.drain();
  std::string value;
  std::ifstream(file) >> value;
  EXPECT_EQ(value, "20");
}

// The tour runs end to end and leaves nothing behind: this test process adopts (as a child
// subreaper) anything the tour orphans, so a leftover would show up among our children.
TEST(CliDemo, TourRunsAndLeavesNoProcessBehind) {
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  const auto r = dlock_cli({"demo"});
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("counter = 5"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rejected"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tour finished"), std::string::npos) << r.output;
  // What the tour killed may linger as zombies we adopted: reap those (they are not running).
  int status = 0;
  while (::waitpid(-1, &status, WNOHANG) > 0) {
  }
  std::string children;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream in(task.path() / "children");
    std::string more;
    std::getline(in, more);
    children += more;
  }
  EXPECT_EQ(children, "") << "left behind: " << children;
  ::prctl(PR_SET_CHILD_SUBREAPER, 0);
}

// On a machine with Valkey and no Redis, the tour runs on a private valkey-server. The machine is
// made so for the tour alone: its PATH is a directory of links to every program on ours but
// Redis's own.
TEST(CliDemo, TourRunsOnValkeyWhereRedisIsNotInstalled) {
  if (!embedded::server_available("valkey-server"))
    GTEST_SKIP() << "valkey-server is not installed";
  const auto dir =
      std::filesystem::temp_directory_path() / ("dlock-valkey-only-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string path = std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin";
  for (std::size_t start = 0; start <= path.size();) {
    const auto end = std::min(path.find(':', start), path.size());
    std::error_code ec;
    for (const auto& entry :
         std::filesystem::directory_iterator(path.substr(start, end - start), ec)) {
      const auto name = entry.path().filename().string();
      if (name.starts_with("redis-")) continue;
      std::filesystem::create_symlink(entry.path(), dir / name, ec);  // the first on PATH wins
    }
    start = end + 1;
  }
  ASSERT_FALSE(std::filesystem::exists(dir / "redis-server"));
  const auto r = dlock_cli({"demo"}, {"PATH=" + dir.string(), "DLOCK_TEST_SERVER="});
  std::filesystem::remove_all(dir);
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("private valkey-server on 127.0.0.1:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tour finished"), std::string::npos) << r.output;
}

// `dlock bench` on its own private server prints the documented JSON (and, when gnuplot is
// installed, draws its charts). Speed is not judged; usage errors exit 64 with one line.
TEST(CliBench, PrintsTheDocumentedJsonAndDrawsCharts) {
  if (!embedded::server_available()) GTEST_SKIP() << "redis-server is not installed";
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"bench", "nosuch"}, {"bench", "--seconds", "0"}, {"bench", "--seconds", "x"}}) {
    const auto r = dlock_cli(args);
    EXPECT_EQ(r.code, 64) << r.output;
    EXPECT_EQ(line_count(r.output), 1u) << r.output;
  }
  // Results on stdout only: progress goes to stderr, which is not captured here.
  const auto bench = [](std::vector<std::string> args, std::vector<std::string> env = {}) {
    args.insert(args.begin(), DLOCK_CLI);
    child_process p(args, {.capture_stdout = true, .env = std::move(env)});
    auto output = p.drain();
    return outcome{p.wait(120s), std::move(output)};
  };
  const auto check = [](const nlohmann::json& j) {
    const auto& rows = j.at("scenarios");
    ASSERT_TRUE(rows.is_array());
    ASSERT_FALSE(rows.empty());
    for (const auto& row : rows) {
      EXPECT_EQ(row.at("name").get<std::string>().rfind("uncontended.", 0), 0u) << row;
      EXPECT_TRUE(row.at("metric").is_string()) << row;
      EXPECT_TRUE(row.at("dlock").is_number()) << row;
      EXPECT_TRUE(row.at("reference").is_number()) << row;
      EXPECT_TRUE(row.at("reference_name").is_string()) << row;
      EXPECT_TRUE(row.at("ratio").is_number()) << row;
      EXPECT_TRUE(row.at("latency_us").at("dlock").at("p99").is_number()) << row;
      EXPECT_TRUE(row.at("latency_us").at("reference").at("p50").is_number()) << row;
    }
  };
  char metrics_file[] = "/tmp/dlock-bench-metrics-XXXXXX";
  ASSERT_GE(::mkstemp(metrics_file), 0);
  const auto r =
      bench({"bench", "uncontended", "--seconds", "0.2", "--json", "--metrics", metrics_file});
  ASSERT_EQ(r.code, 0) << r.output;
  check(nlohmann::json::parse(r.output));
  // --metrics: the run's client in Prometheus's text, as its own parser reads it.
  std::ifstream in(metrics_file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::remove(metrics_file);
  const auto samples = parsed_by_prometheus(text);
  ASSERT_TRUE(samples.count("dlock_grants_total {}")) << text;
  EXPECT_GT(samples.at("dlock_grants_total {}"), 0);
  EXPECT_TRUE(samples.count(
      R"(dlock_acquisitions_total {"kind": "reentrant", "outcome": "granted", "prefix": "dlock-bench"})"))
      << text;

  if (!embedded::server_available("gnuplot")) {
    std::cout << "gnuplot is not installed: --plot not checked\n";
    return;
  }
  char tmpl[] = "/tmp/dlock-bench-plot-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = std::string(tmpl) + "/charts";  // created by dlock
  // DLOCK_URL does not send bench to a server: an unreachable one changes nothing.
  const auto plotted = bench({"bench", "uncontended", "--seconds", "0.2", "--json", "--plot", dir},
                             {"DLOCK_URL=redis://127.0.0.1:1"});
  EXPECT_EQ(plotted.code, 0) << plotted.output;
  if (plotted.code == 0) {
    const auto j = nlohmann::json::parse(plotted.output);
    check(j);
    const std::string png = dir + "/latency_uncontended.png";
    EXPECT_EQ(j.at("plots"), nlohmann::json::array({png}));
    EXPECT_GT(std::filesystem::file_size(png), 0u);
    EXPECT_TRUE(std::filesystem::exists(dir + "/latency_uncontended.gp"));
    EXPECT_TRUE(std::filesystem::exists(dir + "/latency_uncontended.dat"));
  }
  std::filesystem::remove_all(tmpl);
}

}  // namespace
}  // namespace dlock::testing

namespace dlock::testing {
namespace {

// A smoke test: the marketplace runs every variant at every load and prints the documented JSON.
// What the numbers say is for docs/benchmarks.md, never a pass/fail here.
TEST(CliMarket, RunsEveryRowAndPrintsTheDocumentedJson) {
  const auto r = dlock_cli({"market", "--seconds", "0.3", "--json"});
  ASSERT_EQ(r.code, 0) << r.output;
  const auto start = r.output.find('{');
  ASSERT_NE(start, std::string::npos) << r.output;
  const auto j = nlohmann::json::parse(r.output.substr(start));
  const auto& rows = j.at("rows");
  ASSERT_EQ(rows.size(), 21u);  // 7 variants x 3 loads
  std::set<std::string> variants;
  for (const auto& row : rows) {
    for (const char* field :
         {"variant", "listers", "buyers", "seconds", "listed", "bought", "retries", "stale",
          "timeouts", "wait_ms_a", "wait_ms_b", "p50_ms", "p99_ms"}) {
      EXPECT_TRUE(row.contains(field)) << field;
    }
    variants.insert(row.at("variant").get<std::string>());
  }
  EXPECT_EQ(variants, (std::set<std::string>{"watch", "book-lock", "book-fine", "dlock-coarse",
                                             "dlock-fine", "no-lock", "script"}));
  // One ratio entry per load: dlock-fine over book-fine and over no-lock (listed+bought/s).
  const auto& ratios = j.at("ratios");
  ASSERT_EQ(ratios.size(), 3u);
  for (const auto& x : ratios) {
    for (const char* field :
         {"listers", "buyers", "dlock_fine_per_s", "book_fine_per_s", "no_lock_per_s",
          "dlock_fine_over_book_fine", "dlock_fine_over_no_lock"}) {
      EXPECT_TRUE(x.contains(field)) << field;
    }
  }
  // no-lock is unsafe by design: its audit reports what it found and says so.
  for (const auto& run : j.at("choices").at("runs")) {
    if (run.at("variant") != "no-lock") continue;
    EXPECT_EQ(run.at("unsafe_by_design"), true);
    EXPECT_TRUE(run.contains("double_sold"));
    EXPECT_TRUE(run.contains("items_in_several_inventories"));
  }
  EXPECT_TRUE(j.at("choices").is_object());
  // A shared server is never flushed without being asked to.
  const auto refused = dlock_cli({"--url", "redis://127.0.0.1:1", "market", "--seconds", "1"});
  EXPECT_EQ(refused.code, 64) << refused.output;
}

}  // namespace
}  // namespace dlock::testing

namespace dlock::testing {
namespace {

// If dlock itself dies, its lease lapses: the command must not go on without the lock.
TEST_F(Cli, TheCommandDiesWithDlock) {
  auto run = start({key("job"), "--", "sh", "-c", "echo ready $$; exec sleep 60"});
  const auto ready = run.wait_for("ready");
  ASSERT_TRUE(ready);
  const pid_t command = static_cast<pid_t>(std::stol(ready->substr(6)));
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, command, 0));
  ASSERT_GE(pidfd, 0) << "the command is not running";
  run.signal(SIGKILL);
  EXPECT_EQ(run.wait(), 128 + SIGKILL);
  pollfd p{pidfd, POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 10'000), 1) << "the command outlived dlock";
  ::close(pidfd);
}

}  // namespace
}  // namespace dlock::testing
