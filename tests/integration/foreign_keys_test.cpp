// Names and companion keys that hold someone else's data: a lock never joins it, never deletes
// it, and never writes half a state beside it; the library reports errc::wrong_type and the
// command line exits 65 with one line.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cli_support.hpp"
#include "dlock/dlock.hpp"

namespace dlock::testing {
namespace {

using namespace std::chrono_literals;

class ForeignKeys : public Cli {
 protected:
  /// Every key of the server with its DUMP, to show that a refused attempt wrote nothing.
  std::vector<std::pair<std::string, std::string>> everything() {
    raw_redis raw(server().port());
    std::vector<std::pair<std::string, std::string>> out;
    const auto keys = raw({"KEYS", "*"});
    for (const auto& k : keys.elements()) {
      out.emplace_back(k.str(), raw({"DUMP", k.str()}).to_string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  /// Runs `attempt`, which must throw errc::wrong_type naming `what`.
  template <class Attempt>
  void expect_wrong_type(Attempt attempt, const std::string& what) {
    try {
      attempt();
      ADD_FAILURE() << "taken for a lock: " << what;
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::wrong_type) << e.what();
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  }
};

// A user's hash that happens to have a 'mode' field (and an expiry, as a session or a cache
// entry has) is not a read-write lock: a read or write lock on its name is refused, and the hash
// is never joined, nor deleted when the would-be hold ends.
TEST_F(ForeignKeys, AHashWithAModeFieldIsNotAReadWriteLock) {
  raw_redis raw(server().port());
  const std::vector<std::vector<std::string>> hashes = {
      {"mode", "read", "user", "ada", "theme", "dark"},
      {"mode", "dark"},
      {"mode", "write", "8743c9c0-0795-4907-87fd-6c719a6b4586:1:write", "1", "note", "x"},
  };
  client c(url());
  for (std::size_t i = 0; i < hashes.size(); ++i) {
    const auto name = key("settings:" + std::to_string(i));
    std::vector<std::string> hset = {"HSET", name};
    hset.insert(hset.end(), hashes[i].begin(), hashes[i].end());
    raw(hset);
    raw({"EXPIRE", name, "3600"});
    const auto before = everything();
    expect_wrong_type([&] { (void)c.read_write(name).read().try_acquire(); }, "not a lock");
    expect_wrong_type([&] { (void)c.read_write(name).write().try_acquire(); }, "not a lock");
    for (const char* kind : {"read", "write"}) {
      const auto r = dlock_cli(run_args({"--kind", kind, name, "--", "true"}));
      EXPECT_EQ(r.code, 65) << kind << ": " << r.output;
      EXPECT_EQ(line_count(r.output), 1u) << r.output;
      EXPECT_NE(r.output.find("holds a hash that is not a lock"), std::string::npos) << r.output;
    }
    EXPECT_EQ(everything(), before) << "the hash " << name << " changed";
  }
  // A read-write lock in Redisson's layout is still one, readers and a writer's field alike.
  const auto rw = key("rw");
  auto read = c.read_write(rw).read().try_acquire();
  ASSERT_TRUE(read);
  raw({"HSET", rw, "1b4e28ba-2fa1-11d2-883f-0016d3cca427:7", "2"});
  auto other = client(url()).read_write(rw).read().try_acquire();
  EXPECT_TRUE(other);
}

// A lock's companion keys (its fencing counter, a fair lock's queue and its deadlines) holding
// something else: the acquisition is refused before anything is written, with a WRONGTYPE that
// names the companion, rather than the server's bare words after a half-written grant.
TEST_F(ForeignKeys, CompanionKeysOfAnotherTypeAreRefusedBeforeAnyWrite) {
  raw_redis raw(server().port());
  client c(url());
  struct damage {
    std::string kind;  // the CLI's --kind
    std::vector<std::string> command;
    std::string what;
  };
  const auto counter = [&](const std::string& n) { return keys_of_lock(key(n)).fence_counter; };
  const std::vector<damage> cases = {
      {"simple", {"SET", counter("s1"), "not a number"}, "its fencing counter holds a string"},
      {"simple", {"HSET", counter("s2"), "f", "1"}, "its fencing counter holds a hash"},
      {"reentrant", {"SET", counter("r1"), "x"}, "its fencing counter holds a string"},
      {"fair",
       {"RPUSH", derived_key("redisson_lock_timeout", key("f1")), "x"},
       "its waiters' deadlines hold a list"},
      {"fair",
       {"SET", derived_key("redisson_lock_queue", key("f2")), "x"},
       "its waiter queue holds a string"},
      {"read", {"SET", counter("rw1"), "x"}, "its fencing counter holds a string"},
  };
  const std::vector<std::string> names = {"s1", "s2", "r1", "f1", "f2", "rw1"};
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& d = cases[i];
    const auto name = key(names[i]);
    SCOPED_TRACE(name);
    raw(d.command);
    const auto before = everything();
    expect_wrong_type(
        [&] {
          if (d.kind == "simple") return (void)c.simple(name).try_acquire();
          if (d.kind == "reentrant") return (void)c.reentrant(name).try_acquire();
          if (d.kind == "fair") return (void)c.fair(name).try_acquire();
          (void)c.read_write(name).read().try_acquire();
        },
        d.what);
    const auto r = dlock_cli(run_args({"--kind", d.kind, name, "--", "true"}));
    EXPECT_EQ(r.code, 65) << r.output;
    EXPECT_EQ(line_count(r.output), 1u) << r.output;
    EXPECT_NE(r.output.find(d.what), std::string::npos) << r.output;
    EXPECT_EQ(everything(), before) << "a refused acquisition wrote something";
  }
}

// A leased semaphore's permits-taken set of another type: refused before the count is created,
// by the library and by `dlock sem --permits`, in one line naming what is wrong.
TEST_F(ForeignKeys, ALeasedSemaphoreWhosePermitsTakenSetIsNotOneIsRefusedBeforeAnyWrite) {
  raw_redis raw(server().port());
  client c(url());
  const auto name = key("jobs");
  raw({"SET", "{" + name + "}:timeout", "text"});
  const auto before = everything();
  const std::string what = "its permits-taken set holds a string";
  expect_wrong_type([&] { (void)c.leased_semaphore(name).try_set_permits(2); }, what);
  expect_wrong_type([&] { (void)c.leased_semaphore(name).add_permits(2); }, what);
  expect_wrong_type([&] { (void)c.leased_semaphore(name).try_acquire(); }, what);
  const auto r = dlock_cli({"--url", url(), "sem", name, "--permits", "2", "--", "true"});
  EXPECT_EQ(r.code, 65) << r.output;
  EXPECT_EQ(line_count(r.output), 1u) << r.output;
  EXPECT_NE(r.output.find(what), std::string::npos) << r.output;
  EXPECT_EQ(everything(), before) << "a refused call wrote something";
}

}  // namespace
}  // namespace dlock::testing
