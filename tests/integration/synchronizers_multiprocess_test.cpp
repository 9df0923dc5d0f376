// The synchronizers across real processes (tests/worker/sync_worker.cpp), on a standalone
// server, a Sentinel set and a 3-master cluster: the fair lock's FIFO order over eight
// processes (checked against the server's own queue), a dead fair waiter's bounded delay,
// readers sharing and writers excluding, upgrades that never deadlock, writers never starved by
// overlapping readers, leased permits never exceeded and given back by dead holders, release by
// id; and, on a standalone server, interop with Redisson's fair-lock and read-lock protocols
// written out here as Lua (from Redisson's semantics, not its code).
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <deque>
#include <future>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include "child_process.hpp"
#include "deployments.hpp"
#include "dlock/dlock.hpp"
#include "redis_fixture.hpp"

namespace dlock::testing {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

milliseconds ms_between(steady::time_point from, steady::time_point to) {
  return std::chrono::duration_cast<milliseconds>(to - from);
}

std::string ms_text(milliseconds d) {
  return std::to_string(d.count()) + " ms";
}

/// Reads a worker's lines until one starts with `prefix` (within `limit`); every "violation" or
/// "error" line it reports on the way fails the test.
std::optional<std::string> expect_line(child_process& w, const std::string& prefix,
                                       milliseconds limit = 60s) {
  const auto deadline = steady::now() + limit;
  for (;;) {
    const auto left = ms_between(steady::now(), deadline);
    if (left <= 0ms) return std::nullopt;
    auto line = w.read_line(left);
    if (!line) return std::nullopt;
    if (line->starts_with("violation") || line->starts_with("error")) ADD_FAILURE() << *line;
    if (line->starts_with(prefix)) return line;
  }
}

/// Waits (bounded) until `done` holds; false if it never did.
template <class Condition>
bool eventually(Condition done, milliseconds limit = 10s) {
  const auto deadline = steady::now() + limit;
  while (!done()) {
    if (steady::now() > deadline) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

/// Redisson's rule for a key derived from a name by a suffix: `{NAME}:suffix`, or
/// `NAME:suffix` when the name has a brace of its own.
std::string suffixed(const std::string& name, const std::string& suffix) {
  if (name.find('{') != std::string::npos) return name + ":" + suffix;
  return "{" + name + "}:" + suffix;
}

class SyncMultiProcess : public ::testing::TestWithParam<std::string> {
 protected:
  // One deployment of each kind for the whole suite (every test uses its own names): starting
  // a Sentinel set or a cluster takes seconds.
  static std::map<std::string, std::unique_ptr<deployment>>& shared() {
    static std::map<std::string, std::unique_ptr<deployment>> deployments;
    return deployments;
  }
  static void TearDownTestSuite() { shared().clear(); }
  void SetUp() override {
    auto& d = shared()[GetParam()];
    if (!d) d = start_deployment(GetParam());
    d_ = d.get();
  }

  deployment& d() { return *d_; }
  bool standalone() const { return GetParam() == "standalone"; }
  std::string key(std::string_view name) const {
    return std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + ":" +
           std::string(name);
  }
  raw_redis raw_for(std::string_view key) { return raw_redis(d().port_for(key)); }

  /// A sync_worker process on this deployment: `mode`, the target, then `args`.
  child_process worker(const std::string& mode, std::vector<std::string> args) {
    args.insert(args.begin(), {sync_worker_path(), mode, d().worker_target()});
    return child_process(args, captured);
  }

  /// Clients subscribed to `channel` (sharded channels on a cluster).
  std::int64_t subscribers(const std::string& channel) {
    return raw_for(channel)({"PUBSUB", d().numsub(), channel}).at(1).integer();
  }

 private:
  deployment* d_ = nullptr;
};

INSTANTIATE_TEST_SUITE_P(Deployments, SyncMultiProcess, ::testing::ValuesIn(all_deployments),
                         [](const auto& param_info) { return param_info.param; });

// ---- fair lock ----

/// The server's own record of a fair lock's queue and of the grants, read through MONITOR on the
/// node that serves the lock (its queue and the workers' grant list share its slot). MONITOR
/// shows every command in the order the server executed it, including the commands inside
/// scripts, so the stream holds, in their true order:
///   - each arrival in the queue: the `rpush` onto `redisson_lock_queue:{NAME}` inside the
///     acquire script (the queue is Redisson's list; joining it is an append),
///   - each grant: the holder's own `RPUSH grants:{NAME} <owner>`, sent while it holds the lock
///     (no other grant can come between a grant and its holder's record).
class queue_monitor {
 public:
  struct event {
    bool arrival;  // else a grant
    std::string owner;
  };

  queue_monitor(std::uint16_t port, std::string queue, std::string grants)
      : port_(port),
        queue_(std::move(queue)),
        grants_(std::move(grants)),
        cli_({embedded::default_programs().cli, "-p", std::to_string(port), "MONITOR"}, captured) {
    started_ = cli_.read_line(10s) == "OK";
    if (started_) reader_ = std::thread([this] { read(); });
  }
  ~queue_monitor() { stop(); }

  bool started() const { return started_; }

  /// Marks the end of the stream, waits until the reader has seen it, and returns the events.
  std::vector<event> stop() {
    if (reader_.joinable()) {
      raw_redis raw(port_);
      raw({"ECHO", end_marker});
      reader_.join();
    }
    return events_;
  }
  bool saw_end() const { return saw_end_; }

 private:
  static constexpr const char* end_marker = "queue-monitor-end";

  // A MONITOR line: `<time> [<db> <client>] "arg" "arg" ...`, arguments quoted with C escapes.
  static std::vector<std::string> arguments(const std::string& line) {
    std::vector<std::string> args;
    auto at = line.find("] ");
    if (at == std::string::npos) return args;
    for (at += 2; at < line.size(); ++at) {
      if (line[at] != '"') continue;
      std::string arg;
      for (++at; at < line.size() && line[at] != '"'; ++at) {
        if (line[at] == '\\' && at + 1 < line.size()) {
          const char c = line[++at];
          if (c == 'x' && at + 2 < line.size()) {
            arg += static_cast<char>(std::stoi(line.substr(at + 1, 2), nullptr, 16));
            at += 2;
          } else {
            arg += c == 'n' ? '\n' : c == 'r' ? '\r' : c == 't' ? '\t' : c;
          }
        } else {
          arg += line[at];
        }
      }
      args.push_back(std::move(arg));
    }
    return args;
  }

  void read() {
    const auto deadline = steady::now() + 10min;
    while (steady::now() < deadline) {
      const auto line = cli_.read_line(1s);
      if (!line) {
        if (cli_.try_wait()) return;  // redis-cli ended
        continue;
      }
      auto args = arguments(*line);
      if (args.empty()) continue;
      std::string command = args[0];
      std::transform(command.begin(), command.end(), command.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      if (command == "echo" && args.size() == 2 && args[1] == end_marker) {
        saw_end_ = true;
        return;
      }
      if (command != "rpush" || args.size() < 3) continue;
      for (std::size_t i = 2; i < args.size(); ++i) {
        if (args[1] == queue_) events_.push_back({true, args[i]});
        if (args[1] == grants_) events_.push_back({false, args[i]});
      }
    }
  }

  std::uint16_t port_;
  std::string queue_, grants_;
  child_process cli_;
  bool started_ = false;
  bool saw_end_ = false;
  std::thread reader_;
  std::vector<event> events_;
};

// Eight processes take a fair lock 200 times each (100 on Sentinel and cluster, whose
// deployments share the machine with more servers), keeping a non-atomic counter under it.
//
// The order is checked exactly, against the server's own order (queue_monitor), not against
// what the workers observe: a worker that looked for itself in the queue could be granted (or
// overtaken) before it looked, so its view has gaps. Replaying the stream, the waiters that
// joined the queue and have not been granted yet form a FIFO; a grant to an owner in it must go
// to its front (the one that joined first, whatever happened meanwhile), and a grant to an owner
// not in it is a grant without queueing (the lock was free and nobody waited). A waiter never
// joins twice for one acquisition: that would mean its place lapsed while it was alive (the
// waiter lease is the default 5 s, renewed every 1.7 s). Each worker waits for one acquisition
// at a time under one owner id, so an owner's arrival and its next grant belong to the same
// acquisition.
TEST_P(SyncMultiProcess, FairLockGrantsEightProcessesInTheServersQueueOrder) {
  constexpr int processes = 8;
  const int per_process = standalone() ? 200 : 100;
  const auto name = key("fair"), counter = key("counter");
  const auto queue = derived_key("redisson_lock_queue", name);
  const auto grants = derived_key("grants", name);
  queue_monitor monitor(d().port_for(name), queue, grants);
  ASSERT_TRUE(monitor.started());

  std::vector<child_process> workers;
  for (int i = 0; i < processes; ++i) {
    workers.push_back(
        worker("fifo", {name, counter, std::to_string(i), std::to_string(per_process)}));
  }
  for (auto& w : workers) {
    EXPECT_TRUE(expect_line(w, "done", 120s)) << "a worker did not finish";
    EXPECT_EQ(w.wait(), 0);
  }
  const auto events = monitor.stop();
  ASSERT_TRUE(monitor.saw_end());

  const int total = processes * per_process;
  std::deque<std::string> waiting;  // joined the queue, not granted yet, in joining order
  int arrivals = 0, queued_grants = 0, direct_grants = 0;
  std::vector<std::string> problems;
  for (const auto& e : events) {
    const auto in_queue = std::find(waiting.begin(), waiting.end(), e.owner);
    if (e.arrival) {
      ++arrivals;
      if (in_queue != waiting.end()) problems.push_back(e.owner + " joined the queue twice");
      waiting.push_back(e.owner);
    } else if (in_queue == waiting.end()) {
      ++direct_grants;
    } else {
      ++queued_grants;
      if (in_queue != waiting.begin()) {
        problems.push_back("granted " + e.owner + " while " + waiting.front() +
                           ", which joined earlier, waited");
      }
      waiting.erase(in_queue);
    }
  }
  EXPECT_TRUE(problems.empty()) << problems.size()
                                << " order violations, the first: " << problems.front();
  EXPECT_EQ(queued_grants + direct_grants, total);
  EXPECT_EQ(arrivals, queued_grants) << "every waiter that joined the queue was granted";
  EXPECT_TRUE(waiting.empty());
  EXPECT_GE(queued_grants, total / 2) << "the workers hardly ever waited: the test is too easy";
  std::cout << "[ info ] " << queued_grants << " grants through the queue, " << direct_grants
            << " without waiting\n";

  EXPECT_EQ(raw_for(counter)({"GET", counter}).str(), std::to_string(total));
  auto raw = raw_for(name);
  EXPECT_EQ(raw({"LLEN", grants}).integer(), total);
  EXPECT_EQ(raw({"EXISTS", name}).integer(), 0);
  EXPECT_EQ(raw({"LLEN", queue}).integer(), 0);
  EXPECT_EQ(raw({"ZCARD", derived_key("redisson_lock_timeout", name)}).integer(), 0);
}

// A waiter killed while queued stops renewing its place, which lapses within its waiter lease:
// the waiter behind it gets the lock at most that long (plus one re-check, a third of the lease,
// and scheduling) after the holder's release, not minutes later as with Redisson's deadlines.
TEST_P(SyncMultiProcess, AFairWaiterKilledInTheQueueDelaysTheNextByAtMostItsWaiterLease) {
  constexpr auto waiter_lease = 2000ms;
  constexpr auto margin = 1500ms;
  const auto name = key("fair");
  auto o = d().options();
  o.fair_waiter_lease = waiter_lease;
  client c(o);
  auto lock = c.fair(name);
  auto held = lock.try_acquire();
  ASSERT_TRUE(held);

  const auto lease_ms = std::to_string(waiter_lease.count());
  auto victim = worker("fair-wait", {name, "victim", lease_ms, "60000"});
  const auto victim_owner = expect_line(victim, "owner ");
  ASSERT_TRUE(victim_owner);
  const auto victim_id = victim_owner->substr(6);
  ASSERT_TRUE(eventually([&] { return lock.queue() == std::vector<std::string>{victim_id}; }));
  auto next = worker("fair-wait", {name, "next", lease_ms, "60000"});
  const auto next_owner = expect_line(next, "owner ");
  ASSERT_TRUE(next_owner);
  const auto next_id = next_owner->substr(6);
  ASSERT_TRUE(eventually([&] {
    return lock.queue() == std::vector<std::string>{victim_id, next_id};
  })) << "the next waiter queues behind the victim";

  victim.signal(SIGKILL);
  EXPECT_EQ(victim.wait(), 128 + SIGKILL);
  const auto released = steady::now();
  ASSERT_TRUE(held.release());
  const auto granted = expect_line(next, "acquired ", 10s);
  const auto delay = ms_between(released, steady::now());
  ASSERT_TRUE(granted) << "the dead waiter's place never lapsed";
  EXPECT_LE(delay, waiter_lease + margin) << "waiter lease " << ms_text(waiter_lease);
  std::cout << "[ info ] granted " << ms_text(delay) << " after the release\n";
  EXPECT_TRUE(expect_line(next, "done"));
  EXPECT_EQ(next.wait(), 0);

  auto raw = raw_for(name);
  EXPECT_TRUE(raw({"LPOS", derived_key("redisson_lock_queue", name), victim_id}).is_nil())
      << "the dead waiter left the queue";
  EXPECT_TRUE(raw({"ZSCORE", derived_key("redisson_lock_timeout", name), victim_id}).is_nil());
  EXPECT_TRUE(lock.queue().empty());
}

// ---- read-write lock ----

// Four reader processes and two writer processes loop. Readers check that no writer is inside
// while they hold the lock; writers that nobody else is; readers must have overlapped (they
// share); the writers' non-atomic counter is exact.
TEST_P(SyncMultiProcess, ReadersShareAndWritersExcludeAcrossProcesses) {
  constexpr int readers = 4, writers = 2;
  const int reads = standalone() ? 200 : 100, writes = standalone() ? 100 : 50;
  const auto name = key("rw"), prefix = key("data");
  std::vector<child_process> reader_workers, writer_workers;
  for (int i = 0; i < readers; ++i) {
    reader_workers.push_back(worker("rw-reader", {name, prefix, std::to_string(reads), "2"}));
  }
  for (int i = 0; i < writers; ++i) {
    writer_workers.push_back(worker("rw-writer", {name, prefix, std::to_string(writes)}));
  }
  std::int64_t most_readers = 0;
  for (auto& w : reader_workers) {
    const auto done = expect_line(w, "done", 120s);
    ASSERT_TRUE(done) << "a reader did not finish";
    most_readers =
        std::max<std::int64_t>(most_readers, std::stoll(done->substr(done->find('=') + 1)));
    EXPECT_EQ(w.wait(), 0);
  }
  for (auto& w : writer_workers) {
    EXPECT_TRUE(expect_line(w, "done", 120s)) << "a writer did not finish";
    EXPECT_EQ(w.wait(), 0);
  }
  EXPECT_GT(most_readers, 1) << "readers never held the lock together";
  EXPECT_LE(most_readers, readers);
  std::cout << "[ info ] up to " << most_readers << " readers inside at once\n";
  const auto counter = prefix + ":counter";
  EXPECT_EQ(raw_for(counter)({"GET", counter}).str(), std::to_string(writers * writes));
  const auto inside = prefix + ":readers_inside";
  EXPECT_EQ(raw_for(inside)({"GET", inside}).str(), "0");
  EXPECT_EQ(raw_for(name)({"EXISTS", name}).integer(), 0);
}

// Two processes hold a read lock and upgrade at once, 50 times. Each round the first upgrade to
// reach the server wins and the other is refused at once with errc::upgrade_conflict (never do
// both wait for each other's read hold); the refused one lets its read hold go, and the winner's
// upgrade is granted promptly. Both succeeding one after the other would also be correct (it
// cannot happen here, since each keeps its read hold until refused).
TEST_P(SyncMultiProcess, ConcurrentUpgradesNeverDeadlockOneIsRefusedAtOnce) {
  constexpr int rounds = 50;
  // A refusal is one script call. The winner waits for the loser's read release, whose message
  // wakes it; if that message were lost, one re-check (1 s) later.
  constexpr auto refusal_bound = 1000ms;
  constexpr auto upgrade_bound = 3000ms;
  const auto name = key("rw"), prefix = key("data");
  auto a = worker("upgrade", {name, prefix, std::to_string(rounds)});
  auto b = worker("upgrade", {name, prefix, std::to_string(rounds)});
  int conflicts = 0, upgrades = 0;
  for (int r = 0; r < rounds; ++r) {
    std::map<std::string, int> outcomes;
    for (auto* w : {&a, &b}) {
      const auto line = expect_line(*w, "round ", 30s);
      ASSERT_TRUE(line) << "round " << r << ": a worker is stuck (deadlock?)";
      std::istringstream in(*line);
      std::string word, outcome;
      int round = -1;
      long waited = -1;
      in >> word >> round >> outcome >> waited;
      ASSERT_EQ(round, r) << *line;
      ++outcomes[outcome];
      if (outcome == "conflict") {
        EXPECT_LE(milliseconds(waited), refusal_bound) << "a refusal must be immediate: " << *line;
      } else if (outcome == "upgraded") {
        EXPECT_LE(milliseconds(waited), upgrade_bound) << *line;
      } else {
        ADD_FAILURE() << "round " << r << ": " << *line;
      }
    }
    const bool one_each = outcomes["conflict"] == 1 && outcomes["upgraded"] == 1;
    const bool both_in_turn = outcomes["upgraded"] == 2;
    EXPECT_TRUE(one_each || both_in_turn) << "round " << r << ": " << outcomes["conflict"]
                                          << " conflicts, " << outcomes["upgraded"] << " upgrades";
    conflicts += outcomes["conflict"];
    upgrades += outcomes["upgraded"];
  }
  for (auto* w : {&a, &b}) {
    EXPECT_TRUE(expect_line(*w, "done"));
    EXPECT_EQ(w->wait(), 0);
  }
  std::cout << "[ info ] " << upgrades << " upgrades, " << conflicts << " refusals\n";
  auto raw = raw_for(name);
  EXPECT_EQ(raw({"EXISTS", name}).integer(), 0);
  EXPECT_EQ(raw({"EXISTS", suffixed(name, "write_intent")}).integer(), 0);
}

// Four reader processes keep the lock in read mode: each holds it 20 ms and asks again at once,
// so there is hardly ever a moment without a reader, and a writer that could only get in at
// such a moment (as in Redisson) would wait as long as readers keep coming. A writer must get
// in, five times (each time while at least two readers are inside), each within 3 s. Why 3 s: the
// writer's first attempt sets its intent, after which no new reader gets in; the reads already held
// end within 20 ms; the last one's release publishes the message that wakes the writer, or, if that
// message were lost, the writer's re-check comes within 1 s (max_recheck). 3 s leaves about 2 s for
// scheduling on a loaded machine; a writer starved by the readers would wait until they stop.
TEST_P(SyncMultiProcess, AWriterIsNotStarvedByReadersThatAlwaysOverlap) {
  constexpr int readers = 4, rounds = 5;
  constexpr auto bound = 3000ms;
  const auto name = key("rw"), prefix = key("data");
  std::vector<child_process> reader_workers;
  for (int i = 0; i < readers; ++i)
    reader_workers.push_back(worker("read-loop", {name, prefix, "20"}));
  for (auto& w : reader_workers)
    ASSERT_TRUE(expect_line(w, "reading", 30s));
  auto writer = worker("write-timed", {name, prefix, std::to_string(rounds)});
  for (int r = 0; r < rounds; ++r) {
    const auto line = expect_line(writer, "acquired ", 30s);
    ASSERT_TRUE(line) << "round " << r << ": the writer never got in";
    const milliseconds waited(std::stol(line->substr(9)));
    EXPECT_LE(waited, bound) << "round " << r;
    std::cout << "[ info ] the writer waited " << ms_text(waited) << "\n";
  }
  EXPECT_TRUE(expect_line(writer, "done"));
  EXPECT_EQ(writer.wait(), 0);
  const auto stop = prefix + ":stop";
  raw_for(stop)({"SET", stop, "1"});
  for (auto& w : reader_workers) {
    EXPECT_TRUE(expect_line(w, "done", 30s));
    EXPECT_EQ(w.wait(), 0);
  }
}

// ---- leased semaphore ----

// Three permits, twelve processes taking one at a time: never more than three inside, and all
// three in use at some point.
TEST_P(SyncMultiProcess, TwelveProcessesNeverHoldMoreThanThreePermits) {
  constexpr int processes = 12, permits = 3;
  const int per_process = standalone() ? 100 : 50;
  const auto name = key("sem"), prefix = key("data");
  client c(d().options());
  auto sem = c.leased_semaphore(name);
  ASSERT_TRUE(sem.try_set_permits(permits));
  std::vector<child_process> workers;
  for (int i = 0; i < processes; ++i) {
    workers.push_back(
        worker("sem-loop", {name, prefix, std::to_string(per_process), std::to_string(permits)}));
  }
  std::int64_t most = 0;
  for (auto& w : workers) {
    const auto done = expect_line(w, "done", 120s);
    ASSERT_TRUE(done) << "a worker did not finish";
    most = std::max<std::int64_t>(most, std::stoll(done->substr(done->find('=') + 1)));
    EXPECT_EQ(w.wait(), 0);
  }
  EXPECT_LE(most, permits);
  EXPECT_EQ(most, permits) << "the three permits were never all in use at once";
  EXPECT_EQ(sem.available(), permits);
  EXPECT_TRUE(sem.info().leased.empty());
}

/// What a leased semaphore is on the server, byte for byte: its count and its set of permits.
std::string semaphore_state(raw_redis& raw, const std::string& name) {
  const auto taken = suffixed(name, "timeout");
  std::string out;
  for (const auto& r : {raw({"DUMP", name}), raw({"DUMP", taken}),
                        raw({"ZRANGE", taken, "0", "-1", "WITHSCORES"})}) {
    out += r.to_string() + "\n";
  }
  return out;
}

std::string random_permit_id() {
  std::random_device rd;
  std::string id;
  for (int i = 0; i < 32; ++i)
    id += "0123456789abcdef"[rd() % 16];
  return id;
}

// A permit holder killed with SIGKILL (a 1 s watchdog lease) gives its permit back within its
// lease: a waiter blocked on the exhausted semaphore gets it. Release by id works from any
// process that knows the id (as Redisson's): a forged id and the dead holder's reclaimed id are
// refused and change nothing on the server; the live holder's id, given by another process,
// releases its permit.
TEST_P(SyncMultiProcess, AKilledPermitHoldersPermitComesBackWithinItsLease) {
  constexpr auto lease = 1000ms;
  constexpr auto margin = 1500ms;
  const auto name = key("sem");
  client c(d().options());
  auto sem = c.leased_semaphore(name);
  ASSERT_TRUE(sem.try_set_permits(1));
  auto victim = worker("sem-hold", {name, std::to_string(lease.count()), "0"});
  const auto victim_line = expect_line(victim, "acquired ");
  ASSERT_TRUE(victim_line);
  const auto victim_id = victim_line->substr(9);
  // The waiter holds what it gets with a fixed lease: no renewal changes the server meanwhile.
  auto waiter = worker("sem-wait", {name, "60000", "30000"});
  ASSERT_TRUE(expect_line(waiter, "waiting"));
  const auto channel = derived_key("redisson_sc", name);
  ASSERT_TRUE(eventually([&] { return subscribers(channel) >= 1; })) << "the waiter never waited";

  victim.signal(SIGKILL);
  EXPECT_EQ(victim.wait(), 128 + SIGKILL);
  const auto killed = steady::now();
  const auto got = expect_line(waiter, "acquired ", 10s);
  const auto delay = ms_between(killed, steady::now());
  ASSERT_TRUE(got) << "the dead holder's permit never came back";
  EXPECT_LE(delay, lease + margin) << "lease " << ms_text(lease);
  std::cout << "[ info ] the waiter got the permit " << ms_text(delay) << " after the kill\n";
  const auto waiter_id = got->substr(9);
  ASSERT_NE(waiter_id, victim_id);

  auto raw = raw_for(name);
  const auto release_from_elsewhere = [&](const std::string& id) {
    auto p = worker("sem-release", {name, id});
    auto line = expect_line(p, "released ", 30s);
    EXPECT_EQ(p.wait(), 0);
    return line.value_or("no answer");
  };
  const auto before = semaphore_state(raw, name);
  EXPECT_EQ(release_from_elsewhere(random_permit_id()), "released 0") << "a forged id";
  EXPECT_EQ(semaphore_state(raw, name), before) << "a forged id changed the semaphore";
  EXPECT_EQ(release_from_elsewhere(victim_id), "released 0") << "the reclaimed permit's id";
  EXPECT_EQ(semaphore_state(raw, name), before) << "a reclaimed id changed the semaphore";
  EXPECT_EQ(sem.available(), 0);

  EXPECT_EQ(release_from_elsewhere(waiter_id), "released 1") << "a live permit's id";
  EXPECT_EQ(sem.available(), 1);
  EXPECT_TRUE(sem.info().leased.empty());
  EXPECT_EQ(release_from_elsewhere(waiter_id), "released 0") << "released twice";
}

// A permit whose fixed lease ran out (its holder died) is no longer held: its id is refused and
// nothing changes, as dlock/semaphore.hpp and leased_release.lua's own header say, even before
// an acquisition reclaims it.
TEST_P(SyncMultiProcess, AnExpiredPermitsIdIsRefused) {
  const auto name = key("sem");
  client c(d().options());
  auto sem = c.leased_semaphore(name);
  ASSERT_TRUE(sem.try_set_permits(1));
  auto holder = worker("sem-hold", {name, "30000", "300"});
  const auto line = expect_line(holder, "acquired ");
  ASSERT_TRUE(line);
  const auto id = line->substr(9);
  holder.signal(SIGKILL);
  EXPECT_EQ(holder.wait(), 128 + SIGKILL);
  ASSERT_TRUE(eventually([&] {
    const auto info = sem.info();
    return info.leased.size() == 1 && info.leased[0].first == id && info.leased[0].second == 0ms;
  })) << "the permit's lease never ran out";
  auto raw = raw_for(name);
  const auto before = semaphore_state(raw, name);
  auto p = worker("sem-release", {name, id});
  EXPECT_EQ(expect_line(p, "released ", 30s), "released 0") << "an expired permit's id";
  EXPECT_EQ(p.wait(), 0);
  EXPECT_EQ(semaphore_state(raw, name), before);
}

// ---- interop with Redisson's protocols, run as Lua through raw_redis ----
//
// Written from Redisson's semantics (RedissonFairLock, RedissonReadLock), not its code. The
// unlock scripts leave out Redisson's idempotency latch (a key per unlock request), which does
// not change what the lock does.

// RFairLock's acquire (the waiting form): purge lapsed heads by the client's clock, grant when
// free and first (taking `wait` off every other waiter's deadline), re-enter, or join the queue
// with a deadline of the previous waiter's (or the holder's TTL) plus `wait`.
// KEYS: lock, queue, timeouts. ARGV: lease ms, owner, wait ms (threadWaitTime), now ms.
constexpr const char* redisson_fair_acquire = R"(
local now = tonumber(ARGV[4])
while true do
  local head = redis.call('lindex', KEYS[2], 0)
  if not head then break end
  local deadline = redis.call('zscore', KEYS[3], head)
  if not deadline or tonumber(deadline) > now then break end
  redis.call('zrem', KEYS[3], head)
  redis.call('lpop', KEYS[2])
end
if redis.call('exists', KEYS[1]) == 0 and
   (redis.call('exists', KEYS[2]) == 0 or redis.call('lindex', KEYS[2], 0) == ARGV[2]) then
  redis.call('lpop', KEYS[2])
  redis.call('zrem', KEYS[3], ARGV[2])
  for _, member in ipairs(redis.call('zrange', KEYS[3], 0, -1)) do
    redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), member)
  end
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if redis.call('zscore', KEYS[3], ARGV[2]) then
  return math.max(0, redis.call('pttl', KEYS[1]))
end
local last = redis.call('lindex', KEYS[2], -1)
local ttl
if last and last ~= ARGV[2] and redis.call('zscore', KEYS[3], last) then
  ttl = tonumber(redis.call('zscore', KEYS[3], last)) - now
else
  ttl = redis.call('pttl', KEYS[1])
end
if redis.call('zadd', KEYS[3], ttl + tonumber(ARGV[3]) + now, ARGV[2]) == 1 then
  redis.call('rpush', KEYS[2], ARGV[2])
end
return ttl)";

// RFairLock's unlock: purge lapsed heads, count down, and at zero delete the lock and publish 0
// on the first waiter's own channel.
// KEYS: lock, queue, timeouts, unlock channel. ARGV: '0', lease ms, owner, now ms.
constexpr const char* redisson_fair_unlock = R"(
local now = tonumber(ARGV[4])
while true do
  local head = redis.call('lindex', KEYS[2], 0)
  if not head then break end
  local deadline = redis.call('zscore', KEYS[3], head)
  if not deadline or tonumber(deadline) > now then break end
  redis.call('zrem', KEYS[3], head)
  redis.call('lpop', KEYS[2])
end
local function wake_first()
  local head = redis.call('lindex', KEYS[2], 0)
  if head then redis.call('publish', KEYS[4] .. ':' .. head, ARGV[1]) end
end
if redis.call('exists', KEYS[1]) == 0 then
  wake_first()
  return 1
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 0
end
redis.call('del', KEYS[1])
wake_first()
return 1)";

// RReadLock's acquire. KEYS: lock, this reader's timeout prefix `{NAME}:<owner>:rwlock_timeout`.
// ARGV: lease ms, owner, owner .. ':write'.
constexpr const char* redisson_read_acquire = R"(
local mode = redis.call('hget', KEYS[1], 'mode')
if not mode then
  redis.call('hset', KEYS[1], 'mode', 'read')
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('set', KEYS[2] .. ':1', 1)
  redis.call('pexpire', KEYS[2] .. ':1', ARGV[1])
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if mode == 'read' or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
  local n = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('set', KEYS[2] .. ':' .. n, 1)
  redis.call('pexpire', KEYS[2] .. ':' .. n, ARGV[1])
  redis.call('pexpire', KEYS[1], math.max(redis.call('pttl', KEYS[1]), tonumber(ARGV[1])))
  return nil
end
return redis.call('pttl', KEYS[1]))";

// RReadLock's unlock: drop this hold and its timeout key; while holds remain, the lock lives as
// long as the longest remaining hold's timeout key; else delete it and publish 0.
// KEYS: lock, channel, this reader's timeout prefix, key prefix `{NAME}`. ARGV: '0', owner.
constexpr const char* redisson_read_unlock = R"(
local mode = redis.call('hget', KEYS[1], 'mode')
if not mode then
  redis.call('publish', KEYS[2], ARGV[1])
  return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then return nil end
local left = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if left == 0 then redis.call('hdel', KEYS[1], ARGV[2]) end
redis.call('del', KEYS[3] .. ':' .. (left + 1))
if redis.call('hlen', KEYS[1]) > 1 then
  local longest = -3
  for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
    local holds = tonumber(redis.call('hget', KEYS[1], field))
    if holds then
      for i = holds, 1, -1 do
        longest = math.max(longest,
                           redis.call('pttl', KEYS[4] .. ':' .. field .. ':rwlock_timeout:' .. i))
      end
    end
  end
  if longest > 0 then
    redis.call('pexpire', KEYS[1], longest)
    return 0
  end
  if mode == 'write' then return 0 end
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[1])
return 1)";

std::string now_ms() {
  return std::to_string(
      std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

class SyncInterop : public redis_test {
 protected:
  client make_client() {
    auto o = client_options::from_url(url());
    o.fair_waiter_lease = 3s;  // above 1.5 x Redisson's threadWaitTime here (1 s)
    return client(o);
  }

  std::string queue(const std::string& name) { return derived_key("redisson_lock_queue", name); }
  std::string timeouts(const std::string& name) {
    return derived_key("redisson_lock_timeout", name);
  }
  std::string channel(const std::string& name) {
    return derived_key("redisson_lock__channel", name);
  }
  reply redisson_acquire(const std::string& name, const std::string& owner) {
    return raw_({"EVAL", redisson_fair_acquire, "3", name, queue(name), timeouts(name), "30000",
                 owner, "1000", now_ms()});
  }
  reply redisson_unlock(const std::string& name, const std::string& owner) {
    return raw_({"EVAL", redisson_fair_unlock, "4", name, queue(name), timeouts(name),
                 channel(name), "0", "30000", owner, now_ms()});
  }
  std::vector<std::string> queued(const std::string& name) {
    std::vector<std::string> out;
    const auto list = raw_({"LRANGE", queue(name), "0", "-1"});
    for (const auto& e : list.elements())
      out.push_back(e.str());
    return out;
  }
  /// A redis-cli subscribed to `channel`, once the server confirmed the subscription.
  child_process subscribe(const std::string& channel) {
    child_process sub({embedded::default_programs().cli, "-p", std::to_string(server().port()),
                       "SUBSCRIBE", channel},
                      captured);
    EXPECT_EQ(sub.read_line(10s), "subscribe");
    EXPECT_EQ(sub.read_line(10s), channel);
    EXPECT_EQ(sub.read_line(10s), "1");
    return sub;
  }
  /// The next message `sub` receives: its payload.
  std::optional<std::string> next_message(child_process& sub) {
    if (!sub.wait_for("message", 10s)) return std::nullopt;
    sub.read_line(10s);  // the channel
    return sub.read_line(10s);
  }

  void SetUp() override {
    redis_test::SetUp();
    raw_ptr_ = std::make_unique<raw_redis>(server().port());
  }
  void TearDown() override {
    raw_ptr_.reset();
    redis_test::TearDown();
  }
  raw_redis& raw() { return *raw_ptr_; }

 private:
  reply raw_(const std::vector<std::string>& args) { return (*raw_ptr_)(args); }
  std::unique_ptr<raw_redis> raw_ptr_;
};

// A Redisson waiter queues first, a dlock waiter behind it: the dlock holder's release wakes the
// Redisson waiter alone, on its own channel; its grant leaves the dlock waiter waiting (and, with
// Redisson's 1 s taken off its deadline, still in line); the Redisson unlock wakes the dlock
// waiter, which gets the lock.
TEST_F(SyncInterop, ARedissonFairWaiterAheadOfADlockWaiterKeepsTheOrder) {
  const auto name = key("fair");
  const std::string redisson = "6f1c2d3e-redisson-uuid:57";
  auto a = make_client();
  auto held = a.fair(name).try_acquire();
  ASSERT_TRUE(held);
  auto redisson_channel = subscribe(channel(name) + ":" + redisson);
  const auto ttl = redisson_acquire(name, redisson);
  ASSERT_TRUE(ttl.is_integer()) << ttl.to_string();
  EXPECT_GT(ttl.integer(), 0) << "queued, told the holder's TTL";
  auto b = make_client();
  auto waiting = b.fair(name).acquire_future(30s);
  ASSERT_TRUE(eventually([&] {
    const auto q = queued(name);
    return q.size() == 2 && q[1].starts_with(b.id() + ":");
  })) << "the dlock waiter queues behind the Redisson one";
  ASSERT_EQ(queued(name)[0], redisson);

  ASSERT_TRUE(held.release());
  EXPECT_EQ(next_message(redisson_channel), "0") << "the release wakes the first in line";
  EXPECT_EQ(raw()({"EXISTS", name}).integer(), 0);
  EXPECT_NE(waiting.wait_for(0s), std::future_status::ready) << "the dlock waiter is second";
  EXPECT_TRUE(redisson_acquire(name, redisson).is_nil()) << "Redisson's retry: granted";
  EXPECT_EQ(raw()({"HGET", name, redisson}).str(), "1");
  EXPECT_NE(waiting.wait_for(0s), std::future_status::ready);
  const auto q = queued(name);
  ASSERT_EQ(q.size(), 1u) << "the dlock waiter kept its place";
  EXPECT_TRUE(q[0].starts_with(b.id() + ":"));
  const auto server_ms = [&] {
    const auto t = raw()({"TIME"});
    return std::stoll(t.at(0).str()) * 1000 + std::stoll(t.at(1).str()) / 1000;
  };
  EXPECT_GT(std::stoll(raw()({"ZSCORE", timeouts(name), q[0]}).str()), server_ms())
      << "its deadline, less Redisson's threadWaitTime, is still ahead";

  EXPECT_EQ(redisson_unlock(name, redisson), reply::integer(1));
  ASSERT_EQ(waiting.wait_for(10s), std::future_status::ready) << "the Redisson unlock wakes it";
  auto got = waiting.get();
  EXPECT_TRUE(got);
  EXPECT_TRUE(queued(name).empty());
  EXPECT_TRUE(got.release());
  EXPECT_EQ(raw()({"EXISTS", name}).integer(), 0);
}

// The reverse: a dlock waiter first, a Redisson waiter behind it (its deadline the dlock
// waiter's plus its wait). The release wakes the dlock waiter; the dlock waiter's release wakes
// the Redisson waiter on its own channel, which then gets the lock.
TEST_F(SyncInterop, ADlockFairWaiterAheadOfARedissonWaiterKeepsTheOrder) {
  const auto name = key("fair");
  const std::string redisson = "6f1c2d3e-redisson-uuid:58";
  auto a = make_client();
  auto held = a.fair(name).try_acquire();
  ASSERT_TRUE(held);
  auto b = make_client();
  auto waiting = b.fair(name).acquire_future(30s);
  ASSERT_TRUE(eventually([&] { return queued(name).size() == 1; }));
  auto redisson_channel = subscribe(channel(name) + ":" + redisson);
  const auto ttl = redisson_acquire(name, redisson);
  ASSERT_TRUE(ttl.is_integer()) << ttl.to_string();
  EXPECT_GT(ttl.integer(), 0) << "told the dlock waiter's time left";
  const auto q = queued(name);
  ASSERT_EQ(q.size(), 2u);
  EXPECT_TRUE(q[0].starts_with(b.id() + ":"));
  EXPECT_EQ(q[1], redisson);

  ASSERT_TRUE(held.release());
  ASSERT_EQ(waiting.wait_for(10s), std::future_status::ready) << "the first in line is woken";
  auto got = waiting.get();
  ASSERT_TRUE(got);
  EXPECT_GT(redisson_acquire(name, redisson).integer(), 0) << "Redisson's retry: still held";
  EXPECT_EQ(queued(name), std::vector<std::string>{redisson});
  ASSERT_TRUE(got.release());
  EXPECT_EQ(next_message(redisson_channel), "0") << "the dlock release wakes the Redisson waiter";
  EXPECT_TRUE(redisson_acquire(name, redisson).is_nil()) << "granted";
  EXPECT_TRUE(queued(name).empty());
  EXPECT_EQ(redisson_unlock(name, redisson), reply::integer(1));
  EXPECT_EQ(raw()({"EXISTS", name}).integer(), 0);
}

// A Redisson read lock and a dlock read lock are held at once (mode stays read); a dlock writer
// waits for both; the Redisson unlock leaves the dlock hold intact, the lock's TTL then being
// exactly what its timeout key has left; the dlock release lets the writer in.
TEST_F(SyncInterop, RedissonAndDlockReadersShareAndAWriterWaitsForBoth) {
  const auto name = key("rw");
  const std::string redisson = "6f1c2d3e-redisson-uuid:59";
  const auto timeout_prefix = [&](const std::string& owner) {
    return suffixed(name, owner + ":rwlock_timeout");
  };
  ASSERT_TRUE(raw()({"EVAL", redisson_read_acquire, "2", name, timeout_prefix(redisson), "10000",
                     redisson, redisson + ":write"})
                  .is_nil())
      << "Redisson's reader: granted";
  auto reader_client = make_client();
  auto dlock_read = reader_client.read_write(name).read().try_acquire();
  ASSERT_TRUE(dlock_read) << "the dlock reader shares the Redisson reader's lock";
  EXPECT_EQ(raw()({"HGET", name, "mode"}).str(), "read");
  EXPECT_EQ(raw()({"HGET", name, redisson}).str(), "1");
  const auto fields = raw()({"HKEYS", name}).elements();
  std::string dlock_owner;
  for (const auto& f : fields) {
    if (f.str().starts_with(reader_client.id() + ":")) dlock_owner = f.str();
  }
  ASSERT_FALSE(dlock_owner.empty()) << "the dlock reader's field";
  EXPECT_EQ(raw()({"EXISTS", timeout_prefix(dlock_owner) + ":1"}).integer(), 1);

  auto writer_client = make_client();
  auto writing = writer_client.read_write(name).write().acquire_future(30s);
  ASSERT_TRUE(eventually([&] {
    return raw()({"EXISTS", suffixed(name, "write_intent")}).integer() == 1;
  })) << "the writer waits";
  EXPECT_NE(writing.wait_for(0s), std::future_status::ready);

  EXPECT_EQ(raw()({"EVAL", redisson_read_unlock, "4", name, "redisson_rwlock:{" + name + "}",
                   timeout_prefix(redisson), "{" + name + "}", "0", redisson}),
            reply::integer(0))
      << "holds remain";
  EXPECT_EQ(raw()({"HGET", name, "mode"}).str(), "read");
  EXPECT_EQ(raw()({"HGET", name, dlock_owner}).str(), "1") << "the dlock hold is intact";
  EXPECT_EQ(raw()({"HEXISTS", name, redisson}).integer(), 0);
  const auto ttls =
      raw()({"EVAL", "return {redis.call('pttl', KEYS[1]), redis.call('pttl', KEYS[2])}", "2", name,
             timeout_prefix(dlock_owner) + ":1"});
  const auto lock_ttl = ttls.at(0).integer(), hold_ttl = ttls.at(1).integer();
  EXPECT_GT(hold_ttl, 10'000) << "the dlock hold's own lease (30 s watchdog)";
  EXPECT_LE(std::abs(lock_ttl - hold_ttl), 2) << "the lock lives as long as the dlock hold";
  EXPECT_TRUE(dlock_read.valid());
  EXPECT_NE(writing.wait_for(0s), std::future_status::ready) << "the dlock reader still holds";

  ASSERT_TRUE(dlock_read.release());
  ASSERT_EQ(writing.wait_for(10s), std::future_status::ready);
  auto w = writing.get();
  ASSERT_TRUE(w);
  EXPECT_EQ(raw()({"HGET", name, "mode"}).str(), "write");
  EXPECT_TRUE(w.release());
  EXPECT_EQ(raw()({"EXISTS", name}).integer(), 0);
}

}  // namespace
}  // namespace dlock::testing
