// `dlock watch`, black-box: its JSON events, its plain table, and its terminal view driven
// through tmux, against a real redis-server and real `dlock run` holders.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_support.hpp"
#include "deployment_test.hpp"
#include "dlock/dlock.hpp"
#include "polling.hpp"

namespace dlock::testing {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

class CliWatch : public Cli {
 protected:
  void SetUp() override {
    Cli::SetUp();
    char dir[] = "/tmp/dlock-watch-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override {
    std::filesystem::remove_all(dir_);
    Cli::TearDown();
  }
  /// A shell command that says "ready" and runs until `file` exists.
  static std::vector<std::string> until_file(const std::string& file) {
    return {
        "sh", "-c",
        std::string("echo ready; while [ ! -e '").append(file).append("' ]; do sleep 0.02; done")};
  }
  std::string dir_;
};

// Keyspace notifications on: acquisitions show at once, not at the next re-scan.
class CliWatchNotified : public CliWatch {
 protected:
  embedded::server_options options_for(std::size_t) const override {
    embedded::server_options o;
    o.extra_args = {"--notify-keyspace-events", "KA"};
    return o;
  }
};

// Until watch has subscribed and its first scan has been answered: a lock taken after that is a
// change, not part of the state at start.
void wait_until_watching(raw_redis& raw) {
  wait_until(
      [&] {
        const auto calls = raw({"INFO", "commandstats"}).str();
        return raw({"PUBSUB", "NUMPAT"}).integer() >= 5 &&
               calls.find("cmdstat_scan:") != std::string::npos;
      },
      10s);
}

// Reads watch's events until one of `wanted`; returns it (empty after `limit` or at EOF) and
// appends every type read on the way to `seen`.
std::string next_of(child_process& watch, const std::set<std::string>& wanted,
                    std::vector<std::string>& seen, milliseconds limit = 5s) {
  const auto deadline = steady::now() + limit;
  while (steady::now() < deadline) {
    const auto line = watch.read_line(std::chrono::ceil<milliseconds>(deadline - steady::now()));
    if (!line) return "";
    const auto event = nlohmann::json::parse(*line);
    for (const char* field : {"event", "name", "kind", "time", "holder", "fence", "waiters"})
      EXPECT_TRUE(event.contains(field)) << field << " missing: " << *line;
    const auto type = event.at("event").get<std::string>();
    seen.push_back(type);
    if (wanted.count(type)) return type;
  }
  return "";
}

TEST_F(CliWatch, JsonReportsAcquisitionWaitersHandoffAndExpiry) {
  raw_redis raw(server().port());
  child_process watch({DLOCK_CLI, "--url", url(), "watch", "--json", "--interval", "1s"}, captured);
  wait_until_watching(raw);
  const auto name = key("job");
  const auto release = dir_ + "/release";
  auto first = start([&] {
    std::vector<std::string> a{"--ttl", "1s", name, "--"};
    for (auto& w : until_file(release))
      a.push_back(w);
    return a;
  }());
  ASSERT_TRUE(first.wait_for("ready"));
  std::vector<std::string> seen;
  ASSERT_EQ(next_of(watch, {"acquired"}, seen), "acquired");
  EXPECT_EQ(seen, std::vector<std::string>{"acquired"});

  auto second = start({"--ttl", "1s", name, "--", "sh", "-c", "echo second-ready; exec sleep 60"});
  ASSERT_EQ(next_of(watch, {"waiter_joined"}, seen), "waiter_joined");

  std::ofstream(release).put('x');
  ASSERT_TRUE(second.wait_for("second-ready"));
  EXPECT_EQ(first.wait(10s), 0);
  const auto changed = next_of(watch, {"handoff", "released"}, seen);
  ASSERT_FALSE(changed.empty());
  if (changed == "released") {
    ASSERT_EQ(next_of(watch, {"acquired"}, seen), "acquired");
  }

  // Killed outright, the holder never releases: its lease runs out.
  second.signal(SIGKILL);
  ASSERT_EQ(next_of(watch, {"expired", "lost", "released"}, seen), "expired")
      << ::testing::PrintToString(seen);
  std::vector<std::string> holders;
  for (const auto& t : seen) {
    if (t != "waiter_joined" && t != "waiter_left") holders.push_back(t);
  }
  const std::vector<std::string> handoff{"acquired", "handoff", "expired"};
  const std::vector<std::string> split{"acquired", "released", "acquired", "expired"};
  EXPECT_TRUE(holders == handoff || holders == split) << ::testing::PrintToString(seen);
  watch.signal(SIGTERM);
  EXPECT_EQ(watch.wait(10s), 0);
}

TEST_F(CliWatch, PlainModePrintsTheTable) {
  const auto name = key("held");
  auto holder = start({name, "--", "sh", "-c", "echo ready; exec sleep 60"});
  ASSERT_TRUE(holder.wait_for("ready"));
  const auto r = dlock_cli({"--url", url(), "watch", "--count", "2", "--interval", "200ms"});
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("NAME"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("HANDOFFS/S"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(name), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find('\x1b'), std::string::npos) << "no escape codes without a terminal";
}

TEST_F(CliWatch, UsageAndConnectionErrors) {
  EXPECT_EQ(dlock_cli({"--url", url(), "watch", "--interval", "10x"}).code, 64);
  EXPECT_EQ(dlock_cli({"--url", url(), "watch", "--count", "0"}).code, 64);
  EXPECT_EQ(dlock_cli({"--url", "redis://127.0.0.1:1", "watch", "--count", "1"}).code, 69);
}

// A private tmux server (its own socket), killed whatever happens to the test.
class tmux_server {
 public:
  explicit tmux_server(std::string socket) : socket_(std::move(socket)) {}
  ~tmux_server() { embedded::run_program({"tmux", "-L", socket_, "kill-server"}); }
  tmux_server(const tmux_server&) = delete;
  tmux_server& operator=(const tmux_server&) = delete;
  std::vector<std::string> args(std::vector<std::string> rest) const {
    rest.insert(rest.begin(), {"tmux", "-L", socket_});
    return rest;
  }
  int run(std::vector<std::string> rest) const { return embedded::run_program(args(rest)); }
  std::string capture(const std::string& session) const {
    child_process p(args({"capture-pane", "-p", "-t", session}),
                    {.capture_stdout = true, .merge_stderr = true});
    auto out = p.drain();
    p.wait(10s);
    return out;
  }

 private:
  std::string socket_;
};

// The line of the pane that shows `name`, or nothing.
std::optional<std::string> row_of(const std::string& pane, const std::string& name) {
  std::istringstream lines(pane);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name + " ", 0) == 0) return line;
  }
  return std::nullopt;
}

// The WAITERS cell of a row: its fifth field (NAME, KIND, HELD and TTL come first; a lock's
// name and kind here have no spaces).
std::string waiters_in(const std::optional<std::string>& row) {
  if (!row) return "";
  std::istringstream in(*row);
  std::vector<std::string> fields;
  for (std::string f; in >> f;)
    fields.push_back(f);
  return fields.size() >= 5 ? fields[4] : "";
}

// How the status of `name` names its holder: host:pid where the holder recorded who it is,
// else its owner id.
std::string holder_cell(const std::string& url, const std::string& name) {
  const auto r = dlock_cli({"--url", url, "status", name, "--json"});
  const auto j = nlohmann::json::parse(r.output);
  const auto& h = j.at("holders").at(0);
  if (h.contains("holder")) {
    return h["holder"]["host"].get<std::string>() + ":" +
           std::to_string(h["holder"]["pid"].get<long long>());
  }
  return h.at("owner").get<std::string>();
}

TEST_F(CliWatchNotified, TerminalShowsChangesWithinASecondAndQuits) {
  if (embedded::run_program({"tmux", "-V"}) != 0) GTEST_SKIP() << "tmux is not installed";
  const auto id = std::to_string(::getpid()).append("-").append(std::to_string(server().port()));
  tmux_server tmux(std::string("dlock-watch-").append(id));
  const std::string session = "watch";
  const auto status_file = dir_ + "/status";
  raw_redis raw(server().port());
  ASSERT_EQ(tmux.run({"new-session", "-d", "-x", "160", "-y", "40", "-s", session,
                      std::string(DLOCK_CLI)
                          .append(" --url ")
                          .append(url())
                          .append(" watch; echo $? > ")
                          .append(status_file)}),
            0);
  wait_until_watching(raw);
  const auto name = key("job");
  // Until the pane satisfies `check`; returns how long it took (fails the test after `limit`).
  const auto pane_until = [&](auto check, milliseconds limit) {
    const auto from = steady::now();
    std::string pane;
    while (!check(pane = tmux.capture(session))) {
      if (steady::now() - from > limit) {
        ADD_FAILURE() << "the pane never showed it:\n" << pane;
        return milliseconds::max();
      }
      std::this_thread::sleep_for(10ms);
    }
    return std::chrono::duration_cast<milliseconds>(steady::now() - from);
  };

  const auto release = dir_ + "/release";
  std::vector<std::string> a{"--ttl", "1s", name, "--"};
  for (auto& w : until_file(release))
    a.push_back(w);
  auto first = start(a);
  ASSERT_TRUE(first.wait_for("ready"));
  const auto shown =
      pane_until([&](const std::string& p) { return row_of(p, name).has_value(); }, 1s);
  const auto first_holder = holder_cell(url(), name);
  EXPECT_NE(row_of(tmux.capture(session), name).value_or("").find(first_holder), std::string::npos);

  auto second = start({"--ttl", "1s", name, "--", "sh", "-c", "echo second-ready; exec sleep 60"});
  pane_until([&](const std::string& p) { return waiters_in(row_of(p, name)) == "1"; }, 3s);
  const auto released = steady::now();
  std::ofstream(release).put('x');
  ASSERT_TRUE(second.wait_for("second-ready"));
  const auto second_holder = holder_cell(url(), name);
  ASSERT_NE(second_holder, first_holder);
  pane_until(
      [&](const std::string& p) {
        return row_of(p, name).value_or("").find(second_holder) != std::string::npos;
      },
      1s);
  const auto handed = std::chrono::duration_cast<milliseconds>(steady::now() - released);

  second.signal(SIGKILL);
  const auto killed = steady::now();
  pane_until([&](const std::string& p) { return !row_of(p, name); }, 3s);
  const auto gone = std::chrono::duration_cast<milliseconds>(steady::now() - killed);
  std::cout << "[watch] shown after " << shown.count() << " ms, hand-off shown " << handed.count()
            << " ms after the release, gone " << gone.count() << " ms after the kill (ttl 1s)\n";

  ASSERT_EQ(tmux.run({"send-keys", "-t", session, "q"}), 0);
  wait_until([&] { return tmux.run({"has-session", "-t", session}) != 0; }, 3s);
  std::ifstream status(status_file);
  int code = -1;
  status >> code;
  EXPECT_EQ(code, 0) << "watch's exit status";
}

// On Sentinel and Cluster too, with the servers' notifications off (the default): a lock taken
// shows by the re-scan, its holder named; its release is heard on a server and Sentinel (the
// unlock channel), and reads as `ended` on a Cluster, whose release messages are sharded.
class CliWatchDeployments : public deployment_test {};
INSTANTIATE_TEST_SUITE_P(Deployments, CliWatchDeployments, ::testing::ValuesIn(all_deployments),
                         [](const auto& param_info) { return param_info.param; });

TEST_P(CliWatchDeployments, JsonSeesALockTakenAndLetGo) {
  auto args = d().cli_target();
  args.insert(args.begin(), DLOCK_CLI);
  args.insert(args.end(), {"watch", "--json", "--interval", "200ms"});
  child_process watch(args, captured);
  for (const auto port : d().master_ports()) {
    raw_redis raw(port);
    wait_until_watching(raw);
  }
  client_options o = d().options();
  o.holder_label = "watched-job";
  client c(o);
  const auto name = tagged("job", "");
  std::vector<std::string> seen;
  auto held = c.reentrant(name).acquire();
  ASSERT_EQ(next_of(watch, {"acquired"}, seen), "acquired") << ::testing::PrintToString(seen);
  held.release();
  const auto ended = next_of(watch, {"released", "ended", "lost", "expired"}, seen);
  EXPECT_EQ(ended, GetParam() == "cluster" ? "ended" : "released")
      << ::testing::PrintToString(seen);
  watch.signal(SIGTERM);
  EXPECT_EQ(watch.wait(), 0);
}

}  // namespace
}  // namespace dlock::testing
