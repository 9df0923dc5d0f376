// A teardown handed to teardown_threads finishes before the process exits: a child process
// returns through exit() while its teardown still waits for the test's go-ahead, and must neither
// exit first (losing the teardown's work) nor crash.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "core/teardown_threads.hpp"

namespace {

using dlock::detail::teardown_threads;

TEST(TeardownThreads, ExitWaitsForATeardownUnderWay) {
  int go[2], done[2];
  ASSERT_EQ(::pipe(go), 0);
  ASSERT_EQ(::pipe(done), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(go[1]);
    ::close(done[0]);
    teardown_threads::prepare();
    teardown_threads::start([in = go[0], out = done[1]] {
      char c = 0;
      if (::read(in, &c, 1) == 1) {
        [[maybe_unused]] auto n = ::write(out, "finished", 8);
      }
    });
    std::exit(0);  // runs the exit handlers, which must wait for the teardown above
  }
  ::close(go[0]);
  ::close(done[1]);
  // The child is blocked in exit until the teardown ends, and the teardown until we say go.
  int status = 0;
  EXPECT_EQ(::waitpid(child, &status, WNOHANG), 0) << "the child exited under its teardown";
  ASSERT_EQ(::write(go[1], "g", 1), 1);
  char buf[16] = {};
  const auto n = ::read(done[0], buf, sizeof buf);
  EXPECT_EQ(std::string(buf, n > 0 ? static_cast<std::size_t>(n) : 0), "finished");
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status)) << "status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  ::close(go[1]);
  ::close(done[0]);
}

}  // namespace
