// Who holds a lock: every kind's grant records its holder beside the lock (`dlock_holder:{NAME}`)
// on a standalone server, a Sentinel set and a cluster; the record goes with the hold (released,
// lapsed, its holder killed), never touches Redisson's own keys, and locks taken by Redisson or
// node-redlock are shown as before, without one.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <nlohmann/json.hpp>

#include "cli_support.hpp"
#include "deployment_test.hpp"
#include "dlock/dlock.hpp"
#include "polling.hpp"

namespace dlock::testing {
namespace {

using namespace std::chrono_literals;

const std::string label = "nightly-report --full \xe2\x9c\x93";

std::string this_host() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

// The record a grant made by a client of this process with `label` must carry.
void expect_ours(const std::optional<holder_identity>& id, const std::string& owner,
                 std::chrono::system_clock::time_point before) {
  ASSERT_TRUE(id) << "no holder record";
  EXPECT_EQ(id->host, this_host());
  EXPECT_EQ(id->pid, ::getpid());
  EXPECT_FALSE(id->user.empty());
  EXPECT_EQ(id->label, label);
  EXPECT_FALSE(id->client_id.empty());
  if (owner.find(':') != std::string::npos) {  // not a simple lock's token
    EXPECT_EQ(owner.rfind(std::string(id->client_id).append(":"), 0), 0u) << owner;
  }
  // The server's clock at the grant, to the millisecond; the server runs on this host.
  EXPECT_GE(id->since, before - 1s);
  EXPECT_LE(id->since, std::chrono::system_clock::now() + 1s);
}

class HolderIdentity : public deployment_test {
 protected:
  client_options labelled() {
    auto o = d().options();
    o.holder_label = label;
    return o;
  }
  bool holder_key_exists(const std::string& name) {
    return raw_for(name)({"EXISTS", keys_of_lock(name).holder}).integer() == 1;
  }
};

INSTANTIATE_TEST_SUITE_P(Deployments, HolderIdentity, ::testing::ValuesIn(all_deployments),
                         [](const auto& param_info) { return param_info.param; });

TEST_P(HolderIdentity, EveryLockKindRecordsItsHolderAndForgetsItAtRelease) {
  client c(labelled());
  const auto before = std::chrono::system_clock::now();
  const auto check_mutex = [&](basic_lock lock) {
    const std::string name = lock.name();
    {
      auto held = lock.acquire();
      const auto info = lock.info();
      ASSERT_EQ(info.holders.size(), 1u) << name;
      expect_ours(info.holders[0].identity, info.holders[0].owner, before);
      EXPECT_TRUE(holder_key_exists(name));
    }
    EXPECT_FALSE(holder_key_exists(name)) << name << ": the record outlived the release";
  };
  check_mutex(c.reentrant(tagged("r", "")));
  check_mutex(c.simple(tagged("s", "")));
  check_mutex(c.fair(tagged("f", "")));
  check_mutex(c.read_write(tagged("w", "")).write());

  // Two readers: one record each, the first staying when the second goes.
  auto rw = c.read_write(tagged("rw", ""));
  {
    auto a = rw.read().acquire({.owner = "reader-a"});
    auto b = rw.read().acquire({.owner = "reader-b"});
    auto info = rw.read().info();
    ASSERT_EQ(info.holders.size(), 2u);
    for (const auto& h : info.holders)
      expect_ours(h.identity, h.owner, before);
    b.release();
    info = rw.read().info();
    ASSERT_EQ(info.holders.size(), 1u);
    EXPECT_EQ(info.holders[0].owner.substr(info.holders[0].owner.rfind(':') + 1), "reader-a");
    expect_ours(info.holders[0].identity, info.holders[0].owner, before);
  }
  EXPECT_FALSE(holder_key_exists(rw.read().name()));

  // A multi-lock: every name's hold has its record.
  const std::vector<std::string> names = {tagged("m", "1"), tagged("m", "2")};
  {
    auto all = c.multi(names).acquire();
    for (const auto& name : names) {
      const auto info = c.reentrant(name).info();
      ASSERT_EQ(info.holders.size(), 1u) << name;
      expect_ours(info.holders[0].identity, info.holders[0].owner, before);
    }
  }
  for (const auto& name : names)
    EXPECT_FALSE(holder_key_exists(name)) << name;
}

TEST_P(HolderIdentity, SemaphoresRecordWhoTookEachGrantOrPermit) {
  client c(labelled());
  const auto before = std::chrono::system_clock::now();
  auto sem = c.semaphore(tagged("sem", ""));
  sem.try_set_permits(3);
  {
    auto two = sem.acquire({.permits = 2});
    const auto info = sem.info();
    ASSERT_EQ(info.holders.size(), 1u);  // one grant of two permits
    expect_ours(info.holders[0].second, "", before);
  }
  EXPECT_FALSE(holder_key_exists(sem.name()));

  auto leased = c.leased_semaphore(tagged("lsem", ""));
  leased.try_set_permits(3);
  {
    auto two = leased.acquire({.permits = 2});
    const auto info = leased.info();
    ASSERT_EQ(info.holders.size(), 2u);  // one record per permit, by its id
    for (const auto& [id, who] : info.holders) {
      EXPECT_NE(two.permit_id().find(id), std::string::npos) << id << " not in " << two.permit_id();
      expect_ours(who, "", before);
    }
  }
  EXPECT_FALSE(holder_key_exists(leased.name()));
}

TEST_P(HolderIdentity, ARecordLapsesWithItsLease) {
  client c(labelled());
  const auto name = tagged("lapse", "");
  auto held = c.reentrant(name).acquire({.lease_time = 400ms});
  auto raw = raw_for(name);
  EXPECT_TRUE(holder_key_exists(name));
  // Set by the same script to the same lease: they go within a few milliseconds of each other.
  EXPECT_NEAR(static_cast<double>(raw({"PTTL", keys_of_lock(name).holder}).integer()),
              static_cast<double>(raw({"PTTL", name}).integer()), 50.0);
  wait_until([&] { return raw({"EXISTS", name}).integer() == 0; });
  wait_until([&] { return !holder_key_exists(name); }, 1s);
}

// `dlock status --json` shows what `dlock run` recorded: this host, the run's own pid, the command
// it runs; after the run's process group is SIGKILLed, the record lapses with the lease.
TEST_P(HolderIdentity, StatusShowsTheRunsCommandAndTheRecordGoesWhenItsHolderIsKilled) {
  const auto name = tagged("run", "");
  auto cli = [&](std::vector<std::string> args) {
    auto all = d().cli_target();
    all.insert(all.end(), args.begin(), args.end());
    return dlock_cli(all);
  };
  auto args = d().cli_target();
  args.insert(args.begin(), DLOCK_CLI);
  for (const char* a : {"run", "--ttl", "1s"})
    args.emplace_back(a);
  args.push_back(name);
  for (const char* a : {"--", "sh", "-c", "echo started; exec sleep 60"})
    args.emplace_back(a);
  child_process run(args,
                    {.capture_stdout = true, .merge_stderr = true, .new_process_group = true});
  ASSERT_TRUE(run.wait_for("started"));
  const auto status = cli({"status", name, "--json"});
  ASSERT_EQ(status.code, 0) << status.output;
  const auto json = nlohmann::json::parse(status.output);
  ASSERT_EQ(json.at("holders").size(), 1u) << json;
  const auto& holder = json.at("holders")[0].at("holder");
  EXPECT_EQ(holder.at("host"), this_host());
  EXPECT_EQ(holder.at("pid"), run.pid());
  EXPECT_EQ(holder.at("label"), "sh -c 'echo started; exec sleep 60'");
  EXPECT_TRUE(holder.at("since").get<std::string>().ends_with("Z"));
  const auto owner = json.at("holders")[0].at("owner").get<std::string>();
  EXPECT_EQ(owner.rfind(holder.at("client_id").get<std::string>().append(":"), 0), 0u) << owner;

  run.signal(SIGKILL, true);
  run.wait();
  wait_until([&] { return raw_for(name)({"EXISTS", name}).integer() == 0; });
  wait_until([&] { return !holder_key_exists(name); }, 1s);
  const auto after = cli({"status", name, "--json"});
  EXPECT_TRUE(nlohmann::json::parse(after.output).at("holders").empty()) << after.output;
}

// Every kind `dlock run` and `dlock sem` take shows its holder in `status --json`, and a release
// (the command ended by SIGTERM) removes it.
TEST_P(HolderIdentity, StatusShowsTheHolderOfEveryKindTheCommandLineTakes) {
  struct taking {
    std::vector<std::string> args;  // after the target options
    std::string name;
  };
  const auto cmd = std::vector<std::string>{"--", "sh", "-c", "echo started; exec sleep 60"};
  std::vector<taking> cases;
  for (const char* kind : {"simple", "fair", "read", "write"}) {
    const auto name = tagged(kind, "");
    cases.push_back({{"run", "--kind", kind, name}, name});
  }
  cases.push_back({{"sem", tagged("sem", ""), "--permits", "2"}, tagged("sem", "")});
  for (auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto args = d().cli_target();
    args.insert(args.begin(), DLOCK_CLI);
    args.insert(args.end(), c.args.begin(), c.args.end());
    args.insert(args.end(), cmd.begin(), cmd.end());
    child_process run(args, {.capture_stdout = true, .merge_stderr = true});
    ASSERT_TRUE(run.wait_for("started"));
    auto status_args = d().cli_target();
    status_args.insert(status_args.end(), {"status", c.name, "--json"});
    const auto status = dlock_cli(status_args);
    ASSERT_EQ(status.code, 0) << status.output;
    const auto json = nlohmann::json::parse(status.output);
    // A leased semaphore's holders are per permit.
    const auto& held = json.contains("permits") ? json.at("permits") : json.at("holders");
    ASSERT_EQ(held.size(), 1u) << json;
    ASSERT_TRUE(held[0].contains("holder")) << json;
    EXPECT_EQ(held[0].at("holder").at("pid"), run.pid());
    EXPECT_EQ(held[0].at("holder").at("host"), this_host());
    EXPECT_EQ(held[0].at("holder").at("label"), "sh -c 'echo started; exec sleep 60'");
    run.signal(SIGTERM);
    run.wait();
    EXPECT_FALSE(holder_key_exists(c.name)) << "the release left the record";
  }
}

class HolderIdentityLayout : public redis_test {};

// Locks that Redisson or node-redlock took have no record: they are shown as before.
TEST_F(HolderIdentityLayout, LocksTakenByOtherLibrariesShowTheirOwnerWithoutARecord) {
  raw_redis raw(server().port());
  raw({"HSET", key("redisson"), "a0c7e1d2-0000-4000-8000-000000000001:57", "1"});
  raw({"PEXPIRE", key("redisson"), "30000"});
  raw({"SET", key("node-redlock"), "f3a9c0de11b2c3d4e5f60718293a4b5c", "PX", "30000"});
  client c(url());
  const auto redisson = c.reentrant(key("redisson")).info();
  ASSERT_EQ(redisson.holders.size(), 1u);
  EXPECT_EQ(redisson.holders[0].owner, "a0c7e1d2-0000-4000-8000-000000000001:57");
  EXPECT_FALSE(redisson.holders[0].identity);
  const auto token = c.simple(key("node-redlock")).info();
  ASSERT_EQ(token.holders.size(), 1u);
  EXPECT_EQ(token.holders[0].owner, "f3a9c0de11b2c3d4e5f60718293a4b5c");
  EXPECT_FALSE(token.holders[0].identity);
  const auto shown = dlock_cli({"--url", url(), "status", key("redisson"), "--json"});
  const auto json = nlohmann::json::parse(shown.output);
  EXPECT_EQ(json.at("holders")[0].at("owner"), "a0c7e1d2-0000-4000-8000-000000000001:57");
  EXPECT_FALSE(json.at("holders")[0].contains("holder")) << json;
}

// The record lives beside Redisson's layout, never inside it: a lock dlock took is, byte for
// byte (DUMP), the hash Redisson would have written for the same owner.
TEST_F(HolderIdentityLayout, TheLocksOwnKeyIsRedissonsLayoutByteForByte) {
  client c(url());
  raw_redis raw(server().port());
  auto held = c.reentrant(key("dlock")).acquire();
  const auto owner = c.reentrant(key("dlock")).holder()->owner;
  raw({"HSET", key("by-hand"), owner, "1"});
  EXPECT_EQ(raw({"DUMP", key("dlock")}).str(), raw({"DUMP", key("by-hand")}).str());
  EXPECT_EQ(raw({"HLEN", key("dlock")}).integer(), 1);
  // And nothing of dlock's but its record beside it.
  const auto keys = raw({"KEYS", std::string("*").append(key("dlock")).append("*")});
  std::vector<std::string> names;
  for (const auto& k : keys.elements())
    names.push_back(k.str());
  std::sort(names.begin(), names.end());
  std::vector<std::string> expected = {key("dlock"), keys_of_lock(key("dlock")).holder,
                                       keys_of_lock(key("dlock")).fence_counter};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(names, expected);
}

// A client told not to record writes nothing beside the lock but its fence counter.
TEST_F(HolderIdentityLayout, AClientThatRecordsNothingLeavesNoRecord) {
  auto o = client_options::from_url(url());
  o.record_holder = false;
  client c(o);
  raw_redis raw(server().port());
  auto held = c.reentrant(key("quiet")).acquire();
  EXPECT_EQ(raw({"EXISTS", keys_of_lock(key("quiet")).holder}).integer(), 0);
  EXPECT_FALSE(c.reentrant(key("quiet")).info().holders.at(0).identity);
}

// An ACL written for Redisson's keys alone refuses the record's key, and so the whole call: the
// error says what to allow, and a client that records nothing works under it.
TEST_F(HolderIdentityLayout, AnAclWithoutTheRecordsKeysIsToldWhatToAllowOrRecordsNothing) {
  raw_redis raw(server().port());
  // The application's keys (a leased semaphore's permits are `{NAME}:timeout`) and Redisson's.
  raw({"ACL", "SETUSER", "app", "on", ">pw", std::string("~").append(key("*")),
       std::string("~{").append(key("*")), "~redisson*", "&*", "+@all"});
  auto o = client_options::from_url(url());
  o.connection.user = "app";
  o.connection.password = "pw";
  {
    client c(o);
    try {
      c.reentrant(key("acl")).try_acquire();
      ADD_FAILURE() << "granted without access to dlock_holder:*";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::permission_denied);
      EXPECT_NE(std::string(e.what()).find("~dlock_holder:*"), std::string::npos) << e.what();
    }
    EXPECT_EQ(raw({"EXISTS", key("acl")}).integer(), 0) << "refused before anything was written";
  }
  o.record_holder = false;
  client quiet(o);
  auto held = quiet.reentrant(key("acl")).try_acquire({.lease_time = 30s});
  ASSERT_TRUE(held);
  EXPECT_EQ(quiet.reentrant(key("acl")).info().holders.size(), 1u);
  auto sem = quiet.leased_semaphore(key("acl-sem"));
  sem.try_set_permits(1);
  auto permit = sem.try_acquire();
  ASSERT_TRUE(permit);
  EXPECT_TRUE(sem.info().holders.empty());
  EXPECT_TRUE(held.release());
  EXPECT_TRUE(permit.release());
}

// A record key someone filled with data of another type costs the record, never the lock.
TEST_F(HolderIdentityLayout, ARecordKeyOfAnotherTypeNeitherBlocksNorBreaksTheLock) {
  client c(url());
  raw_redis raw(server().port());
  const auto record = keys_of_lock(key("odd")).holder;
  raw({"RPUSH", record, "someone's", "list"});
  {
    auto held = c.reentrant(key("odd")).acquire();
    EXPECT_TRUE(held);
    EXPECT_FALSE(c.reentrant(key("odd")).info().holders.at(0).identity);
  }
  EXPECT_EQ(raw({"EXISTS", key("odd")}).integer(), 0);
  EXPECT_EQ(raw({"LLEN", record}).integer(), 2);  // left as it was
}

}  // namespace
}  // namespace dlock::testing
