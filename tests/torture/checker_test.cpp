// The checker on hand-written logs: it must find what the definitions in checker.hpp say, so that
// a torture run that reports zeros means the library held, not that the checker looked away.
#include "checker.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace dlock::torture {
namespace {

// Times in the logs are nanoseconds; these tests think in milliseconds.
std::string ms(std::int64_t v) {
  return std::to_string(v * 1'000'000);
}

class Checker : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dlock-checker-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  /// Appends lines to worker `w`'s log.
  void worker(int w, const std::vector<std::string>& lines) {
    const auto path = dir_ + "/w" + std::to_string(w) + ".log";
    if (std::find(logs_.begin(), logs_.end(), path) == logs_.end()) logs_.push_back(path);
    std::ofstream out(path, std::ios::app);
    for (const auto& l : lines)
      out << l << "\n";
  }
  void nemesis(const std::vector<std::string>& lines) {
    std::ofstream out(dir_ + "/nemesis.log", std::ios::app);
    for (const auto& l : lines)
      out << l << "\n";
  }

  /// One whole grant: G, read, V, write, R. `seq` numbers the read; the write is seq + 1.
  static std::vector<std::string> grant(int w, int gid, int fence, std::int64_t t_call,
                                        std::int64_t t_grant, int seq, std::int64_t t_release,
                                        const std::string& outcome = "released",
                                        bool write_accepted = true, bool valid = true) {
    const auto W = std::to_string(w), G = std::to_string(gid), F = std::to_string(fence);
    return {"G " + W + " " + G + " lock " + F + " " + ms(t_call) + " " + ms(t_grant),
            "O " + W + " " + G + " lock " + F + " r " + std::to_string(seq) + " 1 7 " + F + " " +
                ms(t_grant) + " " + ms(t_grant),
            "V " + W + " " + G + " " + ms(t_release) + (valid ? " 1" : " 0"),
            "O " + W + " " + G + " lock " + F + " w " + std::to_string(seq + 1) +
                (write_accepted ? " 1 7 7 " : " 0 7 - ") + ms(t_release) + " " + ms(t_release),
            "R " + W + " " + G + " " + ms(t_release) + " " + ms(t_release + 1) + " " + outcome};
  }

  /// A hold without resource ops (a reader's, a semaphore's): G, V, R. `valid_until` is the
  /// lease's validity at the release (0: not given, as older logs have it).
  static std::vector<std::string> hold(int w, int gid, const std::string& name,
                                       const std::string& kind, std::int64_t t_grant,
                                       std::int64_t t_release, std::int64_t valid_until = 0,
                                       const std::string& outcome = "released") {
    const auto W = std::to_string(w), G = std::to_string(gid);
    return {
        "G " + W + " " + G + " " + name + " 1 " + ms(t_grant - 1) + " " + ms(t_grant) + " " + kind,
        "V " + W + " " + G + " " + ms(t_release) + " 1 " + name + " " + kind,
        "R " + W + " " + G + " " + ms(t_release) + " " + ms(t_release + 1) + " " + outcome +
            (valid_until != 0 ? " " + ms(valid_until) : std::string())};
  }

  /// One latch op on "l": its c line and, unless `t_reply` < 0 (killed in it), its C line.
  static std::vector<std::string> latch(int w, const std::string& op, std::int64_t t_call,
                                        std::int64_t t_reply, const std::string& result) {
    const auto W = std::to_string(w);
    std::vector<std::string> lines = {"c " + W + " l " + op + " " + ms(t_call)};
    if (t_reply >= 0) {
      lines.push_back("C " + W + " l " + op + " " + ms(t_call) + " " + ms(t_reply) + " " + result);
    }
    return lines;
  }

  check_report run(std::int64_t end_ms = 10'000, int permits = 1,
                   std::vector<std::string> write_losing_faults = {},
                   std::vector<std::string> two_master_faults = {}) {
    nemesis({});
    return check({.worker_logs = logs_,
                  .nemesis_log = dir_ + "/nemesis.log",
                  .t_start = 0,
                  .t_end = end_ms * 1'000'000,
                  .permits = permits,
                  .write_losing_faults = std::move(write_losing_faults),
                  .two_master_faults = std::move(two_master_faults),
                  .two_master_ns = 1'000'000'000});
  }

  std::string dir_;
  std::vector<std::string> logs_;
};

TEST_F(Checker, CleanHandOffsBreakNothing) {
  worker(1, grant(1, 1, 10, 0, 10, 1, 20));
  worker(2, grant(2, 1, 11, 15, 21, 3, 30));
  const auto r = run();
  EXPECT_EQ(r.grants, 2u);
  EXPECT_EQ(r.stale_writes_accepted, 0u);
  EXPECT_EQ(r.lost_in_fact, 0u);
  EXPECT_EQ(r.overlap_pairs, 0u);
  EXPECT_EQ(r.lost_updates, 0u);
}

// Tokens that went backwards (a counter restarted at 1): the later grant's op came first, yet
// the older grant's write was accepted after it.
TEST_F(Checker, FindsAStaleWriteAcceptedAndTheUnsignalledLossBehindIt) {
  auto a = grant(1, 1, 500, 0, 10, 1, 100);
  a[3] = "O 1 1 lock 500 w 5 1 7 8 " + ms(100) + " " + ms(100);  // lands after seq 3 and 4
  worker(1, a);
  worker(2, grant(2, 1, 1, 50, 60, 3, 70));  // later than grant 1: called at 50 > 10
  const auto r = run();
  EXPECT_EQ(r.stale_writes_accepted, 1u);
  EXPECT_EQ(r.lost_updates, 1u);  // it replaced 8, not the 7 it read
  EXPECT_EQ(r.lost_in_fact, 1u);  // grant 2 was granted at 60, before grant 1 released at 100
  EXPECT_EQ(r.not_signalled, 1u);
  EXPECT_EQ(r.overlap_pairs, 1u);
  EXPECT_EQ(r.overlap_grants, 2u);
  EXPECT_EQ(r.unsignalled_examples.size(), 1u);
}

TEST_F(Checker, AWriteRejectedByTheFenceIsNotStale) {
  worker(1, grant(1, 1, 10, 0, 10, 1, 100, "not_held", /*write_accepted=*/false));
  worker(2, grant(2, 1, 11, 50, 60, 2, 70));
  const auto r = run();
  EXPECT_EQ(r.stale_writes_accepted, 0u);
  EXPECT_EQ(r.writes_rejected, 1u);
  EXPECT_EQ(r.lost_in_fact, 1u);
  EXPECT_EQ(r.signalled_release, 1u);
  EXPECT_EQ(r.not_signalled, 0u);
}

// Held writes (--writes held): an op refused because the lease no longer held the lock never
// reached the resource and has no sequence number ("-"). It is a rejection, and it must not
// count as the later grant's early op against an earlier grant's accepted write.
TEST_F(Checker, AnUnnumberedRefusedOpIsRejectedAndInNoOrder) {
  worker(1, grant(1, 1, 10, 0, 10, 1, 100));
  auto b = grant(2, 1, 11, 50, 60, 5, 70, "not_held", /*write_accepted=*/false);
  b[1] = "O 2 1 lock 11 r - 0 0 - " + ms(60) + " " + ms(61);  // the read refused too
  b[3] = "O 2 1 lock 11 w - 0 0 - " + ms(70) + " " + ms(70);
  worker(2, b);
  auto r = run();
  EXPECT_EQ(r.malformed_lines, 0u);
  EXPECT_EQ(r.reads_rejected, 1u);
  EXPECT_EQ(r.writes_rejected, 1u);
  EXPECT_EQ(r.stale_writes_accepted, 0u) << "grant 2 touched nothing before grant 1's write";

  // The same later grant with a numbered read before grant 1's write: that one is stale.
  worker(3, {"G 3 1 lock 12 " + ms(55) + " " + ms(65),
             "O 3 1 lock 12 r 1 1 7 - " + ms(65) + " " + ms(66)});
  r = run();
  EXPECT_EQ(r.stale_writes_accepted, 1u);
}

TEST_F(Checker, SignalsAreCountedByTheirFirstKind) {
  // on_lost before the release.
  auto a = grant(1, 1, 10, 0, 10, 1, 100);
  a.insert(a.begin() + 1, "L 1 1 " + ms(40) + " expired");
  worker(1, a);
  worker(2, grant(2, 1, 11, 50, 60, 3, 70));
  // valid() false at the check.
  worker(3, grant(3, 1, 20, 200, 210, 10, 300, "released", true, /*valid=*/false));
  worker(4, grant(4, 1, 21, 250, 260, 12, 270));
  // on_lost only after the release started does not count as a signal before it.
  auto c = grant(5, 1, 30, 400, 410, 20, 500, "unconfirmed");
  c.push_back("L 5 1 " + ms(600) + " expired");
  worker(5, c);
  worker(6, grant(6, 1, 31, 450, 460, 22, 470));
  const auto r = run();
  EXPECT_EQ(r.lost_in_fact, 3u);
  EXPECT_EQ(r.signalled_on_lost, 1u);
  EXPECT_EQ(r.signalled_valid, 1u);
  EXPECT_EQ(r.signalled_release, 1u);
  EXPECT_EQ(r.not_signalled, 0u);
  EXPECT_EQ(r.on_lost_calls, 2u);
}

TEST_F(Checker, AGrantWhoseAcquisitionBeganBeforeIsNotLater) {
  // Grant 2 was called before grant 1 was granted: the server may have granted it first, so
  // its early op proves nothing against grant 1.
  worker(1, grant(1, 1, 10, 0, 10, 5, 20));
  worker(2, grant(2, 1, 11, 5, 30, 1, 40));
  const auto r = run();
  EXPECT_EQ(r.stale_writes_accepted, 0u);
  EXPECT_EQ(r.lost_in_fact, 0u);
}

TEST_F(Checker, MeasuresHowLongAKilledHoldersLockStaysUnavailable) {
  worker(1, {"G 1 1 lock 10 " + ms(0) + " " + ms(10),
             "O 1 1 lock 10 r 1 1 7 10 " + ms(10) + " " + ms(11)});
  nemesis({"F kill " + ms(100) + " " + ms(101) + " 1 holder=1",
           "F proxy-reset " + ms(200) + " " + ms(200)});
  worker(2, grant(2, 1, 11, 50, 1201, 2, 1300));
  const auto r = run();
  EXPECT_EQ(r.holder_kills, 1u);
  EXPECT_NEAR(r.max_unavailable_after_kill_ms, 1100, 1);
  EXPECT_EQ(r.faults.at("kill"), 1u);
  EXPECT_EQ(r.faults.at("proxy-reset"), 1u);
  EXPECT_EQ(r.lost_in_fact, 0u) << "a killed holder never released: not a loss it could miss";
}

// The liveness the run's verdict judges: a fault after which some lock was granted recovered; one
// after which nobody got any lock until the run's end did not, however fast the run went before.
TEST_F(Checker, NamesTheFaultsNoGrantFollowed) {
  worker(1, grant(1, 1, 10, 0, 10, 1, 20));
  worker(2, grant(2, 1, 11, 300, 450, 3, 500));
  nemesis({"F client-pause " + ms(100) + " " + ms(400),
           "F restart-empty " + ms(1000) + " " + ms(1200)});
  const auto r = run(10'000);
  EXPECT_NEAR(r.max_recovery_ms.at("client-pause"), 50, 1);
  EXPECT_NEAR(r.max_recovery_ms.at("restart-empty"), 8800, 1);
  ASSERT_EQ(r.never_recovered.size(), 1u);
  EXPECT_EQ(r.never_recovered[0].first, "restart-empty");
  EXPECT_NEAR(r.never_recovered[0].second, 8800, 1);
  EXPECT_NEAR(r.max_no_grant_ms, 9550, 1);
}

TEST_F(Checker, CountsLinesItCannotRead) {
  worker(1, grant(1, 1, 10, 0, 10, 1, 20));
  worker(1, {"O 1 1 lock 10 w 3 0 7", "V 9 9 " + ms(5) + " 1", "X what"});
  EXPECT_EQ(run().malformed_lines, 3u);
}

// Readers share a read-write lock; a writer shares it with nobody.
TEST_F(Checker, ReadersBesideReadersAreFineAWriterBesideAReaderIsAConflict) {
  worker(1, hold(1, 1, "rw", "read", 10, 50));
  worker(2, hold(2, 1, "rw", "read", 20, 60));
  EXPECT_EQ(run().conflicts, 0u);
  worker(3, hold(3, 1, "rw", "write", 40, 70));
  const auto r = run();
  EXPECT_EQ(r.conflicts, 1u);
  EXPECT_EQ(r.conflicts_unsignalled, 1u) << "neither reader was told";
  EXPECT_NEAR(r.max_conflict_ms, 20, 0.01) << "until the second reader's release at 60";
  ASSERT_FALSE(r.conflict_examples.empty());
  EXPECT_FALSE(r.excerpts.empty()) << "the events around it are quoted";
}

// A semaphore of 2: two holds at once are its purpose, a third is a conflict.
TEST_F(Checker, ASemaphoreConflictIsOneHoldMoreThanItsPermits) {
  worker(1, hold(1, 1, "sem", "semaphore", 10, 50));
  worker(2, hold(2, 1, "sem", "semaphore", 20, 60));
  EXPECT_EQ(run(10'000, 2).conflicts, 0u);
  EXPECT_EQ(run(10'000, 2).lost_in_fact, 0u) << "a later grant of a shared hold is no loss";
  worker(3, hold(3, 1, "sem", "leased-semaphore", 30, 40));
  EXPECT_EQ(run(10'000, 2).conflicts, 1u);
}

// A stale master's late grant: the newer hold is the one that lost, and its holder was told.
TEST_F(Checker, AConflictIsSignalledWhenTheNewerHolderWasTold) {
  worker(1, hold(1, 1, "a", "reentrant", 10, 50));
  worker(2, hold(2, 1, "a", "reentrant", 20, 30, 0, "not_held"));
  const auto r = run();
  EXPECT_EQ(r.conflicts, 1u);
  EXPECT_EQ(r.conflicts_unsignalled, 0u);
}

// A hold is believed until its lease's last known validity, its on_lost, or valid() false:
// a grant after that is no conflict, even if the old holder's release comes later.
TEST_F(Checker, AHoldIsBelievedOnlyUntilItsValidityOrItsLossSignal) {
  worker(1, hold(1, 1, "a", "reentrant", 10, 500, /*valid_until=*/100, "not_held"));
  worker(2, hold(2, 1, "a", "reentrant", 120, 130));
  auto r = run();
  EXPECT_EQ(r.conflicts, 0u) << "granted after the old lease's validity ran out";
  EXPECT_EQ(r.not_signalled, 0u);
  // Granted inside the old hold's validity: a conflict, signalled (its release said not_held),
  // lasting until the validity's end.
  worker(3, hold(3, 1, "b", "simple", 10, 500, /*valid_until=*/300, "not_held"));
  worker(4, hold(4, 1, "b", "simple", 200, 210));
  r = run();
  EXPECT_EQ(r.conflicts, 1u);
  EXPECT_EQ(r.conflicts_unsignalled, 0u);
  EXPECT_NEAR(r.max_conflict_ms, 10, 0.01) << "the newer hold ended first, at 210";
  // on_lost before the newer grant ends the old hold's belief.
  worker(5, hold(5, 1, "c", "reentrant", 10, 500, /*valid_until=*/400, "not_held"));
  worker(5, {"L 5 1 " + ms(150) + " not_held"});
  worker(6, hold(6, 1, "c", "reentrant", 200, 210));
  EXPECT_EQ(run().conflicts, 1u) << "only b's";
}

// A multi-lock's refused wait that left a name held is counted; a fair lock's hand-off while
// others waited is measured from the release to the next grant.
TEST_F(Checker, MultiLockLeftoversAndFairHandOffs) {
  worker(1, {"M 1 m 1 " + ms(5)});
  worker(2, hold(2, 1, "f", "fair", 10, 20));
  worker(3, hold(3, 1, "f", "fair", 400, 410));    // its t_call (399) is after the release
  worker(4, {"N 4 f " + ms(15) + " " + ms(600)});  // waiting when f came free at 21
  const auto r = run();
  EXPECT_EQ(r.multi_leftovers, 1u);
  // 21 to 400 (the next grant); and 411 to 600, when the one waiter gave up.
  EXPECT_EQ(r.fair_handoffs, 2u);
  EXPECT_NEAR(r.max_fair_handoff_ms, 379, 0.01);
}

// A latch waiter released while the count was never 0 is early; one released after a count-down
// that left 0, or one that never returned (it may have), is not.
TEST_F(Checker, LatchWaitersReleasedBeforeZeroAreEarly) {
  worker(1, latch(1, "set", 0, 1, "1"));
  worker(2, latch(2, "wait", 10, 50, "1"));  // nothing took it to 0: early
  worker(3, latch(3, "down", 60, 61, "1"));
  worker(3, latch(3, "down", 70, 71, "0"));
  worker(2, latch(2, "wait", 65, 80, "1"));  // the 0 at 70-71
  worker(1, latch(1, "set", 300, 301, "1"));
  worker(4, latch(4, "down", 310, -1, ""));  // killed in it: may have left 0
  worker(2, latch(2, "wait", 320, 330, "1"));
  const auto r = run();
  EXPECT_EQ(r.latch.waits_released, 3u);
  EXPECT_EQ(r.latch.early_releases, 1u);
  ASSERT_EQ(r.latch.release_delay_ms.size(), 1u);
  EXPECT_NEAR(r.latch.release_delay_ms[0], 9, 0.01) << "from the 0 (71) to the release (80)";
  ASSERT_FALSE(r.excerpts.empty());
  EXPECT_NE(r.excerpts[0].find("C 2 l wait"), std::string::npos) << r.excerpts[0];
}

// A waiter that stays while the count sits at 0 past the bound missed its release; with a fault
// in its wait it is not judged. A fault that may lose writes explains a release (the latch went
// with the data), counted apart.
TEST_F(Checker, LatchWaitersThatStayAtZeroMissedTheRelease) {
  worker(1, latch(1, "set", 0, 1, "1"));
  worker(1, latch(1, "down", 100, 101, "0"));
  worker(2, latch(2, "wait", 50, 2050, "0"));  // at 0 from 101 to 1500: missed
  worker(1, latch(1, "set", 1500, 1501, "1"));
  worker(3, latch(3, "wait", 1600, 3600, "0"));  // armed all along: fine
  worker(4, latch(4, "wait", 2080, 2200, "1"));  // released by the fault below
  nemesis({"F failover " + ms(2100) + " " + ms(2110) + " master=0",
           "F stop " + ms(500) + " " + ms(900) + " 9 holder=0"});  // another worker's
  auto r = run(10'000, 1, {"failover"});
  EXPECT_EQ(r.latch.missed_releases, 1u);
  EXPECT_EQ(r.latch.waits_checked, 1u) << "the one at 1600 has a fault in its wait";
  EXPECT_EQ(r.latch.early_releases, 0u);
  EXPECT_EQ(r.latch.releases_after_loss, 1u);
  // The same fault on a deployment where it loses nothing leaves that release unexplained.
  r = run(10'000, 1, {});
  EXPECT_EQ(r.latch.early_releases, 1u);
}

// Two holders on two masters, neither told: a failure, unless it began in the window the
// deployment documents for two masters (a fault's start to two_master_ns after its end).
TEST_F(Checker, UntoldConflictsAfterATwoMastersFaultAreCountedApart) {
  worker(1, hold(1, 1, "a", "simple", 2000, 2010));
  worker(2, hold(2, 1, "a", "simple", 2005, 2008));
  worker(3, hold(3, 1, "b", "simple", 5000, 5010));
  worker(4, hold(4, 1, "b", "simple", 5005, 5008));
  nemesis({"F proxy-stall " + ms(500) + " " + ms(1500) + " master=0 ms=1000"});
  auto r = run(10'000, 1, {}, {"proxy-stall"});
  EXPECT_EQ(r.conflicts, 2u);
  EXPECT_EQ(r.conflicts_untold_two_masters, 1u) << "a's, 500 ms after the fault";
  EXPECT_EQ(r.conflicts_unsignalled, 1u) << "b's, long after it";
  r = run();
  EXPECT_EQ(r.conflicts_unsignalled, 2u) << "where the deployment promises no such window";
}

}  // namespace
}  // namespace dlock::torture
