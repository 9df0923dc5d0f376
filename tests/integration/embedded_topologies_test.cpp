// The embedded Cluster and Sentinel deployments the topology tests stand on: real processes that
// come up healthy, fail over when a master is killed, redirect while a slot migrates, and leave
// nothing running behind them.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "embedded/redis_cluster.hpp"
#include "embedded/redis_sentinel_set.hpp"
#include "embedded/resp_client.hpp"

namespace dlock::embedded {
namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

long long elapsed_ms(clock_type::time_point since) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - since).count();
}

void report(const std::string& what, clock_type::time_point since) {
  std::cout << "[   TIME   ] " << what << ": " << elapsed_ms(since) << " ms" << std::endl;
}

// What a deployment started, to prove after its destruction that none of it is left.
class footprint {
 public:
  void add(const redis_server& s) {
    if (s.running()) pids_.push_back(s.pid());
    dirs_.push_back(s.dir());
  }
  void expect_gone() const {
    for (const auto pid : pids_) {
      EXPECT_TRUE(gone(pid)) << "process " << pid << " is still running";
    }
    for (const auto& dir : dirs_) {
      EXPECT_FALSE(std::filesystem::exists(dir)) << dir << " is still there";
    }
  }

 private:
  // The fixture reaps what it stops, so the PID is free, or taken by something that is not ours.
  static bool gone(pid_t pid) {
    if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
    std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline");
    const std::string cmdline((std::istreambuf_iterator<char>(in)), {});
    return cmdline.find("redis") == std::string::npos &&
           cmdline.find("valkey") == std::string::npos;
  }

  std::vector<pid_t> pids_;
  std::vector<std::string> dirs_;
};

void add_all(footprint& f, redis_cluster& c) {
  for (std::size_t i = 0; i < c.size(); ++i)
    f.add(c.node(i));
}

void add_all(footprint& f, redis_sentinel_set& s) {
  for (std::size_t i = 0; i < s.data_nodes(); ++i)
    f.add(s.data_node(i));
  for (std::size_t i = 0; i < s.sentinels(); ++i)
    f.add(s.sentinel(i));
}

// The first of "prefix0", "prefix1", ... whose slot node `owner` serves.
std::string key_on(redis_cluster& c, std::size_t owner, const std::string& prefix) {
  for (int i = 0;; ++i) {
    const auto key = prefix + std::to_string(i);
    if (c.master_of_slot(redis_cluster::key_slot(key)) == owner) return key;
  }
}

// Built by append: GCC 12 warns falsely (-Wrestrict) about "literal" + std::to_string(...).
std::string value_of(std::size_t i) {
  return std::string("v").append(std::to_string(i));
}

std::string role_of(std::uint16_t port, const std::string& password = {}) {
  return resp_client(port, password).checked({"ROLE"}).elements.at(0).text;
}

#define SKIP_WITHOUT_CLUSTER() \
  if (!cluster_available()) GTEST_SKIP() << "redis-server or redis-cli missing"
#define SKIP_WITHOUT_SENTINEL() \
  if (!sentinel_available()) GTEST_SKIP() << "neither redis-sentinel nor redis-server found"

TEST(EmbeddedTopologies, ClusterOfThreeMastersComesUpHealthy) {
  SKIP_WITHOUT_CLUSTER();
  footprint f;
  {
    const auto start = clock_type::now();
    redis_cluster c;
    report("3-master cluster created", start);
    add_all(f, c);
    ASSERT_EQ(c.size(), 3u);
    EXPECT_EQ(c.master_indexes(), (std::vector<std::size_t>{0, 1, 2}));
    const auto urls = c.seed_urls();
    ASSERT_EQ(urls.size(), 3u);
    for (std::size_t i = 0; i < c.size(); ++i) {
      EXPECT_EQ(urls[i], "redis://127.0.0.1:" + std::to_string(c.node(i).port()));
      EXPECT_LT(c.node(i).port(), 55535);
      // Every node covers every slot on its own.
      const auto slots = resp_client(c.node(i).port()).checked({"CLUSTER", "SLOTS"});
      long long covered = 0;
      for (const auto& r : slots.elements)
        covered += r.elements.at(1).integer - r.elements.at(0).integer + 1;
      EXPECT_EQ(covered, 16384) << "node " << i;
    }
    // Keys land on the master key_slot and master_of_slot name, and every master gets some.
    std::set<std::size_t> used;
    for (int i = 0; i < 300; ++i) {
      const auto key = "key:" + std::to_string(i);
      const auto owner = c.master_of_slot(redis_cluster::key_slot(key));
      used.insert(owner);
      const auto reply = resp_client(c.node(owner).port())({"SET", key, "v"});
      ASSERT_EQ(reply.to_string(), "OK") << key << " on node " << owner;
    }
    EXPECT_EQ(used.size(), 3u);
    for (const std::uint16_t slot : {0, 5460, 5461, 10922, 10923, 16383}) {
      EXPECT_LT(c.master_of_slot(slot), 3u);
    }
  }
  f.expect_gone();
}

TEST(EmbeddedTopologies, ClusterNeedsThreeMasters) {
  EXPECT_THROW(redis_cluster({.masters = 2}), server_error);
}

TEST(EmbeddedTopologies, KeySlotMatchesClusterKeyslot) {
  SKIP_WITHOUT_CLUSTER();
  // The CRC16 check value, and the example in the cluster specification.
  EXPECT_EQ(redis_cluster::key_slot("123456789"), 0x31C3);
  EXPECT_EQ(redis_cluster::key_slot("{user1000}.following"), redis_cluster::key_slot("user1000"));
  footprint f;
  {
    redis_cluster c;
    add_all(f, c);
    std::vector<std::string> keys = {"",
                                     "{",
                                     "}",
                                     "{}",
                                     "}{",
                                     "}{x",
                                     "}{x}",
                                     "{}x",
                                     "x{}",
                                     "{}{x}",
                                     "foo{}{bar}",
                                     "foo{{bar}}zap",
                                     "foo{bar}{zap}",
                                     "{user1000}.following",
                                     "{{}}",
                                     "a{b",
                                     "a}b{c}",
                                     std::string("\xff\xfe\x80", 3),
                                     std::string("{\xc3\x28}", 4),
                                     std::string("nul\0inside", 10),
                                     std::string("{\0}", 3)};
    std::mt19937 rng(20240601);
    std::uniform_int_distribution<int> byte(0, 255), length(0, 24);
    const char braces[] = "{}{}ab";
    while (keys.size() < 200) {
      std::string key;
      for (int n = length(rng); n > 0; --n) {
        const int b = byte(rng);
        // Plenty of braces, so that the hash-tag rule is what gets tested.
        key += b < 64 ? braces[b % 6] : static_cast<char>(b);
      }
      keys.push_back(key);
    }
    resp_client client(c.node(0).port());
    for (const auto& key : keys) {
      const auto server = client.checked({"CLUSTER", "KEYSLOT", key});
      EXPECT_EQ(redis_cluster::key_slot(key), server.integer)
          << "key of " << key.size() << " bytes";
    }
  }
  f.expect_gone();
}

TEST(EmbeddedTopologies, ClusterFailoverPromotesTheReplica) {
  SKIP_WITHOUT_CLUSTER();
  footprint f;
  {
    auto start = clock_type::now();
    redis_cluster c({.masters = 3, .replicas_per_master = 1});
    report("3-master cluster with 3 replicas created", start);
    add_all(f, c);
    ASSERT_EQ(c.size(), 6u);
    const auto masters = c.master_indexes();
    ASSERT_EQ(masters.size(), 3u);
    const auto victim = masters.front();
    const auto port = std::to_string(c.node(victim).port());
    std::size_t replica = c.size();
    for (std::size_t i = 0; i < c.size(); ++i) {
      const auto role = resp_client(c.node(i).port()).checked({"ROLE"});
      if (role.elements.at(0).text == "slave" && role.elements.at(2).integer == std::stoi(port)) {
        replica = i;
      }
    }
    ASSERT_LT(replica, c.size()) << "node " << victim << " has no replica";
    const auto key = key_on(c, victim, "failover:");
    resp_client master(c.node(victim).port());
    ASSERT_EQ(master({"SET", key, "kept"}).to_string(), "OK");
    ASSERT_EQ(master({"WAIT", "1", "10000"}).integer, 1);

    start = clock_type::now();
    c.kill_node(victim);
    EXPECT_FALSE(c.node(victim).running());
    EXPECT_EQ(c.wait_failover(victim, 30s), replica);
    report("cluster failover after SIGKILL", start);
    start = clock_type::now();
    c.wait_healthy(30s);
    report("cluster healthy again after the failover", start);
    EXPECT_EQ(role_of(c.node(replica).port()), "master");
    EXPECT_EQ(c.master_of_slot(redis_cluster::key_slot(key)), replica);
    const auto now_masters = c.master_indexes();
    EXPECT_EQ(now_masters.size(), 3u);
    EXPECT_EQ(std::count(now_masters.begin(), now_masters.end(), victim), 0);
    EXPECT_EQ(resp_client(c.node(replica).port())({"GET", key}).text, "kept");
  }
  f.expect_gone();
}

TEST(EmbeddedTopologies, HalfMigratedSlotRedirectsWithAsk) {
  SKIP_WITHOUT_CLUSTER();
  footprint f;
  {
    redis_cluster c;
    add_all(f, c);
    const std::string tag = "{migrating}";
    const auto slot = redis_cluster::key_slot(tag);
    const auto from = c.master_of_slot(slot);
    const auto to = (from + 1) % c.size();
    const auto target = "127.0.0.1:" + std::to_string(c.node(to).port());
    resp_client source(c.node(from).port()), destination(c.node(to).port());
    std::vector<std::string> keys;
    for (int i = 0; i < 10; ++i) {
      keys.push_back(tag + ":" + std::to_string(i));
      ASSERT_EQ(source({"SET", keys.back(), value_of(i)}).to_string(), "OK");
    }

    c.begin_migration(slot, from, to);
    EXPECT_EQ(c.move_keys(slot, from, to, 4), 4u);
    const auto s = std::to_string(slot);
    EXPECT_EQ(source({"CLUSTER", "COUNTKEYSINSLOT", s}).integer, 6);
    EXPECT_EQ(destination({"CLUSTER", "COUNTKEYSINSLOT", s}).integer, 4);
    int asked = 0;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const auto reply = source({"GET", keys[i]});
      if (reply.is_error()) {
        EXPECT_EQ(reply.text, "ASK " + s + " " + target);
        ++asked;
        // The target serves it to a client that says it was sent there...
        ASSERT_EQ(destination({"ASKING"}).to_string(), "OK");
        EXPECT_EQ(destination({"GET", keys[i]}).text, value_of(i));
        // ...and redirects one that did not back to the slot's owner.
        EXPECT_EQ(destination({"GET", keys[i]}).text.rfind("MOVED " + s, 0), 0u);
      } else {
        EXPECT_EQ(reply.text, value_of(i));
      }
    }
    EXPECT_EQ(asked, 4);
    // A key the source does not have may be on the target already: ASK as well.
    EXPECT_EQ(source({"GET", tag + ":absent"}).text, "ASK " + s + " " + target);

    c.finish_migration(slot, from, to);
    EXPECT_EQ(c.master_of_slot(slot), to);
    EXPECT_EQ(source({"GET", keys[0]}).text, "MOVED " + s + " " + target);
    for (std::size_t i = 0; i < keys.size(); ++i)
      EXPECT_EQ(destination({"GET", keys[i]}).text, value_of(i));

    // And back in one call.
    c.migrate_slot(slot, to, from, true);
    EXPECT_EQ(c.master_of_slot(slot), from);
    for (std::size_t i = 0; i < keys.size(); ++i)
      EXPECT_EQ(source({"GET", keys[i]}).text, value_of(i));
    c.wait_healthy(30s);
  }
  f.expect_gone();
}

TEST(EmbeddedTopologies, SentinelSetFailsOverToAReplica) {
  SKIP_WITHOUT_SENTINEL();
  footprint f;
  {
    auto start = clock_type::now();
    redis_sentinel_set set({.replicas = 2});
    report("sentinel set (1 master, 2 replicas, 3 sentinels) ready", start);
    add_all(f, set);
    ASSERT_EQ(set.data_nodes(), 3u);
    ASSERT_EQ(set.sentinels(), 3u);
    std::string url = "redis-sentinel://";
    for (std::size_t i = 0; i < 3; ++i) {
      url.append(i ? "," : "").append("127.0.0.1:").append(std::to_string(set.sentinel(i).port()));
      EXPECT_EQ(set.sentinel_urls().at(i),
                "redis://127.0.0.1:" + std::to_string(set.sentinel(i).port()));
    }
    EXPECT_EQ(set.url(), url + "#mymaster");
    EXPECT_EQ(set.master_index(), 0u);
    for (std::size_t i = 0; i < set.sentinels(); ++i) {
      const auto addr = resp_client(set.sentinel(i).port())
                            .checked({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"});
      ASSERT_EQ(addr.elements.size(), 2u);
      EXPECT_EQ(addr.elements[0].text, "127.0.0.1");
      EXPECT_EQ(addr.elements[1].text, std::to_string(set.data_node(0).port()));
    }
    resp_client master(set.data_node(0).port());
    ASSERT_EQ(master({"SET", "k", "kept"}).to_string(), "OK");
    ASSERT_EQ(master({"WAIT", "2", "10000"}).integer, 2);

    start = clock_type::now();
    set.data_node(0).kill();
    const auto promoted = set.wait_failover(0, 60s);
    report("sentinel failover after SIGKILL", start);
    EXPECT_NE(promoted, 0u);
    EXPECT_EQ(role_of(set.data_node(promoted).port()), "master");
    EXPECT_EQ(set.master_index(), promoted);
    for (std::size_t i = 0; i < set.sentinels(); ++i) {
      const auto addr = resp_client(set.sentinel(i).port())
                            .checked({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"});
      EXPECT_EQ(addr.elements.at(1).text, std::to_string(set.data_node(promoted).port()));
    }
    start = clock_type::now();
    set.wait_replicas_synced(60s);
    report("other replica following the new master", start);
    const auto other = 3 - promoted;
    const auto info = resp_client(set.data_node(other).port()).checked({"INFO", "replication"});
    EXPECT_EQ(info_field(info.text, "master_port"), std::to_string(set.data_node(promoted).port()));
    EXPECT_EQ(resp_client(set.data_node(promoted).port())({"GET", "k"}).text, "kept");
  }
  f.expect_gone();
}

TEST(EmbeddedTopologies, SentinelSetWithPasswords) {
  SKIP_WITHOUT_SENTINEL();
  footprint f;
  {
    const std::string sentinel_pw = "sentinel:pw/1", data_pw = "data \"pw\"";
    redis_sentinel_set set({.master_name = "auth-master",
                            .sentinel_password = sentinel_pw,
                            .master_password = data_pw});
    add_all(f, set);
    EXPECT_EQ(set.url().rfind("redis-sentinel://:sentinel%3Apw%2F1@127.0.0.1:", 0), 0u)
        << set.url();
    EXPECT_EQ(set.url().substr(set.url().size() - 12), "#auth-master");
    // Both kinds of process insist on their password.
    EXPECT_EQ(redis_command(set.sentinel(0).port(), {"PING"}).text.rfind("NOAUTH", 0), 0u);
    EXPECT_EQ(redis_command(set.sentinel(0).port(), {"PING"}, sentinel_pw).text, "PONG");
    EXPECT_EQ(redis_command(set.data_node(0).port(), {"PING"}).text.rfind("NOAUTH", 0), 0u);
    EXPECT_EQ(redis_command(set.data_node(1).port(), {"PING"}, data_pw).text, "PONG");
    EXPECT_EQ(set.master_index(), 0u);

    // A failover needs the sentinels to authenticate to each other and to the data nodes.
    set.data_node(0).kill();
    EXPECT_EQ(set.wait_failover(0, 60s), 1u);
    EXPECT_EQ(role_of(set.data_node(1).port(), data_pw), "master");
  }
  f.expect_gone();
}

}  // namespace
}  // namespace dlock::embedded
