#include "embedded/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <utility>

extern char** environ;

namespace dlock::embedded {

child_process::child_process(const std::vector<std::string>& args, spawn_options o) {
  if (args.empty()) throw std::invalid_argument("child_process: empty argv");
  // Everything the child needs is prepared here: between fork and exec it may only make
  // async-signal-safe calls, since the parent may have other threads holding locks.
  std::vector<char*> argv;
  for (const auto& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (char** e = environ; *e; ++e) {
    const std::string_view entry(*e);
    bool replaced = false;
    for (const auto& add : o.env) {
      const auto eq = add.find('=');
      if (entry.substr(0, entry.find('=') + 1) == std::string_view(add).substr(0, eq + 1)) {
        replaced = true;
      }
    }
    if (!replaced) envp.push_back(*e);
  }
  for (const auto& add : o.env)
    envp.push_back(const_cast<char*>(add.c_str()));
  envp.push_back(nullptr);

  int pipe_fds[2] = {-1, -1};
  if (o.capture_stdout && ::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  }
  // Closed by a successful exec; carries errno if exec fails.
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  }
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid_ == 0) {
    if (o.die_with_parent) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
    }
    if (o.new_process_group) ::setpgid(0, 0);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE, SIGCHLD}) {
      ::signal(sig, SIG_DFL);
    }
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, o.signal_mask ? o.signal_mask : &none, nullptr);
    if (o.quiet) {
      const int devnull = ::open("/dev/null", O_RDWR);
      ::dup2(devnull, 1);
      ::dup2(devnull, 2);
    } else if (o.capture_stdout) {
      ::dup2(pipe_fds[1], 1);
    }
    if (o.merge_stderr && !o.quiet) ::dup2(1, 2);
    // Do not let the child hold copies of our descriptors (sockets in particular: a connection
    // we close must really close) other than the report pipe, which exec closes.
    const int keep = report[1];
    if (::syscall(SYS_close_range, 3U, static_cast<unsigned>(keep - 1), 0U) != 0 ||
        ::syscall(SYS_close_range, static_cast<unsigned>(keep + 1), ~0U, 0U) != 0) {
      for (int fd = 3; fd < 4096; ++fd) {
        if (fd != keep) ::close(fd);
      }
    }
    ::execvpe(argv[0], argv.data(), envp.data());
    const int e = errno;
    [[maybe_unused]] auto n = ::write(keep, &e, sizeof e);
    ::_exit(127);
  }
  ::close(report[1]);
  int exec_errno = 0;
  while (::read(report[0], &exec_errno, sizeof exec_errno) < 0 && errno == EINTR) {
  }
  ::close(report[0]);
  if (o.new_process_group) ::setpgid(pid_, pid_);  // also from here, so it holds before we return
  group_leader_ = o.new_process_group;
  if (o.capture_stdout) {
    ::close(pipe_fds[1]);
    out_ = pipe_fds[0];
  }
  if (exec_errno != 0) {
    wait();
    throw spawn_error(exec_errno, "cannot run " + args.front() + ": " + std::strerror(exec_errno));
  }
}

child_process::child_process(child_process&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      group_leader_(other.group_leader_),
      out_(std::exchange(other.out_, -1)),
      buffer_(std::move(other.buffer_)) {}

child_process::~child_process() {
  if (pid_ > 0) {
    signal(SIGKILL, group_leader_);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  if (out_ >= 0) ::close(out_);
}

// Reads what is available; false at EOF or when the deadline passes without data.
bool child_process::fill(std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || out_ < 0) return false;
    pollfd p{out_, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return false;
    char chunk[4096];
    const auto n = ::read(out_, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(out_);
      out_ = -1;
      return false;
    }
    buffer_.append(chunk, static_cast<std::size_t>(n));
    return true;
  }
}

std::optional<std::string> child_process::read_line(std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    if (auto nl = buffer_.find('\n'); nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return line;
    }
    if (!fill(deadline)) return std::nullopt;
  }
}

std::optional<std::string> child_process::wait_for(const std::string& prefix,
                                                   std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    auto line = read_line(left);
    if (!line) return std::nullopt;
    if (line->rfind(prefix, 0) == 0) return line;
  }
}

std::string child_process::drain() {
  while (fill(std::chrono::steady_clock::now() + std::chrono::seconds(60))) {
  }
  return std::exchange(buffer_, {});
}

void child_process::signal(int sig, bool whole_group) {
  if (pid_ <= 0) return;
  if (whole_group && group_leader_) {
    ::kill(-pid_, sig);
  } else {
    ::kill(pid_, sig);
  }
}

namespace {
int decode(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}
}  // namespace

std::optional<int> child_process::try_wait() {
  if (pid_ <= 0) return std::nullopt;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) != pid_) return std::nullopt;
  pid_ = -1;
  return decode(status);
}

int child_process::wait(std::chrono::milliseconds limit) {
  if (pid_ <= 0) return -1;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  // Wait for the exit as an event: a pidfd becomes readable when the child exits.
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
  for (;;) {
    if (::waitpid(pid_, &status, WNOHANG) == pid_) break;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      signal(SIGKILL, group_leader_);
      ::waitpid(pid_, &status, 0);
      break;
    }
    if (pidfd >= 0) {
      pollfd p{pidfd, POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(left.count(), 1000)));
    } else {
      ::usleep(2000);
    }
  }
  if (pidfd >= 0) ::close(pidfd);
  pid_ = -1;
  return decode(status);
}

int run_program(const std::vector<std::string>& argv) {
  try {
    child_process p(argv, {.quiet = true});
    return p.wait(std::chrono::hours(1));
  } catch (const spawn_error&) {
    return 127;
  } catch (const std::exception&) {
    return -1;
  }
}

}  // namespace dlock::embedded
