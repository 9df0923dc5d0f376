// Unit tests for dlock::connection_options::from_url, redacted_url() and dlock::parse_duration.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <string_view>

#include "dlock/error.hpp"
#include "dlock/redis/connection_options.hpp"

namespace {

using dlock::connection_options;
using std::chrono::milliseconds;

constexpr std::string_view kPassword = "hunter2";

// Runs from_url and returns the dlock::error it throws (fails the test if it throws nothing or
// something else).
dlock::error url_error(std::string_view url) {
  try {
    (void)connection_options::from_url(url);
  } catch (const dlock::error& e) {
    return e;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "from_url(" << url << ") threw a non-dlock exception: " << e.what();
    return dlock::error(dlock::errc::invalid_argument, "wrong exception");
  }
  ADD_FAILURE() << "from_url(" << url << ") did not throw";
  return dlock::error(dlock::errc::invalid_argument, "no exception");
}

// Expects from_url to reject `url` with errc::invalid_url, with a message that never contains
// the password "hunter2".
void expect_invalid_url(std::string_view url) {
  SCOPED_TRACE(std::string(url));
  const dlock::error e = url_error(url);
  EXPECT_TRUE(e.code() == dlock::errc::invalid_url) << e.code().message() << ": " << e.what();
  const std::string what = e.what();
  EXPECT_FALSE(what.empty());
  EXPECT_EQ(what.find(kPassword), std::string::npos) << "password leaked: " << what;
}

// ---------------------------------------------------------------------------------------------
// from_url: successful parses

TEST(FromUrl, HostOnlyUsesDefaults) {
  const auto o = connection_options::from_url("redis://example.com");
  const connection_options defaults;
  EXPECT_EQ(o.host, "example.com");
  EXPECT_EQ(o.port, 6379);
  EXPECT_EQ(o.database, 0);
  EXPECT_TRUE(o.unix_path.empty());
  EXPECT_TRUE(o.user.empty());
  EXPECT_TRUE(o.password.empty());
  EXPECT_TRUE(o.client_name.empty());
  EXPECT_FALSE(o.tls.enabled);
  EXPECT_TRUE(o.tls.verify_peer);
  EXPECT_TRUE(o.tls.ca_file.empty());
  EXPECT_TRUE(o.tls.cert_file.empty());
  EXPECT_TRUE(o.tls.key_file.empty());
  EXPECT_TRUE(o.tls.server_name.empty());
  EXPECT_EQ(o.connect_timeout, defaults.connect_timeout);
  EXPECT_EQ(o.command_timeout, defaults.command_timeout);
  EXPECT_EQ(o.reconnect_min, defaults.reconnect_min);
  EXPECT_EQ(o.reconnect_max, defaults.reconnect_max);
}

TEST(FromUrl, HostAndPort) {
  const auto o = connection_options::from_url("redis://10.0.0.5:7001");
  EXPECT_EQ(o.host, "10.0.0.5");
  EXPECT_EQ(o.port, 7001);
  EXPECT_EQ(o.database, 0);
}

TEST(FromUrl, PortBoundaries) {
  EXPECT_EQ(connection_options::from_url("redis://h:1").port, 1);
  EXPECT_EQ(connection_options::from_url("redis://h:65535").port, 65535);
  EXPECT_EQ(connection_options::from_url("redis://h:06379").port, 6379);
}

TEST(FromUrl, Ipv6WithPort) {
  const auto o = connection_options::from_url("redis://[::1]:7000");
  EXPECT_EQ(o.host, "::1");
  EXPECT_EQ(o.port, 7000);
}

TEST(FromUrl, Ipv6WithoutPort) {
  const auto o = connection_options::from_url("redis://[fe80::1:2]/3");
  EXPECT_EQ(o.host, "fe80::1:2");
  EXPECT_EQ(o.port, 6379);
  EXPECT_EQ(o.database, 3);
}

TEST(FromUrl, Ipv6WithCredentials) {
  const auto o = connection_options::from_url("redis://alice:hunter2@[2001:db8::7]:6380");
  EXPECT_EQ(o.user, "alice");
  EXPECT_EQ(o.password, "hunter2");
  EXPECT_EQ(o.host, "2001:db8::7");
  EXPECT_EQ(o.port, 6380);
}

TEST(FromUrl, UserAndPassword) {
  const auto o = connection_options::from_url("redis://alice:hunter2@cache.local:6380");
  EXPECT_EQ(o.user, "alice");
  EXPECT_EQ(o.password, "hunter2");
  EXPECT_EQ(o.host, "cache.local");
  EXPECT_EQ(o.port, 6380);
}

TEST(FromUrl, PasswordOnlyWithEmptyUser) {
  const auto o = connection_options::from_url("redis://:hunter2@host");
  EXPECT_EQ(o.user, "");
  EXPECT_EQ(o.password, "hunter2");
  EXPECT_EQ(o.host, "host");
}

TEST(FromUrl, UserOnly) {
  const auto o = connection_options::from_url("redis://alice@host");
  EXPECT_EQ(o.user, "alice");
  EXPECT_EQ(o.password, "");
  EXPECT_EQ(o.host, "host");
}

TEST(FromUrl, EmptyUserinfo) {
  const auto o = connection_options::from_url("redis://@host");
  EXPECT_EQ(o.user, "");
  EXPECT_EQ(o.password, "");
  EXPECT_EQ(o.host, "host");
}

TEST(FromUrl, PercentDecodingInUserAndPassword) {
  const auto o = connection_options::from_url("redis://al%40ice:p%40ss%25w%3Ad%2f@host");
  EXPECT_EQ(o.user, "al@ice");
  EXPECT_EQ(o.password, "p@ss%w:d/");
}

TEST(FromUrl, PercentDecodingUpperAndLowerHex) {
  const auto o = connection_options::from_url("redis://%41%62:%7e%7E@host");
  EXPECT_EQ(o.user, "Ab");
  EXPECT_EQ(o.password, "~~");
}

TEST(FromUrl, PercentDecodingCanYieldNulByte) {
  const auto o = connection_options::from_url("redis://:a%00b@host");
  EXPECT_EQ(o.password, std::string("a\0b", 3));
}

TEST(FromUrl, PasswordContainingAtUsesLastAt) {
  const auto o = connection_options::from_url("redis://alice:hun@ter@2@host:6390");
  EXPECT_EQ(o.user, "alice");
  EXPECT_EQ(o.password, "hun@ter@2");
  EXPECT_EQ(o.host, "host");
  EXPECT_EQ(o.port, 6390);
}

TEST(FromUrl, PasswordContainingColonSplitsAtFirstColon) {
  const auto o = connection_options::from_url("redis://alice:a:b:c@host");
  EXPECT_EQ(o.user, "alice");
  EXPECT_EQ(o.password, "a:b:c");
}

TEST(FromUrl, DatabaseInPath) {
  const auto o = connection_options::from_url("redis://host:6379/5");
  EXPECT_EQ(o.database, 5);
  EXPECT_EQ(connection_options::from_url("redis://host/0").database, 0);
  EXPECT_EQ(connection_options::from_url("redis://host/").database, 0);
  EXPECT_EQ(connection_options::from_url("redis://host/2147483647").database, 2147483647);
}

TEST(FromUrl, RedissEnablesTls) {
  const auto o = connection_options::from_url("rediss://secure.example:6380");
  EXPECT_TRUE(o.tls.enabled);
  EXPECT_TRUE(o.tls.verify_peer);
  EXPECT_EQ(o.host, "secure.example");
  EXPECT_EQ(o.port, 6380);
  EXPECT_FALSE(connection_options::from_url("redis://secure.example").tls.enabled);
}

TEST(FromUrl, ValkeySchemesAreRedisOnes) {
  const auto plain = connection_options::from_url("valkey://app:pw@cache.example:6390/4");
  EXPECT_FALSE(plain.tls.enabled);
  EXPECT_EQ(plain.host, "cache.example");
  EXPECT_EQ(plain.port, 6390);
  EXPECT_EQ(plain.user, "app");
  EXPECT_EQ(plain.password, "pw");
  EXPECT_EQ(plain.database, 4);
  EXPECT_EQ(connection_options::from_url("valkey://cache.example").port, 6379);
  const auto tls = connection_options::from_url("VALKEYS://cache.example?verify=none");
  EXPECT_TRUE(tls.tls.enabled);
  EXPECT_FALSE(tls.tls.verify_peer);
  // One spelling when shown: what it connects to, not what it was called.
  EXPECT_EQ(plain.redacted_url(), "redis://app:***@cache.example:6390/4");
}

TEST(FromUrl, AllQueryOptions) {
  const auto o = connection_options::from_url(
      "rediss://u:hunter2@host:6380/1?ca=/etc/ca.pem&cert=/etc/c.pem&key=/etc/k.pem"
      "&verify=none&sni=redis.internal&name=worker-7&connect_timeout=750ms&command_timeout=3s");
  EXPECT_TRUE(o.tls.enabled);
  EXPECT_EQ(o.tls.ca_file, "/etc/ca.pem");
  EXPECT_EQ(o.tls.cert_file, "/etc/c.pem");
  EXPECT_EQ(o.tls.key_file, "/etc/k.pem");
  EXPECT_FALSE(o.tls.verify_peer);
  EXPECT_EQ(o.tls.server_name, "redis.internal");
  EXPECT_EQ(o.client_name, "worker-7");
  EXPECT_EQ(o.connect_timeout, milliseconds(750));
  EXPECT_EQ(o.command_timeout, milliseconds(3000));
  EXPECT_EQ(o.database, 1);
  EXPECT_EQ(o.user, "u");
  EXPECT_EQ(o.password, "hunter2");
}

TEST(FromUrl, VerifyPeer) {
  EXPECT_TRUE(connection_options::from_url("rediss://h?verify=peer").tls.verify_peer);
  EXPECT_FALSE(connection_options::from_url("rediss://h?verify=none").tls.verify_peer);
  // The last occurrence wins.
  EXPECT_TRUE(connection_options::from_url("rediss://h?verify=none&verify=peer").tls.verify_peer);
}

TEST(FromUrl, DbQueryOption) {
  EXPECT_EQ(connection_options::from_url("redis://h?db=4").database, 4);
  // The query is applied after the path, so it wins.
  EXPECT_EQ(connection_options::from_url("redis://h/2?db=9").database, 9);
}

TEST(FromUrl, QueryValuesArePercentDecoded) {
  const auto o = connection_options::from_url("redis://h?name=a%20b%26c&ca=%2Ftmp%2Fca.pem");
  EXPECT_EQ(o.client_name, "a b&c");
  EXPECT_EQ(o.tls.ca_file, "/tmp/ca.pem");
}

TEST(FromUrl, EmptyQueryPartsAreIgnored) {
  const auto o = connection_options::from_url("redis://h:1?&&name=x&&");
  EXPECT_EQ(o.client_name, "x");
  EXPECT_EQ(o.port, 1);
  EXPECT_EQ(connection_options::from_url("redis://h?").host, "h");
}

TEST(FromUrl, QueryTimeoutsUseDurationSyntax) {
  const auto o = connection_options::from_url("redis://h?connect_timeout=2&command_timeout=1.5m");
  EXPECT_EQ(o.connect_timeout, milliseconds(2000));
  EXPECT_EQ(o.command_timeout, milliseconds(90'000));
}

TEST(FromUrl, UnixSocket) {
  const auto o = connection_options::from_url("unix:///var/run/redis/redis.sock");
  EXPECT_EQ(o.unix_path, "/var/run/redis/redis.sock");
  EXPECT_EQ(o.database, 0);
  EXPECT_FALSE(o.tls.enabled);
  EXPECT_TRUE(o.user.empty());
  EXPECT_TRUE(o.password.empty());
}

TEST(FromUrl, UnixSocketWithDb) {
  const auto o = connection_options::from_url("unix:///tmp/redis.sock?db=2");
  EXPECT_EQ(o.unix_path, "/tmp/redis.sock");
  EXPECT_EQ(o.database, 2);
}

TEST(FromUrl, UnixSocketWithQueryOptions) {
  const auto o = connection_options::from_url("unix:///tmp/r.sock?name=cli&command_timeout=250ms");
  EXPECT_EQ(o.unix_path, "/tmp/r.sock");
  EXPECT_EQ(o.client_name, "cli");
  EXPECT_EQ(o.command_timeout, milliseconds(250));
}

TEST(FromUrl, UnixSocketWithCredentials) {
  const auto o = connection_options::from_url("unix://user:pw@/tmp/redis.sock");
  EXPECT_EQ(o.user, "user");
  EXPECT_EQ(o.password, "pw");
  EXPECT_EQ(o.unix_path, "/tmp/redis.sock");
}

TEST(FromUrl, UnixSocketPathIsPercentDecoded) {
  const auto o = connection_options::from_url("unix:///tmp/my%20redis%40x.sock");
  EXPECT_EQ(o.unix_path, "/tmp/my redis@x.sock");
}

TEST(FromUrl, UnixSocketPathContainingAt) {
  // A literal '@' inside the socket path is not userinfo: userinfo can only precede the path.
  const auto o = connection_options::from_url("unix:///run/redis@6379.sock");
  EXPECT_EQ(o.unix_path, "/run/redis@6379.sock");
  EXPECT_TRUE(o.user.empty());
}

// ---------------------------------------------------------------------------------------------
// from_url: errors. All throw errc::invalid_url and never echo the password.

TEST(FromUrlErrors, UnknownScheme) {
  expect_invalid_url("http://user:hunter2@host:6379");
  expect_invalid_url("redis+tls://:hunter2@host");
  expect_invalid_url("valkey+tls://:hunter2@host");
  expect_invalid_url("valkey-sentinel://host#m");  // a Sentinel URL is client_options' to parse
}

TEST(FromUrl, SchemesAreCaseInsensitive) {
  EXPECT_EQ(connection_options::from_url("REDIS://host").host, "host");
  EXPECT_TRUE(connection_options::from_url("Rediss://host").tls.enabled);
}

TEST(FromUrlErrors, UnknownSchemeMessageNamesTheScheme) {
  const dlock::error e = url_error("http://user:hunter2@host:6379");
  EXPECT_NE(std::string(e.what()).find("http"), std::string::npos) << e.what();
}

TEST(FromUrlErrors, MissingSchemeSeparator) {
  expect_invalid_url("user:hunter2@host:6379");
  expect_invalid_url("redis:/user:hunter2@host");
  expect_invalid_url("");
  expect_invalid_url("host:6379");
}

TEST(FromUrlErrors, MissingSchemeWithSchemeLikeTextLaterDoesNotLeakPassword) {
  expect_invalid_url("user:hunter2@host/?ca=file:///etc/ca.pem");
}

TEST(FromUrlErrors, MissingHost) {
  expect_invalid_url("redis://");
  expect_invalid_url("redis://:6379");
  expect_invalid_url("redis://user:hunter2@");
  expect_invalid_url("redis://user:hunter2@:6379");
  expect_invalid_url("redis://user:hunter2@/0");
  expect_invalid_url("redis://[]:6379");
  expect_invalid_url("rediss://:hunter2@?db=1");
}

TEST(FromUrlErrors, EmptyPort) {
  expect_invalid_url("redis://user:hunter2@host:");
  expect_invalid_url("redis://user:hunter2@host:/1");
  expect_invalid_url("redis://user:hunter2@[::1]:");
}

TEST(FromUrlErrors, PortOutOfRange) {
  expect_invalid_url("redis://user:hunter2@host:0");
  expect_invalid_url("redis://user:hunter2@host:65536");
  expect_invalid_url("redis://user:hunter2@host:99999999999999999999999");
  expect_invalid_url("redis://user:hunter2@[::1]:0");
  expect_invalid_url("redis://user:hunter2@[::1]:70000");
}

TEST(FromUrlErrors, PortNotNumeric) {
  expect_invalid_url("redis://user:hunter2@host:abc");
  expect_invalid_url("redis://user:hunter2@host:63a9");
  expect_invalid_url("redis://user:hunter2@host:-1");
  expect_invalid_url("redis://user:hunter2@host:+6379");
  expect_invalid_url("redis://user:hunter2@host: 6379");
  expect_invalid_url("redis://user:hunter2@host:6379:1");
}

TEST(FromUrlErrors, DatabaseNotANonNegativeInteger) {
  expect_invalid_url("redis://user:hunter2@host/abc");
  expect_invalid_url("redis://user:hunter2@host/-1");
  expect_invalid_url("redis://user:hunter2@host/1x");
  expect_invalid_url("redis://user:hunter2@host/1/2");
  expect_invalid_url("redis://user:hunter2@host/2147483648");  // > INT_MAX
  expect_invalid_url("redis://user:hunter2@host?db=");
  expect_invalid_url("redis://user:hunter2@host?db=x");
  expect_invalid_url("redis://user:hunter2@host?db=-3");
  expect_invalid_url("unix://user:hunter2@/tmp/r.sock?db=two");
}

TEST(FromUrlErrors, UnknownQueryOption) {
  expect_invalid_url("redis://user:hunter2@host?colour=blue");
  expect_invalid_url("redis://user:hunter2@host?DB=1");  // option names are case-sensitive
  expect_invalid_url("unix://user:hunter2@/tmp/r.sock?password=x");
}

TEST(FromUrlErrors, UnknownQueryOptionMessageNamesTheOption) {
  const dlock::error e = url_error("redis://user:hunter2@host?colour=blue");
  EXPECT_NE(std::string(e.what()).find("colour"), std::string::npos) << e.what();
}

TEST(FromUrlErrors, QueryOptionWithoutValue) {
  expect_invalid_url("redis://user:hunter2@host?verify");
  expect_invalid_url("redis://user:hunter2@host?db=1&name");
}

TEST(FromUrlErrors, VerifyMustBePeerOrNone) {
  expect_invalid_url("rediss://user:hunter2@host?verify=maybe");
  expect_invalid_url("rediss://user:hunter2@host?verify=");
  expect_invalid_url("rediss://user:hunter2@host?verify=PEER");
}

TEST(FromUrlErrors, BadDurationInQuery) {
  expect_invalid_url("redis://user:hunter2@host?connect_timeout=soon");
  expect_invalid_url("redis://user:hunter2@host?command_timeout=-1s");
  expect_invalid_url("redis://user:hunter2@host?command_timeout=");
  expect_invalid_url("redis://user:hunter2@host?connect_timeout=10x");
}

TEST(FromUrlErrors, BadDurationIsReportedAsInvalidUrlNotInvalidArgument) {
  const dlock::error e = url_error("redis://h?connect_timeout=forever");
  EXPECT_TRUE(e.code() == dlock::errc::invalid_url);
  EXPECT_FALSE(e.code() == dlock::errc::invalid_argument);
  EXPECT_NE(std::string(e.what()).find("connect_timeout"), std::string::npos) << e.what();
}

TEST(FromUrlErrors, MalformedPercentEscape) {
  expect_invalid_url("redis://us%zzer:hunter2@host");
  expect_invalid_url("redis://user:hunter2%@host");
  expect_invalid_url("redis://user:hunter2%4@host");
  expect_invalid_url("redis://user:hunter2%g0@host");
  expect_invalid_url("redis://user%:hunter2@host");
  expect_invalid_url("redis://user:hunter2@host?name=%");
  expect_invalid_url("redis://user:hunter2@host?ca=%x1");
  expect_invalid_url("unix://user:hunter2@/tmp/bad%2.sock");
  expect_invalid_url("unix://user:hunter2%@/tmp/r.sock");
}

TEST(FromUrlErrors, UnterminatedIpv6Bracket) {
  expect_invalid_url("redis://user:hunter2@[::1");
  expect_invalid_url("redis://user:hunter2@[::1:6379");
}

TEST(FromUrlErrors, TextAfterIpv6Bracket) {
  expect_invalid_url("redis://user:hunter2@[::1]6379");
  expect_invalid_url("redis://user:hunter2@[::1]x:6379");
}

TEST(FromUrlErrors, UnixRelativeOrMissingPath) {
  expect_invalid_url("unix://tmp/redis.sock");
  expect_invalid_url("unix://");
  expect_invalid_url("unix://user:hunter2@tmp/redis.sock");
  expect_invalid_url("unix://user:hunter2@");
  expect_invalid_url("unix://?db=1");
}

TEST(FromUrlErrors, ForgottenAtSignDoesNotLeakPassword) {
  // Without the '@' the password lands where the port belongs.
  expect_invalid_url("redis://user:hunter2:6379");
  expect_invalid_url("redis://user:hunter2");
  expect_invalid_url("rediss://user:hunter2/0");
  expect_invalid_url("redis://user:hunter2host:6379");
}

TEST(FromUrlErrors, PasswordWithUnescapedSlashDoesNotLeak) {
  expect_invalid_url("redis://user:hun/ter2@host");
  expect_invalid_url("redis://user:6379/hunter2@host");
}

TEST(FromUrlErrors, PasswordWithUnescapedQuestionMarkDoesNotLeak) {
  expect_invalid_url("redis://user:pass?hunter2@host");
  expect_invalid_url("redis://user:pa?x=hunter2@host");
}

// ---------------------------------------------------------------------------------------------
// redacted_url

TEST(RedactedUrl, DefaultOptions) {
  EXPECT_EQ(connection_options{}.redacted_url(), "redis://127.0.0.1:6379");
}

TEST(RedactedUrl, PasswordIsReplaced) {
  const auto o = connection_options::from_url("redis://alice:hunter2@host:6380/3");
  const std::string url = o.redacted_url();
  EXPECT_EQ(url, "redis://alice:***@host:6380/3");
  EXPECT_EQ(url.find("hunter2"), std::string::npos);
}

TEST(RedactedUrl, PasswordWithEmptyUser) {
  const auto o = connection_options::from_url("redis://:hunter2@host");
  EXPECT_EQ(o.redacted_url(), "redis://:***@host:6379");
}

TEST(RedactedUrl, UserOnly) {
  EXPECT_EQ(connection_options::from_url("redis://alice@host").redacted_url(),
            "redis://alice@host:6379");
}

TEST(RedactedUrl, Tls) {
  const auto o = connection_options::from_url("rediss://:hunter2@secure:6380?verify=none");
  EXPECT_EQ(o.redacted_url(), "rediss://:***@secure:6380");
}

TEST(RedactedUrl, Ipv6IsBracketed) {
  const auto o = connection_options::from_url("redis://[::1]:7000/2");
  EXPECT_EQ(o.redacted_url(), "redis://[::1]:7000/2");
}

TEST(RedactedUrl, Unix) {
  EXPECT_EQ(connection_options::from_url("unix:///tmp/r.sock").redacted_url(),
            "unix:///tmp/r.sock");
  EXPECT_EQ(connection_options::from_url("unix:///tmp/r.sock?db=2").redacted_url(),
            "unix:///tmp/r.sock?db=2");
  EXPECT_EQ(connection_options::from_url("unix://u:hunter2@/tmp/r.sock?db=1").redacted_url(),
            "unix://u:***@/tmp/r.sock?db=1");
}

TEST(RedactedUrl, PercentEncodedPasswordIsStillHidden) {
  const auto o = connection_options::from_url("redis://u:hun%74er2@host");
  EXPECT_EQ(o.password, "hunter2");
  EXPECT_EQ(o.redacted_url().find("hun"), std::string::npos) << o.redacted_url();
}

void expect_round_trip(std::string_view url) {
  SCOPED_TRACE(std::string(url));
  const auto o = connection_options::from_url(url);
  const std::string redacted = o.redacted_url();
  EXPECT_EQ(redacted.find(kPassword), std::string::npos) << redacted;
  const auto back = connection_options::from_url(redacted);
  EXPECT_EQ(back.host, o.host);
  EXPECT_EQ(back.port, o.port);
  EXPECT_EQ(back.unix_path, o.unix_path);
  EXPECT_EQ(back.user, o.user);
  EXPECT_EQ(back.password, o.password.empty() ? "" : "***");
  EXPECT_EQ(back.database, o.database);
  EXPECT_EQ(back.tls.enabled, o.tls.enabled);
  // Redacting again is stable.
  EXPECT_EQ(back.redacted_url(), redacted);
}

TEST(RedactedUrl, RoundTripsThroughFromUrl) {
  expect_round_trip("redis://host");
  expect_round_trip("redis://host:1234");
  expect_round_trip("redis://alice:hunter2@host:6380/3");
  expect_round_trip("redis://:hunter2@host/15");
  expect_round_trip("redis://alice@host");
  expect_round_trip("rediss://alice:hunter2@host:6380");
  expect_round_trip("rediss://[::1]:7000/1");
  expect_round_trip("redis://u:hunter2@[2001:db8::1]");
  expect_round_trip("unix:///tmp/r.sock");
  expect_round_trip("unix:///tmp/r.sock?db=4");
  expect_round_trip("unix://u:hunter2@/tmp/r.sock?db=4");
  expect_round_trip("unix://:hunter2@/tmp/r.sock");
}

// ---------------------------------------------------------------------------------------------
// parse_duration

TEST(ParseDuration, Units) {
  EXPECT_EQ(dlock::parse_duration("500ms"), milliseconds(500));
  EXPECT_EQ(dlock::parse_duration("10s"), milliseconds(10'000));
  EXPECT_EQ(dlock::parse_duration("2m"), milliseconds(120'000));
  EXPECT_EQ(dlock::parse_duration("1h"), milliseconds(3'600'000));
}

TEST(ParseDuration, Fractions) {
  EXPECT_EQ(dlock::parse_duration("1.5s"), milliseconds(1500));
  EXPECT_EQ(dlock::parse_duration("0.25s"), milliseconds(250));
  EXPECT_EQ(dlock::parse_duration("0.5m"), milliseconds(30'000));
  EXPECT_EQ(dlock::parse_duration("1.25h"), milliseconds(4'500'000));
  EXPECT_EQ(dlock::parse_duration("2.4ms"), milliseconds(2));  // rounded to the nearest ms
  EXPECT_EQ(dlock::parse_duration("2.6ms"), milliseconds(3));
  EXPECT_EQ(dlock::parse_duration("0.0001s"), milliseconds(0));
}

TEST(ParseDuration, BareNumberMeansSeconds) {
  EXPECT_EQ(dlock::parse_duration("3"), milliseconds(3000));
  EXPECT_EQ(dlock::parse_duration("0.5"), milliseconds(500));
  EXPECT_EQ(dlock::parse_duration("007"), milliseconds(7000));
}

TEST(ParseDuration, Zero) {
  EXPECT_EQ(dlock::parse_duration("0"), milliseconds(0));
  EXPECT_EQ(dlock::parse_duration("0ms"), milliseconds(0));
  EXPECT_EQ(dlock::parse_duration("0s"), milliseconds(0));
  EXPECT_EQ(dlock::parse_duration("0.0h"), milliseconds(0));
}

TEST(ParseDuration, LargeButSaneValues) {
  EXPECT_EQ(dlock::parse_duration("8760h"), milliseconds(8760LL * 3'600'000));  // one year
  EXPECT_EQ(dlock::parse_duration("1000000000000ms"), milliseconds(1'000'000'000'000LL));
}

void expect_bad_duration(std::string_view text) {
  SCOPED_TRACE("duration: '" + std::string(text) + "'");
  try {
    const auto d = dlock::parse_duration(text);
    ADD_FAILURE() << "accepted as " << d.count() << "ms";
  } catch (const dlock::error& e) {
    EXPECT_TRUE(e.code() == dlock::errc::invalid_argument) << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "non-dlock exception: " << e.what();
  }
}

TEST(ParseDuration, RejectsEmpty) {
  expect_bad_duration("");
}

TEST(ParseDuration, RejectsNegative) {
  expect_bad_duration("-1s");
  expect_bad_duration("-1");
  expect_bad_duration("-0ms");
}

TEST(ParseDuration, RejectsUnknownUnits) {
  expect_bad_duration("10x");
  expect_bad_duration("10S");
  expect_bad_duration("10MS");
  expect_bad_duration("10sec");
  expect_bad_duration("10 s");
  expect_bad_duration("10us");
  expect_bad_duration("1d");
  expect_bad_duration("10s ");
}

TEST(ParseDuration, RejectsMissingNumber) {
  expect_bad_duration("ms");
  expect_bad_duration("s");
  expect_bad_duration(" 1s");
  expect_bad_duration("+1s");
  expect_bad_duration("inf");
  expect_bad_duration("nan");
}

TEST(ParseDuration, RejectsMalformedNumbers) {
  expect_bad_duration(".5s");
  expect_bad_duration("1.");
  expect_bad_duration("1.s");
  expect_bad_duration("1..5s");
  expect_bad_duration("1.2.3s");
  expect_bad_duration("1e3");
  expect_bad_duration("1E3ms");
  expect_bad_duration("0x10s");
  expect_bad_duration(".");
}

TEST(ParseDuration, RejectsHugeValues) {
  expect_bad_duration("1000000000001ms");
  expect_bad_duration("99999999999999999999h");
  expect_bad_duration("9223372036854775807ms");
  expect_bad_duration("18446744073709551616s");
  expect_bad_duration(std::string(400, '9') + "s");  // out of double range
  expect_bad_duration("1" + std::string(400, '0'));
}

TEST(ParseDuration, ErrorMessageQuotesTheInput) {
  try {
    (void)dlock::parse_duration("10x");
    ADD_FAILURE() << "no exception";
  } catch (const dlock::error& e) {
    EXPECT_NE(std::string(e.what()).find("10x"), std::string::npos) << e.what();
  }
}

}  // namespace
