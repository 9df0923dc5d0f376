// dlock run: hold a lock while a command runs.
//
// The handled signals are blocked in every thread (before the client's I/O thread exists, so it
// inherits the mask) and read from a signalfd in the main loop, together with a pipe on which
// the client reports the acquisition and a lost lease. One poll loop, no signal handlers.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <mutex>

#include "cli.hpp"
#include "dlock/lock.hpp"
#include "embedded/process.hpp"

namespace dlock::cli {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

constexpr int forwarded_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

class fd {
 public:
  explicit fd(int f = -1) : fd_(f) {}
  ~fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  fd(const fd&) = delete;
  fd& operator=(const fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// What the client's I/O thread tells the main loop, through a pipe.
struct events {
  std::mutex mutex;
  int write_end = -1;
  bool acquired_done = false;
  std::error_code acquire_error;
  lease granted;
  std::optional<lease_lost_reason> lost;

  void notify() {
    const char byte = 1;
    [[maybe_unused]] auto n = ::write(write_end, &byte, 1);
  }
};

std::string reason_text(lease_lost_reason r) {
  switch (r) {
    case lease_lost_reason::expired:
      return "its lease ran out before it could be renewed";
    case lease_lost_reason::not_held:
      return "it was taken away (expired, deleted or force-unlocked)";
  }
  return "unknown";
}

std::string describe(std::chrono::milliseconds d) {
  if (d.count() % 1000 == 0) return std::to_string(d.count() / 1000) + "s";
  return std::to_string(d.count()) + "ms";
}

}  // namespace

int run(const run_args& args) {
  sigset_t handled, original;
  sigemptyset(&handled);
  for (int sig : forwarded_signals)
    sigaddset(&handled, sig);
  sigaddset(&handled, SIGCHLD);
  ::pthread_sigmask(SIG_BLOCK, &handled, &original);
  fd signals(::signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK));
  int pipe_fds[2];
  if (signals.get() < 0 || ::pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw failure(exit_software, "cannot set up signal handling");
  }
  fd wake_read(pipe_fds[0]);
  fd wake_write(pipe_fds[1]);

  auto options = client_options::from_url(args.url);
  options.watchdog_lease = args.ttl;
  const auto c = connect(options);

  // The callbacks may outlive this function (an acquisition still pending when we exit on a
  // signal), so what they touch is shared.
  auto ev = std::make_shared<events>();
  ev->write_end = wake_write.get();
  lease_options lo;
  lo.on_lost = [ev](lease_lost_reason r) {
    std::lock_guard lock(ev->mutex);
    ev->lost = r;
    ev->notify();
  };
  auto on_acquired = [ev](std::error_code ec, lease l) {
    std::lock_guard lock(ev->mutex);
    ev->acquired_done = true;
    ev->acquire_error = ec;
    ev->granted = std::move(l);
    ev->notify();
  };
  const auto wait = args.wait.value_or(std::chrono::milliseconds::max());  // 0: one attempt
  if (args.kind == "simple") {
    c.simple(args.name).acquire_async(wait, on_acquired, lo);
  } else {
    c.reentrant(args.name).acquire_async(wait, on_acquired, lo);
  }

  std::optional<embedded::child_process> child;
  lease held;
  bool killing = false;
  steady::time_point kill_at{};
  std::optional<lease_lost_reason> lost;

  for (;;) {
    int timeout = -1;
    if (killing) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(kill_at - steady::now());
      timeout = static_cast<int>(std::max<std::int64_t>(0, left.count()));
    }
    pollfd fds[2] = {{signals.get(), POLLIN, 0}, {wake_read.get(), POLLIN, 0}};
    const int ready = ::poll(fds, 2, timeout);
    if (ready < 0 && errno != EINTR) throw failure(exit_software, "poll failed");
    if (killing && steady::now() >= kill_at) {
      child->signal(SIGKILL);
      killing = false;
    }

    if (fds[1].revents & POLLIN) {
      char drain[64];
      while (::read(wake_read.get(), drain, sizeof drain) > 0) {
      }
      std::unique_lock lock(ev->mutex);
      if (!child && ev->acquired_done) {
        const auto ec = ev->acquire_error;
        held = std::move(ev->granted);
        lock.unlock();
        if (ec) {
          throw failure(exit_code_for(dlock::error(ec, "")),
                        "cannot acquire " + args.name + ": " + ec.message());
        }
        if (!held) {
          throw failure(exit_not_acquired,
                        args.name + " is held by someone else" +
                            (args.wait && args.wait->count() > 0
                                 ? "; not acquired within " + describe(*args.wait)
                                 : ""));
        }
        // The command dies with dlock (PR_SET_PDEATHSIG): if dlock is killed, the lease
        // lapses, and the command must not go on without the lock.
        try {
          child.emplace(args.command, embedded::spawn_options{
                                          .env = {"DLOCK_NAME=" + args.name,
                                                  "DLOCK_FENCE=" + std::to_string(held.fence())},
                                          .signal_mask = &original});
        } catch (const embedded::spawn_error& e) {
          held.release();
          throw failure(e.code().value() == ENOENT ? exit_command_not_found : exit_cannot_execute,
                        e.what());
        }
        lock.lock();
      }
      if (child && ev->lost && !lost) {
        lost = ev->lost;
        std::cerr << "dlock: lost the lock " << args.name << ": " << reason_text(*lost)
                  << "; stopping the command (SIGTERM, SIGKILL after " << describe(args.grace)
                  << ")" << std::endl;
        child->signal(SIGTERM);
        killing = true;
        kill_at = steady::now() + args.grace;
      }
    }

    if (fds[0].revents & POLLIN) {
      signalfd_siginfo info;
      while (::read(signals.get(), &info, sizeof info) == sizeof info) {
        const int sig = static_cast<int>(info.ssi_signo);
        if (sig == SIGCHLD) continue;  // reaped below
        if (!child) {
          // Still waiting for the lock: give up at once. The pending acquisition keeps the
          // client's I/O thread busy, so leave without running destructors; a grant that races
          // with this is released by the lease's expiry.
          std::cerr << "dlock: interrupted while waiting for " << args.name << std::endl;
          std::_Exit(128 + sig);
        }
        // A terminal's signal already reached the whole foreground group, the command
        // included; forward only what a process sent to us alone.
        if (info.ssi_code != SI_KERNEL) child->signal(sig);
      }
    }

    if (child) {
      if (const auto status = child->try_wait()) {
        if (lost) return exit_lease_lost;
        if (!held.release()) {
          std::cerr << "dlock: warning: could not confirm the release of " << args.name
                    << "; it expires within " << describe(args.ttl) << std::endl;
        }
        return *status;
      }
    }
  }
}

}  // namespace dlock::cli
