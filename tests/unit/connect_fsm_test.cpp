// The connection's decisions without a socket: what the handshake sends, how its replies are
// judged, the reconnect backoff, and what a timed-out attempt is called.
#include <gtest/gtest.h>
#include <unistd.h>

#include "dlock/error.hpp"
#include "dlock/version.hpp"
#include "net/connect_fsm.hpp"

namespace {

using namespace std::chrono_literals;
using dlock::errc;
using dlock::reply;
using dlock::net::classify_error_reply;
using dlock::net::handshake;
using dlock::net::reconnect_backoff;
using status = handshake::status;

dlock::connection_options with(std::string user, std::string password, int db, std::string name) {
  dlock::connection_options o;
  o.user = std::move(user);
  o.password = std::move(password);
  o.database = db;
  o.client_name = std::move(name);
  return o;
}

TEST(Handshake, SendsOnlyWhatIsNeededInOneWrite) {
  const auto plain = with("", "", 0, "");
  // Unnamed: "dlock:HOST:PID", for operators reading CLIENT LIST.
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::string name =
      std::string("dlock:").append(host).append(":").append(std::to_string(::getpid()));
  for (auto& c : name) {
    if (c <= ' ' || c > '~') c = '_';
  }
  // Then the library's name and version, for CLIENT LIST / CLIENT INFO.
  const std::string version = dlock::version;
  EXPECT_EQ(handshake(plain).request(),
            std::string("*3\r\n$6\r\nCLIENT\r\n$7\r\nSETNAME\r\n$")
                .append(std::to_string(name.size()))
                .append("\r\n")
                .append(name)
                .append("\r\n")
                .append("*4\r\n$6\r\nCLIENT\r\n$7\r\nSETINFO\r\n$8\r\nlib-name\r\n$5\r\ndlock\r\n")
                .append("*4\r\n$6\r\nCLIENT\r\n$7\r\nSETINFO\r\n$7\r\nlib-ver\r\n$")
                .append(std::to_string(version.size()))
                .append("\r\n")
                .append(version)
                .append("\r\n"));
  const auto full = with("alice", "pw", 3, "worker");
  const handshake h(full);
  const auto& r = h.request();
  EXPECT_EQ(r.find("*3\r\n$4\r\nAUTH\r\n$5\r\nalice\r\n$2\r\npw\r\n"), 0u) << r;
  EXPECT_NE(r.find("$6\r\nSELECT\r\n$1\r\n3\r\n"), std::string::npos);
  EXPECT_NE(r.find("$6\r\nworker\r\n"), std::string::npos);
  const auto legacy = with("", "pw", 0, "");
  EXPECT_EQ(handshake(legacy).request().find("*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n"), 0u);
}

TEST(Handshake, IsReadyAfterEveryReplyIsFine) {
  const auto o = with("alice", "pw", 3, "");
  handshake h(o);
  for (int i = 0; i < 4; ++i)  // AUTH, SELECT, SETNAME, SETINFO lib-name
    EXPECT_EQ(h.on_reply(reply::simple_string("OK")).state, status::more);
  EXPECT_EQ(h.on_reply(reply::simple_string("OK")).state, status::ready);
  EXPECT_EQ(h.on_reply(reply::simple_string("OK")).state, status::failed) << "nothing more due";
}

TEST(Handshake, AFailingAuthIsAnAuthenticationFailureWhateverItsWording) {
  const auto o = with("alice", "secret", 0, "");
  handshake h(o);
  const auto v = h.on_reply(reply::error("ERR something unexpected"));
  EXPECT_EQ(v.state, status::failed);
  EXPECT_EQ(v.error, errc::auth_failed);
  EXPECT_NE(v.detail.find("something unexpected"), std::string::npos);
  EXPECT_EQ(v.detail.find("secret"), std::string::npos) << "never the password";
}

TEST(Handshake, NopermOnTheDefaultNameIsTolerated) {
  const auto unnamed = with("", "", 0, "");
  handshake h(unnamed);
  EXPECT_EQ(h.on_reply(reply::error("NOPERM no CLIENT for you")).state, status::more);
  const auto named = with("", "", 0, "worker");
  handshake n(named);
  const auto v = n.on_reply(reply::error("NOPERM no CLIENT for you"));
  EXPECT_EQ(v.state, status::failed) << "the user asked for that name";
  EXPECT_EQ(v.error, errc::permission_denied);
}

TEST(Handshake, AServerThatDoesNotKnowSetinfoIsStillReady) {
  // Redis before 7.2 (and Valkey before 8) answer CLIENT SETINFO with an error; an ACL user may
  // be refused it. Neither is a reason to give up the connection.
  const auto o = with("", "", 0, "worker");
  handshake h(o);
  EXPECT_EQ(h.on_reply(reply::simple_string("OK")).state, status::more);  // SETNAME
  EXPECT_EQ(h.on_reply(reply::error("ERR unknown subcommand 'SETINFO'. Try CLIENT HELP.")).state,
            status::more);
  EXPECT_EQ(h.on_reply(reply::error("NOPERM no CLIENT SETINFO for you")).state, status::ready);
}

TEST(Handshake, ABadDatabaseIsAServerError) {
  const auto o = with("", "", 99, "");
  handshake h(o);
  const auto v = h.on_reply(reply::error("ERR DB index is out of range"));
  EXPECT_EQ(v.state, status::failed);
  EXPECT_EQ(v.error, errc::server_error);
}

TEST(ReconnectBackoff, StartsAtOnceThenDoublesUpToTheMaximumWithJitter) {
  reconnect_backoff b(10ms, 80ms);
  EXPECT_EQ(b.next(12345), 0ms) << "the first retry is immediate";
  const std::chrono::milliseconds steps[] = {10ms, 20ms, 40ms, 80ms, 80ms};
  for (const auto step : steps) {
    const auto lowest = b.next(0);
    EXPECT_EQ(lowest, step / 2) << step.count();
  }
  reconnect_backoff c(10ms, 80ms);
  c.next(0);
  EXPECT_EQ(c.next(5), 10ms) << "random 5 over [5, 10] is the top";
  const auto any = c.next(~0ull);
  EXPECT_GE(any, 10ms);
  EXPECT_LE(any, 20ms);
  c.reset();
  EXPECT_EQ(c.next(7), 0ms);
}

TEST(ConnectTimeout, APlaintextPortGivenAsTlsIsNamed) {
  dlock::connection_options o;
  o.connect_timeout = 500ms;
  o.tls.enabled = true;
  const auto tls = dlock::net::connect_timeout_message(o, true);
  EXPECT_NE(tls.find("timed out after 500 ms"), std::string::npos);
  EXPECT_NE(tls.find("TLS handshake"), std::string::npos);
  EXPECT_EQ(dlock::net::connect_timeout_message(o, false).find("TLS"), std::string::npos);
}

TEST(ClassifyErrorReply, EachServerConditionHasItsCode) {
  EXPECT_EQ(classify_error_reply("WRONGPASS invalid username-password pair"), errc::auth_failed);
  EXPECT_EQ(classify_error_reply("NOAUTH Authentication required."), errc::auth_failed);
  EXPECT_EQ(classify_error_reply("WRONGTYPE holds a list, not a lock"), errc::wrong_type);
  EXPECT_EQ(classify_error_reply("NOPERM this user has no permissions"), errc::permission_denied);
  EXPECT_EQ(classify_error_reply("ERR The user executing the script can't run this command"),
            errc::permission_denied);
  EXPECT_EQ(classify_error_reply("ERR ACL failure in script: User u has no permissions to run the "
                                 "'incr' command script: 33a0eb50, on @user_script:41."),
            errc::permission_denied);
  EXPECT_EQ(classify_error_reply("ERR ACL failure in script: No permissions to access a key"),
            errc::permission_denied);
  EXPECT_EQ(classify_error_reply("READONLY You can't write against a read only replica."),
            errc::read_only);
  for (const char* busy : {"LOADING Redis is loading", "BUSY Redis is busy running a script",
                           "TRYAGAIN Multiple keys request", "MASTERDOWN Link with MASTER is down",
                           "CLUSTERDOWN The cluster is down"}) {
    EXPECT_EQ(classify_error_reply(busy), errc::server_busy) << busy;
  }
  EXPECT_EQ(classify_error_reply("OOM command not allowed"), errc::server_error);
  EXPECT_EQ(classify_error_reply("ERR unknown command"), errc::server_error);
  EXPECT_EQ(classify_error_reply(""), errc::server_error);
}

}  // namespace
