// The supervision of `dlock run` and `dlock sem` (run_holding): acquire, start the command,
// hold while it and everything it starts run, stop them if the lease is lost, release, and say
// how it went in the exit status. Whatever is held: a lock of any kind, the locks of a
// multi-lock, a semaphore's permit.
//
// The handled signals are blocked in every thread (before the client's I/O thread exists, so it
// inherits the mask) and read from a signalfd in the main loop, together with a pipe on which
// the client reports the acquisition and a lost lease. One poll loop, no signal handlers.
//
// dlock is the child subreaper of the command's whole process tree: a grandchild that outlives
// the command is reparented to dlock, which keeps the lock until the last descendant has exited
// (flock(1) holds its lock while any inherited descriptor lives; this is the same promise), and
// on a lost lease signals every descendant, wherever its process group or session.
//
// --min-hold keeps the lock (renewed) after the tree has exited until that long after the grant,
// so that a short job cannot run again at once on a host whose clock or schedule is skewed;
// --max-hold stops the tree as a lost lease does. Both count from the grant (run_deadlines.hpp).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "cli.hpp"
#include "display.hpp"
#include "dlock/lock.hpp"
#include "embedded/process.hpp"
#include "process_tree.hpp"
#include "run_deadlines.hpp"

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
  std::optional<grant_result> acquired;
  std::optional<lease_lost_reason> lost;

  void notify() {
    const char byte = 1;
    [[maybe_unused]] auto n = ::write(write_end, &byte, 1);
  }
};

// Waits, until `until` at the latest, for the acquisition's completion (after a cancel); nullopt
// if it did not come.
std::optional<grant_result> await_completion(events& ev, int wake_fd, steady::time_point until) {
  for (;;) {
    {
      std::lock_guard lock(ev.mutex);
      if (ev.acquired) return std::exchange(ev.acquired, std::nullopt);
    }
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - steady::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd p{wake_fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) > 0) {
      char drain[64];
      while (::read(wake_fd, drain, sizeof drain) > 0) {
      }
    }
  }
}

std::string reason_text(lease_lost_reason r) {
  switch (r) {
    case lease_lost_reason::expired:
      return "its lease ran out before it could be renewed";
    case lease_lost_reason::not_held:
      return "it was taken away (expired, deleted, force-unlocked, or the server lost it)";
  }
  return "unknown";
}

std::string describe(std::chrono::milliseconds d) {
  if (d.count() % 1000 == 0) return std::to_string(d.count() / 1000) + "s";
  return std::to_string(d.count()) + "ms";
}

// One grant's leases, judged as one: valid while every lease is, lost when any is.
bool all_valid(const std::vector<lease>& leases) {
  return std::all_of(leases.begin(), leases.end(), [](const lease& l) { return l.valid(); });
}

steady::time_point valid_until(const std::vector<lease>& leases) {
  auto until = steady::time_point::max();
  for (const auto& l : leases)
    until = std::min(until, l.valid_until());
  return until;
}

// Releases every lease, last taken first; the worst outcome counts (a hold found lost over one
// that could not be confirmed over a confirmed one).
release_outcome release_all(std::vector<lease>& leases) {
  auto worst = release_outcome::released;
  while (!leases.empty()) {
    const auto o = leases.back().release_checked();
    leases.pop_back();
    if (o == release_outcome::not_held || worst == release_outcome::released) worst = o;
  }
  return worst;
}

// Connects, retrying what is temporary (a server restarting, unreachable for a moment) until
// `deadline`; a signal meanwhile ends dlock as it would while waiting for the lock.
dlock::client connect_until(const client_options& options, steady::time_point deadline,
                            int signal_fd) {
  auto backoff = 50ms;
  for (;;) {
    try {
      return dlock::client(options);
    } catch (const dlock::error& e) {
      const bool temporary = e.code() == errc::connect_failed || e.code() == errc::timeout ||
                             e.code() == errc::connection_lost || e.code() == errc::server_busy;
      const auto now = steady::now();
      if (!temporary || now >= deadline) throw failure(exit_code_for(e), message_of(e));
      const auto pause = std::min<steady::duration>(backoff, deadline - now);
      backoff = std::min(backoff * 2, 1000ms);
      pollfd p{signal_fd, POLLIN, 0};
      if (::poll(&p, 1,
                 static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(pause).count())) >
          0) {
        signalfd_siginfo info;
        if (::read(signal_fd, &info, sizeof info) == sizeof info && info.ssi_signo != SIGCHLD) {
          std::cerr << "dlock: interrupted while connecting" << std::endl;
          std::_Exit(128 + static_cast<int>(info.ssi_signo));
        }
      }
    }
  }
}

// One supervision, from connecting to the exit status. The main loop (supervise) waits on the
// signalfd and the client's pipe; each of its steps is a member below.
class run_supervisor {
 public:
  run_supervisor(const run_args& args, const holding_plan& plan) : args_(args), plan_(plan) {
    set_up_signals();
  }

  int run() {
    connect_and_acquire();
    try {
      return supervise();
    } catch (...) {
      kill_the_tree();
      throw;
    }
  }

 private:
  // Before any child exists, orphans of the command's tree must come to us; and the handled
  // signals are blocked before the client's I/O thread exists, so that it inherits the mask.
  void set_up_signals() {
    try {
      become_subreaper();
    } catch (const std::exception& e) {
      throw failure(exit_software,
                    std::string("cannot watch the command's processes: ") + e.what());
    }
    sigset_t handled;
    sigemptyset(&handled);
    for (int sig : forwarded_signals)
      sigaddset(&handled, sig);
    sigaddset(&handled, SIGCHLD);
    ::pthread_sigmask(SIG_BLOCK, &handled, &original_mask_);
    signals_ = std::make_unique<fd>(::signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK));
    int pipe_fds[2];
    if (signals_->get() < 0 || ::pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) {
      throw failure(exit_software, "cannot set up signal handling");
    }
    wake_read_ = std::make_unique<fd>(pipe_fds[0]);
    wake_write_ = std::make_unique<fd>(pipe_fds[1]);
  }

  void connect_and_acquire() {
    const auto wait = args_.wait.value_or(std::chrono::milliseconds::max());  // 0: one attempt
    const auto start = steady::now();
    // An explicit --wait also covers a server that is down when dlock starts (restarting, say);
    // without one, an unreachable server is reported at once: more likely a wrong URL than a
    // restart, and a cron job must not hang on it forever.
    const auto connect_deadline = !args_.wait || wait.count() <= 0 ? start : start + wait;
    auto options = args_.target;
    options.watchdog_lease = args_.ttl;
    // What `dlock status` shows its holder runs (the holder record).
    options.holder_label = shell_words(args_.command);
    client_.emplace(connect_until(options, connect_deadline, signals_->get()));
    // The callbacks may outlive this object (an acquisition still pending when we exit on a
    // signal), so what they touch is shared.
    ev_->write_end = wake_write_->get();
    lease_options lo;
    lo.on_lost = [ev = ev_](lease_lost_reason r) {
      std::lock_guard lock(ev->mutex);
      ev->lost = r;
      ev->notify();
    };
    acquiring_ = plan_.acquire(*client_, wait, std::move(lo), [ev = ev_](grant_result r) {
      std::lock_guard lock(ev->mutex);
      ev->acquired = std::move(r);
      ev->notify();
    });
  }

  int supervise() {
    for (;;) {
      pollfd fds[2] = {{signals_->get(), POLLIN, 0}, {wake_read_->get(), POLLIN, 0}};
      const int ready = ::poll(fds, 2, deadlines_.timeout(steady::now(), tree_gone_));
      if (ready < 0 && errno != EINTR) throw failure(exit_software, "poll failed");
      if (deadlines_.kill_due(steady::now())) signal_descendants(SIGKILL);
      if (fds[1].revents & POLLIN) on_client_news();
      if (fds[0].revents & POLLIN) {
        if (const auto interrupted = on_signals()) return *interrupted;
      }
      if (child_pid_ < 0) continue;
      // Reaped first: a command that has just exited was not stopped by --max-hold.
      if (const auto done = tree_gone_ ? after_min_hold() : after_reaping()) return *done;
      if (!tree_gone_ && deadlines_.max_hold_due(steady::now())) stop_at_max_hold();
    }
  }

  void stop_at_max_hold() {
    max_hold_hit_ = true;
    std::cerr << "dlock: " << plan_.name << " held for " << describe(*args_.max_hold)
              << " (--max-hold): stopping the command" << std::endl;
    stop_the_tree();
  }

  // SIGTERM to the command and every descendant, SIGKILL after --grace; whichever asks first
  // (a lost lease, --max-hold) sets the grace.
  void stop_the_tree() {
    if (deadlines_.stopping()) return;
    signal_descendants(SIGTERM);
    deadlines_.stopping(steady::now(), args_.grace);
  }

  // The client's pipe: the acquisition's outcome (start the command) or a lost lease (stop it).
  void on_client_news() {
    char drain[64];
    while (::read(wake_read_->get(), drain, sizeof drain) > 0) {
    }
    std::unique_lock lock(ev_->mutex);
    if (child_pid_ < 0 && ev_->acquired) {
      auto result = std::move(*ev_->acquired);
      ev_->acquired.reset();
      lock.unlock();
      start_command(std::move(result));
      lock.lock();
    }
    if (child_pid_ > 0 && ev_->lost && !lost_) {
      lost_ = ev_->lost;
      lock.unlock();
      if (tree_gone_) return;  // during --min-hold: nothing to stop, after_min_hold says it
      std::cerr << "dlock: lost " << plan_.what << ": " << reason_text(*lost_)
                << "; stopping the command and everything it started (SIGTERM, SIGKILL after "
                << describe(args_.grace) << ")" << std::endl;
      stop_the_tree();
    }
  }

  void start_command(grant_result result) {
    if (result.error) {
      std::string message = result.message;
      if (const auto generic = ": " + result.error.message();
          message.size() > generic.size() && message.ends_with(generic)) {
        message.resize(message.size() - generic.size());  // as message_of does
      }
      if (result.error == errc::read_only) {
        message += " (the URL names a replica; locks need the master)";
      }
      const auto code = exit_code_for(dlock::error(result.error, ""));
      // Granted but never replicated (--replicas), and undone: not acquired within --wait.
      throw failure(code == exit_not_acquired ? args_.conflict_exit_code : code, message);
    }
    held_ = std::move(result.leases);
    if (held_.empty()) {
      throw failure(args_.conflict_exit_code,
                    plan_.busy + (args_.wait && args_.wait->count() > 0
                                      ? "; not acquired within " + describe(*args_.wait)
                                      : ""));
    }
    deadlines_.granted(steady::now());
    // The command dies with dlock (PR_SET_PDEATHSIG): if dlock is killed, the lease lapses, and
    // the command must not go on without the lock.
    try {
      child_.emplace(args_.command, embedded::spawn_options{.env = plan_.environment(held_),
                                                            .signal_mask = &original_mask_});
      child_pid_ = child_->pid();
    } catch (const embedded::spawn_error& e) {
      release_all(held_);
      throw failure(e.code().value() == ENOENT ? exit_command_not_found : exit_cannot_execute,
                    e.what());
    }
  }

  // The signals that came; an exit status if dlock must end now (interrupted while waiting).
  std::optional<int> on_signals() {
    signalfd_siginfo info;
    while (::read(signals_->get(), &info, sizeof info) == sizeof info) {
      const int sig = static_cast<int>(info.ssi_signo);
      if (sig == SIGCHLD) continue;  // reaped by after_reaping
      if (child_pid_ < 0) return interrupted_while_waiting(sig);
      const bool terminating = sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT;
      // Told to stop, dlock does not then hold the lock on for --min-hold: a service manager
      // would kill it meanwhile, leaving the lock to lapse with its lease.
      if (terminating) stop_asked_ = true;
      if (tree_gone_) {
        if (!terminating) continue;  // nobody is left to forward it to
        std::cerr << "dlock: interrupted during --min-hold: releasing " << plan_.what << " early"
                  << std::endl;
        interrupted_by_ = sig;
        return release_and_judge();
      }
      // A terminal's signal already reached the whole foreground group, the command included;
      // forward only what a process sent to us alone. Once the command has exited, what it left
      // running gets it.
      if (info.ssi_code == SI_KERNEL) continue;
      if (child_ && child_->running()) {
        child_->signal(sig);
      } else {
        signal_descendants(sig);
      }
    }
    return std::nullopt;
  }

  // Still waiting for the lock: give up, as a --wait that ran out does. Cancelling hands back a
  // place in the server's queue (a fair lock, a waiting writer) rather than leaving it to lapse,
  // and undoes a grant racing with this; the client's destructor then waits for that undo. An
  // acquisition that cannot be cancelled (a multi-lock's) or does not end soon is left to the
  // leases' expiry instead.
  int interrupted_while_waiting(int sig) {
    std::cerr << "dlock: interrupted while waiting for " << plan_.what << std::endl;
    acquiring_.cancel();
    auto raced = await_completion(*ev_, wake_read_->get(), steady::now() + 2s);
    if (!raced) std::_Exit(128 + sig);
    release_all(raced->leases);
    return 128 + sig;
  }

  // Reaps what exited; once the command and all it started are gone, the exit status.
  std::optional<int> after_reaping() {
    const bool none_left = reap_children(child_pid_, [&] { status_ = child_->try_wait(); });
    if (!status_) return std::nullopt;
    if (!none_left) {
      if (!told_of_leftovers_) {
        told_of_leftovers_ = true;
        std::cerr << "dlock: the command exited (status " << *status_ << "); holding " << plan_.what
                  << " until the " << descendants().size()
                  << " process(es) it left running have exited too" << std::endl;
      }
      return std::nullopt;
    }
    tree_gone_ = true;
    return after_min_hold();
  }

  // The tree is gone: release once --min-hold has passed since the grant, or at once when the
  // lease was lost or dlock was told to stop.
  std::optional<int> after_min_hold() {
    if (lost_ || stop_asked_ || deadlines_.min_hold_over(steady::now())) {
      return release_and_judge();
    }
    in_min_hold_ = true;
    return std::nullopt;
  }

  // The command and all it started are gone. Was the lock ours the whole time?
  int release_and_judge() {
    {
      std::lock_guard lock(ev_->mutex);
      if (ev_->lost) lost_ = ev_->lost;
    }
    if (!lost_ && !all_valid(held_)) lost_ = lease_lost_reason::expired;  // dlock was paused
    const auto until = valid_until(held_);
    const auto outcome = release_all(held_);
    const char* const when =
        in_min_hold_ ? "before --min-hold had passed" : "while the command ran";
    if (lost_) {
      std::cerr << "dlock: " << plan_.what << " was lost " << when << ": " << reason_text(*lost_)
                << std::endl;
      return args_.lost_exit_code;
    }
    switch (outcome) {
      case release_outcome::released:
        return result();
      case release_outcome::not_held:
        std::cerr << "dlock: " << plan_.what << " was no longer held at its release: it was lost "
                  << when << std::endl;
        return args_.lost_exit_code;
      case release_outcome::unconfirmed:
        if (steady::now() >= until) {
          std::cerr << "dlock: could not confirm the release of " << plan_.what
                    << ", and its lease has run out: it may have been lost " << when << std::endl;
          return args_.lost_exit_code;
        }
        std::cerr << "dlock: warning: could not confirm the release of " << plan_.what
                  << "; it was held throughout and expires within " << describe(args_.ttl)
                  << std::endl;
        return result();
    }
    return result();
  }

  // The status of a hold that was never lost: --max-hold's code if it stopped the command, 128+N
  // if signal N ended --min-hold, else the command's own.
  int result() const {
    if (max_hold_hit_) return exit_max_hold;
    if (interrupted_by_) return 128 + *interrupted_by_;
    return *status_;
  }

  // Whatever ends dlock early (an exception on the way), nothing the command started may
  // outlive it, since nothing then holds the lock for them: PR_SET_PDEATHSIG reaches the
  // command alone.
  void kill_the_tree() noexcept {
    const auto give_up = steady::now() + 2s;
    // Again until none is left: one may fork as its parent dies; the dead come to us as orphans.
    while (signal_descendants(SIGKILL) > 0 && steady::now() < give_up) {
      reap_children(child_pid_, [&] { status_ = child_->try_wait(); });
      std::this_thread::sleep_for(5ms);
    }
  }

  const run_args& args_;
  const holding_plan& plan_;
  sigset_t original_mask_{};
  std::unique_ptr<fd> signals_, wake_read_, wake_write_;
  std::optional<dlock::client> client_;
  std::shared_ptr<events> ev_ = std::make_shared<events>();
  acquire_handle acquiring_;
  std::optional<embedded::child_process> child_;
  pid_t child_pid_ = -1;
  std::vector<lease> held_;    // every lease of the grant
  std::optional<int> status_;  // the command's, once it has exited
  bool told_of_leftovers_ = false;
  hold_deadlines deadlines_{args_.min_hold, args_.max_hold};
  bool tree_gone_ = false;             // the command and all it started have exited
  bool in_min_hold_ = false;           // held on after that for --min-hold
  bool max_hold_hit_ = false;          // --max-hold stopped the command
  bool stop_asked_ = false;            // a terminating signal came after the grant
  std::optional<int> interrupted_by_;  // the signal that ended --min-hold
  std::optional<lease_lost_reason> lost_;
};

}  // namespace

int run_holding(const run_args& args, const holding_plan& plan) {
  return run_supervisor(args, plan).run();
}

}  // namespace dlock::cli
