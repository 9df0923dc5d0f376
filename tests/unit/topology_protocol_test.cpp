// The topologies' decisions without a socket: cluster slots and redirects, what Sentinel says,
// the Sentinel URL, and the master check in the handshake.
#include <gtest/gtest.h>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "net/connect_fsm.hpp"
#include "net/sentinel_url.hpp"
#include "topology/cluster_map.hpp"
#include "topology/sentinel_protocol.hpp"

namespace {

using dlock::errc;
using dlock::reply;
using namespace dlock::detail;

reply bulk(std::string s) {
  return reply::bulk_string(std::move(s));
}

TEST(ClusterSlots, MatchRedisClusterSpecification) {
  // Values from the Redis Cluster specification and CLUSTER KEYSLOT.
  EXPECT_EQ(key_slot("123456789"), 12739);  // CRC16/XMODEM check value 0x31C3
  EXPECT_EQ(key_slot("foo"), 12182);
  EXPECT_EQ(key_slot("bar"), 5061);
  EXPECT_EQ(key_slot(""), 0);
}

TEST(ClusterSlots, FollowTheHashTagRule) {
  EXPECT_EQ(key_slot("{user1000}.following"), key_slot("user1000"));
  EXPECT_EQ(key_slot("redisson_lock__channel:{job}"), key_slot("job"));
  EXPECT_EQ(key_slot("foo{}{bar}"), key_slot("foo{}{bar}"));  // empty first tag: whole key
  EXPECT_NE(key_slot("foo{}{bar}"), key_slot("bar"));
  EXPECT_EQ(key_slot("foo{{bar}}zap"), key_slot("{bar"));  // from the first '{' to the first '}'
  EXPECT_EQ(key_slot("foo{bar}{zap}"), key_slot("bar"));
  EXPECT_NE(key_slot("job{"), key_slot("redisson_lock_token:job{"));  // no tag: whole keys
}

reply master(std::string host, std::int64_t port) {
  return reply::array({bulk(std::move(host)), reply::integer(port), bulk("id")});
}

TEST(ClusterSlots, ParseClusterSlotsReplies) {
  const auto r = reply::array({
      reply::array({reply::integer(0), reply::integer(5460), master("127.0.0.1", 7000),
                    master("127.0.0.1", 7003)}),
      reply::array({reply::integer(5461), reply::integer(16383), master("", 7001)}),
  });
  const auto map = parse_cluster_slots(r, "10.0.0.9");
  ASSERT_TRUE(map);
  ASSERT_EQ(map->ranges.size(), 2u);
  EXPECT_EQ(map->ranges[0].last, 5460);
  EXPECT_EQ(map->ranges[0].master, (node_address{"127.0.0.1", 7000}));
  // A node that does not know its address is the one the reply came from.
  EXPECT_EQ(map->ranges[1].master, (node_address{"10.0.0.9", 7001}));
  EXPECT_FALSE(
      parse_cluster_slots(reply::error("ERR This instance has cluster support disabled"), "x"));
  EXPECT_FALSE(parse_cluster_slots(
      reply::array({reply::array({reply::integer(5), reply::integer(2), master("h", 1)})}), "x"));
  EXPECT_FALSE(parse_cluster_slots(
      reply::array({reply::array({reply::integer(0), reply::integer(16384), master("h", 1)})}),
      "x"));
}

TEST(ClusterSlots, ParseRedirects) {
  const auto moved = parse_redirect("MOVED 3999 127.0.0.1:6381");
  ASSERT_TRUE(moved);
  EXPECT_EQ(moved->kind, redirect::type::moved);
  EXPECT_EQ(moved->slot, 3999);
  EXPECT_EQ(moved->target, (node_address{"127.0.0.1", 6381}));
  const auto ask = parse_redirect("ASK 12182 ::1:7002");
  ASSERT_TRUE(ask);
  EXPECT_EQ(ask->kind, redirect::type::ask);
  EXPECT_EQ(ask->target, (node_address{"::1", 7002}));
  EXPECT_FALSE(parse_redirect("MOVED 16384 h:1"));
  EXPECT_FALSE(parse_redirect("MOVED 1 h"));
  EXPECT_FALSE(parse_redirect("MOVED x h:1"));
  EXPECT_FALSE(parse_redirect("ERR MOVED 1 h:1"));
  EXPECT_TRUE(cluster_retryable("TRYAGAIN Multiple keys request during rehashing of slot"));
  EXPECT_TRUE(cluster_retryable("CLUSTERDOWN The cluster is down"));
  EXPECT_FALSE(cluster_retryable("ERR unknown command"));
}

TEST(SentinelProtocol, MasterAddressAndSwitchMessages) {
  EXPECT_EQ(parse_master_address(reply::array({bulk("127.0.0.1"), bulk("6380")})),
            (node_address{"127.0.0.1", 6380}));
  EXPECT_FALSE(parse_master_address(reply()));  // nil: no such master
  EXPECT_FALSE(parse_master_address(reply::array({bulk("h"), bulk("0")})));
  EXPECT_FALSE(parse_master_address(reply::array({bulk("h"), bulk("70000")})));
  EXPECT_FALSE(parse_master_address(reply::error("ERR No such master with that name")));
  EXPECT_EQ(parse_switch_master("mymaster 127.0.0.1 6379 127.0.0.1 6380", "mymaster"),
            (node_address{"127.0.0.1", 6380}));
  EXPECT_FALSE(parse_switch_master("other 127.0.0.1 6379 127.0.0.1 6380", "mymaster"));
  EXPECT_FALSE(parse_switch_master("mymaster 127.0.0.1 6379 127.0.0.1", "mymaster"));
}

TEST(SentinelUrl, SeparatesTheMastersCredentialsFromTheSentinels) {
  const auto u = parse_sentinel_url(
      "redis-sentinel://app:s%40cret@10.0.0.1,10.0.0.2:5000/2"
      "?sentinel_password=spw&command_timeout=2s#my%20master");
  EXPECT_EQ(u.sentinel.master_name, "my master");
  ASSERT_EQ(u.sentinel.sentinels.size(), 2u);
  EXPECT_EQ(u.sentinel.sentinels[0].host, "10.0.0.1");
  EXPECT_EQ(u.sentinel.sentinels[0].port, 26379);
  EXPECT_EQ(u.sentinel.sentinels[1].port, 5000);
  EXPECT_EQ(u.sentinel.sentinels[0].password, "spw");
  EXPECT_EQ(u.sentinel.sentinels[0].user, "");
  EXPECT_EQ(u.sentinel.sentinels[0].database, 0);
  EXPECT_EQ(u.sentinel.sentinels[1].command_timeout, std::chrono::seconds(2));
  EXPECT_EQ(u.master.user, "app");
  EXPECT_EQ(u.master.password, "s@cret");
  EXPECT_EQ(u.master.database, 2);
  EXPECT_EQ(u.master.command_timeout, std::chrono::seconds(2));
  const auto o = dlock::client_options::from_url("redis-sentinel://127.0.0.1:26379#mymaster");
  EXPECT_EQ(o.sentinel.master_name, "mymaster");
  EXPECT_TRUE(o.connection.password.empty());
}

TEST(SentinelUrl, ValkeysSchemeIsTheSameForm) {
  const auto u = parse_sentinel_url("valkey-sentinel://app:pw@10.0.0.1,10.0.0.2:5000/3#cache");
  EXPECT_EQ(u.sentinel.master_name, "cache");
  ASSERT_EQ(u.sentinel.sentinels.size(), 2u);
  EXPECT_EQ(u.sentinel.sentinels[0].port, 26379);
  EXPECT_EQ(u.sentinel.sentinels[1].port, 5000);
  EXPECT_EQ(u.master.user, "app");
  EXPECT_EQ(u.master.database, 3);
  const auto o = dlock::client_options::from_url("valkey-sentinel://127.0.0.1#mymaster");
  EXPECT_EQ(o.sentinel.master_name, "mymaster");
  EXPECT_EQ(o.sentinel.sentinels.size(), 1u);
}

TEST(SentinelUrl, RejectsWhatIsMissing) {
  for (const char* bad :
       {"redis-sentinel://h:1", "redis-sentinel://h:1#", "redis-sentinel://#m",
        "redis-sentinel://h:1,,h2#m", "redis-sentinel://h:x#m", "valkey-sentinel://h:1",
        "valkeys-sentinel://h:1#m", "sentinel://h:1#m"}) {
    try {
      parse_sentinel_url(bad);
      ADD_FAILURE() << bad;
    } catch (const dlock::error& e) {
      EXPECT_EQ(e.code(), errc::invalid_url) << bad;
    }
  }
}

// Each master its own credentials; no busy polling between the masters' replies (client.hpp).
TEST(RedLockOptions, KeepEachMastersOwnSettingsAndDoNotBusyPoll) {
  const auto o = dlock::client_options::redlock_masters(
      {"redis://a:1", "redis://u:pw@b:2/3", "unix:///tmp/m.sock"});
  ASSERT_EQ(o.redlock.masters.size(), 3u);
  EXPECT_EQ(o.redlock.masters[1].user, "u");
  EXPECT_EQ(o.redlock.masters[1].password, "pw");
  EXPECT_EQ(o.redlock.masters[1].database, 3);
  EXPECT_EQ(o.redlock.masters[2].unix_path, "/tmp/m.sock");
  EXPECT_EQ(o.busy_poll, std::chrono::microseconds(0));
  EXPECT_EQ(dlock::client_options{}.busy_poll, std::chrono::microseconds(50));
  try {
    (void)dlock::client_options::redlock_masters({"redis://a:1", "redis://b:2"});
    ADD_FAILURE() << "two masters accepted";
  } catch (const dlock::error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
  }
}

TEST(Handshake, ChecksTheRoleWhenAMasterIsRequired) {
  dlock::connection_options o;
  dlock::net::handshake h(o, true);
  EXPECT_NE(h.request().find("ROLE"), std::string::npos);
  const auto v = h.on_reply(reply::array({bulk("slave"), bulk("127.0.0.1"), reply::integer(1)}));
  EXPECT_EQ(v.state, dlock::net::handshake::status::failed);
  EXPECT_EQ(v.error, errc::read_only);
  EXPECT_NE(v.detail.find("slave"), std::string::npos);
  dlock::net::handshake ok(o, true);
  EXPECT_EQ(ok.on_reply(reply::array({bulk("master"), reply::integer(0), reply::array({})})).state,
            dlock::net::handshake::status::more);
  EXPECT_EQ(ok.on_reply(reply::simple_string("OK")).state, dlock::net::handshake::status::more);
  // CLIENT SETINFO lib-name, lib-ver
  EXPECT_EQ(ok.on_reply(reply::simple_string("OK")).state, dlock::net::handshake::status::more);
  EXPECT_EQ(ok.on_reply(reply::simple_string("OK")).state, dlock::net::handshake::status::ready);
  EXPECT_EQ(dlock::net::handshake(o).request().find("ROLE"), std::string::npos);
}

}  // namespace
