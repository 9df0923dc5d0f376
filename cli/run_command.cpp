// dlock run: hold a lock while a command, and everything it starts, runs. run_holding is the
// machinery, whatever is held (a lock of any kind, the locks of a multi-lock, a semaphore's
// permit for dlock sem); run() chooses the lock and what the command is told.
//
// The handled signals are blocked in every thread (before the client's I/O thread exists, so it
// inherits the mask) and read from a signalfd in the main loop, together with a pipe on which
// the client reports the acquisition and a lost lease. One poll loop, no signal handlers.
//
// dlock is the child subreaper of the command's whole process tree: a grandchild that outlives
// the command is reparented to dlock, which keeps the lock until the last descendant has exited
// (flock(1) holds its lock while any inherited descriptor lives; this is the same promise), and
// on a lost lease signals every descendant, wherever its process group or session.
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
#include <thread>

#include <CLI/CLI.hpp>

#include "cli.hpp"
#include "dlock/lock.hpp"
#include "dlock/multi_lock.hpp"
#include "dlock/read_write_lock.hpp"
#include "embedded/process.hpp"
#include "process_tree.hpp"

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

}  // namespace

int run_holding(const run_args& args, const holding_plan& plan) {
  // Before any child exists: orphans of the command's tree must come to us.
  try {
    become_subreaper();
  } catch (const std::exception& e) {
    throw failure(exit_software, std::string("cannot watch the command's processes: ") + e.what());
  }
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

  const auto wait = args.wait.value_or(std::chrono::milliseconds::max());  // 0: one attempt
  const auto start = steady::now();
  // An explicit --wait also covers a server that is down when dlock starts (restarting, say);
  // without one, an unreachable server is reported at once: more likely a wrong URL than a
  // restart, and a cron job must not hang on it forever.
  const auto connect_deadline = !args.wait || wait.count() <= 0 ? start : start + wait;
  auto options = args.target;
  options.watchdog_lease = args.ttl;
  const auto c = connect_until(options, connect_deadline, signals.get());

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
  const auto acquiring = plan.acquire(c, wait, std::move(lo), [ev](grant_result r) {
    std::lock_guard lock(ev->mutex);
    ev->acquired = std::move(r);
    ev->notify();
  });

  std::optional<embedded::child_process> child;
  pid_t child_pid = -1;
  std::vector<lease> held;    // every lease of the grant
  std::optional<int> status;  // the command's, once it has exited
  bool told_of_leftovers = false;
  bool killing = false;
  steady::time_point kill_at{};
  std::optional<lease_lost_reason> lost;

  // Whatever ends dlock early (an exception on the way), nothing the command started may outlive
  // it, since nothing then holds the lock for them: PR_SET_PDEATHSIG reaches the command alone.
  auto kill_the_tree = [&]() noexcept {
    const auto give_up = steady::now() + 2s;
    // Again until none is left: one may fork as its parent dies; the dead come to us as orphans.
    while (signal_descendants(SIGKILL) > 0 && steady::now() < give_up) {
      reap_children(child_pid, [&] { status = child->try_wait(); });
      std::this_thread::sleep_for(5ms);
    }
  };
  auto supervise = [&]() -> int {
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
        // Again until none is left: one may have forked just before it was killed.
        signal_descendants(SIGKILL);
        kill_at = steady::now() + 100ms;
      }

      if (fds[1].revents & POLLIN) {
        char drain[64];
        while (::read(wake_read.get(), drain, sizeof drain) > 0) {
        }
        std::unique_lock lock(ev->mutex);
        if (child_pid < 0 && ev->acquired) {
          auto result = std::move(*ev->acquired);
          ev->acquired.reset();
          lock.unlock();
          if (result.error) {
            std::string message = result.message;
            if (const auto generic = ": " + result.error.message();
                message.size() > generic.size() && message.ends_with(generic)) {
              message.resize(message.size() - generic.size());  // as message_of does
            }
            if (result.error == errc::read_only) {
              message += " (the URL names a replica; locks need the master)";
            }
            throw failure(exit_code_for(dlock::error(result.error, "")), message);
          }
          held = std::move(result.leases);
          if (held.empty()) {
            throw failure(exit_not_acquired,
                          plan.busy + (args.wait && args.wait->count() > 0
                                           ? "; not acquired within " + describe(*args.wait)
                                           : ""));
          }
          // The command dies with dlock (PR_SET_PDEATHSIG): if dlock is killed, the lease
          // lapses, and the command must not go on without the lock.
          try {
            child.emplace(args.command, embedded::spawn_options{.env = plan.environment(held),
                                                                .signal_mask = &original});
            child_pid = child->pid();
          } catch (const embedded::spawn_error& e) {
            release_all(held);
            throw failure(e.code().value() == ENOENT ? exit_command_not_found : exit_cannot_execute,
                          e.what());
          }
          lock.lock();
        }
        if (child_pid > 0 && ev->lost && !lost) {
          lost = ev->lost;
          lock.unlock();
          std::cerr << "dlock: lost " << plan.what << ": " << reason_text(*lost)
                    << "; stopping the command and everything it started (SIGTERM, SIGKILL after "
                    << describe(args.grace) << ")" << std::endl;
          signal_descendants(SIGTERM);
          killing = true;
          kill_at = steady::now() + args.grace;
        }
      }

      if (fds[0].revents & POLLIN) {
        signalfd_siginfo info;
        while (::read(signals.get(), &info, sizeof info) == sizeof info) {
          const int sig = static_cast<int>(info.ssi_signo);
          if (sig == SIGCHLD) continue;  // reaped below
          if (child_pid < 0) {
            // Still waiting for the lock: give up, as a --wait that ran out does. Cancelling
            // hands back a place in the server's queue (a fair lock, a waiting writer) rather
            // than leaving it to lapse, and undoes a grant racing with this; the client's
            // destructor then waits for that undo. An acquisition that cannot be cancelled (a
            // multi-lock's) or does not end soon is left to the leases' expiry instead.
            std::cerr << "dlock: interrupted while waiting for " << plan.what << std::endl;
            acquiring.cancel();
            auto raced = await_completion(*ev, wake_read.get(), steady::now() + 2s);
            if (!raced) std::_Exit(128 + sig);
            release_all(raced->leases);
            return 128 + sig;
          }
          // A terminal's signal already reached the whole foreground group, the command
          // included; forward only what a process sent to us alone. Once the command has exited,
          // what it left running gets it.
          if (info.ssi_code == SI_KERNEL) continue;
          if (child && child->running()) {
            child->signal(sig);
          } else {
            signal_descendants(sig);
          }
        }
      }

      if (child_pid < 0) continue;
      const bool none_left = reap_children(child_pid, [&] { status = child->try_wait(); });
      if (!status) continue;
      if (!none_left) {
        if (!told_of_leftovers) {
          told_of_leftovers = true;
          std::cerr << "dlock: the command exited (status " << *status << "); holding " << plan.what
                    << " until the " << descendants().size()
                    << " process(es) it left running have exited too" << std::endl;
        }
        continue;
      }

      // The command and all it started are gone. Was the lock ours the whole time?
      {
        std::lock_guard lock(ev->mutex);
        if (ev->lost) lost = ev->lost;
      }
      if (!lost && !all_valid(held)) lost = lease_lost_reason::expired;  // dlock itself was paused
      const auto until = valid_until(held);
      const auto outcome = release_all(held);
      if (lost) {
        std::cerr << "dlock: " << plan.what
                  << " was lost while the command ran: " << reason_text(*lost) << std::endl;
        return args.lost_exit_code;
      }
      switch (outcome) {
        case release_outcome::released:
          return *status;
        case release_outcome::not_held:
          std::cerr << "dlock: " << plan.what
                    << " was no longer held when the command ended: it was lost while it ran"
                    << std::endl;
          return args.lost_exit_code;
        case release_outcome::unconfirmed:
          if (steady::now() >= until) {
            std::cerr << "dlock: could not confirm the release of " << plan.what
                      << ", and its lease has run out: it may have been lost while the command ran"
                      << std::endl;
            return args.lost_exit_code;
          }
          std::cerr << "dlock: warning: could not confirm the release of " << plan.what
                    << "; it was held throughout and expires within " << describe(args.ttl)
                    << std::endl;
          return *status;
      }
      return *status;
    }
  };
  try {
    return supervise();
  } catch (...) {
    kill_the_tree();
    throw;
  }
}

namespace {

// A multi-lock's acquisition blocks, so it waits on a thread of its own, which reports as an
// asynchronous acquisition does. What it holds of the client goes before it reports: after
// that, run_holding may return and the process exit.
void acquire_multi(dlock::multi_lock m, std::chrono::milliseconds wait, lease_options options,
                   std::function<void(grant_result)> done) {
  std::thread([m = std::optional(std::move(m)), wait, o = std::optional(std::move(options)),
               done = std::move(done)]() mutable {
    grant_result g;
    try {
      auto all =
          wait == std::chrono::milliseconds::max() ? m->acquire(*o) : m->try_acquire_for(wait, *o);
      // A multi_lease shows its holds read-only; this one is ours (not const), so its holds are
      // taken over, one lease per name, and it is left holding nothing.
      g.leases = all.take();
    } catch (const dlock::error& e) {
      g.error = e.code();
      g.message = message_of(e);
    } catch (const std::exception& e) {
      g.error = make_error_code(errc::unexpected_reply);
      g.message = e.what();
    }
    m.reset();
    o.reset();
    done(std::move(g));
  }).detach();
}

// The names once each, in the order given.
std::vector<std::string> distinct(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (const auto& n : names) {
    if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
  }
  return out;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names)
    out += (out.empty() ? "" : ", ") + n;
  return out;
}

// DLOCK_NAME and DLOCK_FENCE for the first name, DLOCK_FENCES "NAME=FENCE ..." for all of them.
std::vector<std::string> run_environment(const std::vector<std::string>& names,
                                         const std::vector<lease>& leases) {
  const auto fence_of = [&](const std::string& name) -> std::uint64_t {
    if (leases.size() == 1) return leases.front().fence();
    for (const auto& l : leases) {
      if (l.name() == name) return l.fence();
    }
    return 0;
  };
  std::string fences;
  for (const auto& n : names)
    fences += (fences.empty() ? "" : " ") + n + "=" + std::to_string(fence_of(n));
  return {"DLOCK_NAME=" + names.front(), "DLOCK_FENCE=" + std::to_string(fence_of(names.front())),
          "DLOCK_FENCES=" + fences};
}

}  // namespace

acquire_handle acquire_lease(dlock::basic_lock& lock, std::chrono::milliseconds wait,
                             lease_options options, std::function<void(grant_result)> done) {
  return lock.acquire_async(
      wait,
      [done = std::move(done)](acquire_result r) {
        grant_result g;
        if (r.held) g.leases.push_back(std::move(r.held));
        g.error = r.error;
        g.message = std::move(r.message);
        done(std::move(g));
      },
      std::move(options));
}

namespace {

// Checks the kind and the names, then holds them while the command runs.
int run_locks(const run_args& args) {
  const auto& kind = args.kind;
  if (kind != "reentrant" && kind != "simple" && kind != "fair" && kind != "read" &&
      kind != "write") {
    throw failure(exit_usage, "run: --kind must be reentrant, simple, fair, read or write");
  }
  const auto names = distinct(args.names);
  if (names.empty()) throw failure(exit_usage, "run: no lock name (dlock run NAME -- CMD)");
  const bool multi = names.size() > 1;
  if (multi && kind != "reentrant") {
    throw failure(exit_usage,
                  "run: several names are taken as one multi-lock, which only "
                  "--kind reentrant (the default) can be, not " +
                      kind);
  }
  holding_plan plan;
  const auto masters = args.target.redlock.masters.size();
  if (multi) {
    plan.what = "the locks " + joined(names);
    plan.busy = plan.what + (masters > 0 ? " were not all granted by a majority of the " +
                                               std::to_string(masters) +
                                               " RedLock masters (held, or masters unreachable)"
                                         : " are not all free (held by someone else)");
  } else {
    const std::string side = kind == "fair"    ? "fair lock "
                             : kind == "read"  ? "read lock "
                             : kind == "write" ? "write lock "
                                               : "lock ";
    plan.what = "the " + side + names.front();
    plan.busy = names.front() +
                (masters > 0 ? " was not granted by a majority of the " + std::to_string(masters) +
                                   " RedLock masters (held, or masters unreachable)"
                             : " is held by someone else");
  }
  plan.acquire = [names, kind](const dlock::client& c, std::chrono::milliseconds wait,
                               lease_options o, std::function<void(grant_result)> done) {
    const auto& n = names.front();
    if (names.size() > 1) {
      acquire_multi(c.multi(names), wait, std::move(o), std::move(done));
      return acquire_handle();  // a blocking acquisition on a thread of its own
    }
    const auto go = [&](dlock::basic_lock lock) {
      return acquire_lease(lock, wait, std::move(o), std::move(done));
    };
    if (kind == "simple") return go(c.simple(n));
    if (kind == "fair") return go(c.fair(n));
    if (kind == "read") return go(c.read_write(n).read());
    if (kind == "write") return go(c.read_write(n).write());
    return go(c.reentrant(n));
  };
  plan.environment = [names](const std::vector<lease>& leases) {
    return run_environment(names, leases);
  };
  return run_holding(args, plan);
}

class run_command final : public subcommand {
 public:
  explicit run_command(CLI::App& app)
      : subcommand(app.add_subcommand(
            "run", "Run CMD while holding the lock NAME; a distributed flock(1)")) {
    app_->footer(R"(
Runs CMD with DLOCK_NAME and DLOCK_FENCE (the grant's fencing token) in its environment, renews
the lock while CMD runs, forwards SIGINT/SIGTERM/SIGHUP/SIGQUIT/SIGUSR1/SIGUSR2 sent to dlock, and
releases the lock when CMD and every process it started have exited, exiting with CMD's status.
If the lock is lost, CMD and all its descendants get SIGTERM, then SIGKILL after --grace, and
dlock exits 76 (or --lost-exit-code); also when the lease ran out while dlock itself was paused.
Not acquired within --wait: exit 75. A name starting with "-": dlock run -- -name -- CMD.
--kind fair: first come, first served across machines; read/write: the two sides of a read-write
lock (readers share). Several names: all of them at once or none (reentrant locks taken in one
global order, never deadlocking); DLOCK_FENCE is then the first name's token and DLOCK_FENCES
lists "NAME=FENCE" for every name, separated by spaces.

Examples:
  dlock run report -- ./report.sh
  dlock run --wait 30s --ttl 15s --kind simple db-migrate -- ./migrate up
  dlock run --kind write catalog -- ./import.sh
  dlock run accounts ledger -- ./transfer.sh
  */5 * * * *  dlock --url redis://redis.internal run --wait 0 cleanup -- /opt/cleanup)");
    flags_.add_to(*app_, "the lock");
    app_->add_option("--kind", args_.kind,
                     "reentrant (Redisson layout, default), simple, fair, read or write (the two "
                     "sides of a read-write lock)")
        ->type_name("KIND");
    app_->add_option("--replicas", args_.replicas,
                     "A grant counts only once N replicas acknowledged it (WAIT); otherwise it "
                     "is undone and retried within --wait, then exit 75")
        ->type_name("N");
    app_->add_option("name", args_.names, "Lock name; several: all of them (a multi-lock)")
        ->required();
  }
  bool takes_command() const override { return true; }
  int run(const invocation& in) override {
    flags_.apply(in, "run", "dlock run NAME -- CMD", args_);
    if (args_.replicas < 0) throw failure(exit_usage, "run: --replicas must not be negative");
    args_.target.min_replica_acks = args_.replicas;
    return run_locks(args_);
  }

 private:
  holding_flags flags_;
  run_args args_;
};

}  // namespace

std::unique_ptr<subcommand> add_run_command(CLI::App& app) {
  return std::make_unique<run_command>(app);
}

}  // namespace dlock::cli
