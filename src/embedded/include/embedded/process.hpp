// Child processes for the tools that orchestrate several of them (the test suite, the tour):
// spawned with fork/exec, optionally with stdout on a pipe read line by line with a deadline (so
// callers wait for events the child reports, never for a fixed time), always killed and reaped
// when the object dies, and killed by the kernel if this process dies first.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

namespace dlock::embedded {

struct spawn_options {
  /// Read the child's stdout through `read_line`; otherwise it inherits ours.
  bool capture_stdout = false;
  /// Send the child's stderr where its stdout goes.
  bool merge_stderr = false;
  /// Discard the child's stdout and stderr.
  bool quiet = false;
  /// Start a new process group led by the child (so the whole tree can be signalled at once).
  bool new_process_group = false;
  /// PR_SET_PDEATHSIG: the kernel kills the child if the thread that spawned it dies.
  bool die_with_parent = true;
  /// "NAME=value" entries added to (or replacing those in) the inherited environment.
  std::vector<std::string> env{};
  /// The child's signal mask; null means none blocked.
  const sigset_t* signal_mask = nullptr;
};

/// The program could not be executed; `code()` holds exec's errno (ENOENT: not found).
class spawn_error : public std::system_error {
 public:
  spawn_error(int e, const std::string& what)
      : std::system_error(e, std::generic_category(), what) {}
};

class child_process {
 public:
  /// Starts `argv[0]` (searched on PATH when it has no slash), with the signals a parent may
  /// have ignored or handled reset to their defaults. Throws `spawn_error` if it cannot be
  /// executed, std::runtime_error if it cannot be forked.
  explicit child_process(const std::vector<std::string>& argv, spawn_options options = {});
  /// SIGKILLs the child (its whole group if it leads one) and reaps it, unless already reaped.
  ~child_process();
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;
  child_process(child_process&&) noexcept;

  /// The next line the child printed (without '\n'), or nothing if none came within `limit` or
  /// the child closed its output. Needs `capture_stdout`.
  std::optional<std::string> read_line(std::chrono::milliseconds limit = std::chrono::seconds(30));
  /// Reads lines until one starts with `prefix`; returns it, or nothing on timeout or EOF.
  std::optional<std::string> wait_for(const std::string& prefix,
                                      std::chrono::milliseconds limit = std::chrono::seconds(30));
  /// Everything the child printed that has not been read yet, up to its exit.
  std::string drain();
  /// Sends `sig` to the child, or to its whole group with `whole_group`.
  void signal(int sig, bool whole_group = false);
  /// Waits for the child to exit (up to `limit`, then SIGKILL); returns its exit code, or
  /// 128+signal if a signal ended it.
  int wait(std::chrono::milliseconds limit = std::chrono::seconds(60));
  /// Reaps the child if it has exited, without waiting; returns its status as `wait` does.
  std::optional<int> try_wait();
  pid_t pid() const noexcept { return pid_; }
  bool running() const noexcept { return pid_ > 0; }

 private:
  bool fill(std::chrono::steady_clock::time_point deadline);

  pid_t pid_ = -1;
  bool group_leader_ = false;
  int out_ = -1;
  std::string buffer_;
};

/// Runs a program to completion with its output discarded; returns its exit status (127 if it
/// could not be executed, 128+signal if a signal ended it, -1 if it could not be forked).
int run_program(const std::vector<std::string>& argv);

}  // namespace dlock::embedded
