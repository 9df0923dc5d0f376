// dlock run: hold a lock while a command, and everything it starts, runs. run() chooses the lock
// and what the command is told; the supervision of the command (run_holding) is
// run_supervisor.cpp's, whatever is held (a lock of any kind, the locks of a multi-lock, a
// semaphore's permit for dlock sem).
#include <algorithm>
#include <iostream>
#include <memory>
#include <thread>

#include <CLI/CLI.hpp>

#include "cli.hpp"
#include "dlock/lock.hpp"
#include "dlock/multi_lock.hpp"
#include "dlock/read_write_lock.hpp"

namespace dlock::cli {
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

void add_conflict_exit_code(CLI::App& cmd, int& code, const std::string& what) {
  cmd.add_option("--conflict-exit-code", code,
                 "Exit with this instead of 75 when " + what +
                     " was not acquired within --wait (flock -E); only then")
      ->check(CLI::Range(0, 255))
      ->type_name("N");
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
  plan.name = joined(names);
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
Not acquired within --wait: exit 75 (or --conflict-exit-code). A name starting with "-": dlock
run -- -name -- CMD. -c STRING runs /bin/sh -c STRING instead of -- CMD.
--min-hold DUR: dlock (and the lock) stays that long after the grant even if CMD ends sooner.
--max-hold DUR: CMD still running that long after the grant is stopped as on a lost lock, and
dlock exits 79.
--kind fair: first come, first served across machines; read/write: the two sides of a read-write
lock (readers share). Several names: all of them at once or none (reentrant locks taken in one
global order, never deadlocking); DLOCK_FENCE is then the first name's token and DLOCK_FENCES
lists "NAME=FENCE" for every name, separated by spaces.

Examples:
  dlock run report -- ./report.sh
  dlock run --wait 30s --ttl 15s --kind simple db-migrate -- ./migrate up
  dlock run --kind write catalog -- ./import.sh
  dlock run accounts ledger -- ./transfer.sh
  */5 * * * *  dlock --url redis://redis.internal run --wait 0 cleanup -- /opt/cleanup
  dlock run --wait 0 --conflict-exit-code 0 --min-hold 1m --max-hold 4m cleanup -c 'make clean')");
    flags_.add_to(*app_, "the lock");
    app_->add_option("--kind", args_.kind,
                     "reentrant (Redisson layout, default), simple, fair, read or write (the two "
                     "sides of a read-write lock)")
        ->type_name("KIND");
    app_->add_option("--replicas", args_.replicas,
                     "A grant counts only once N replicas acknowledged it (WAIT); otherwise it "
                     "is undone and retried within --wait, then exit 75")
        ->type_name("N");
    add_cron_options();
    app_->add_option("name", args_.names, "Lock name; several: all of them (a multi-lock)")
        ->required();
  }
  bool takes_command() const override { return true; }
  int run(const invocation& in) override {
    flags_.apply(with_shell(in), "run", "dlock run NAME -- CMD, or dlock run NAME -c STRING",
                 args_);
    if (args_.replicas < 0) throw failure(exit_usage, "run: --replicas must not be negative");
    args_.target.min_replica_acks = args_.replicas;
    apply_holds();
    return run_locks(args_);
  }

 private:
  // What flock(1), ShedLock and `consul lock` users reach for when a job runs from cron.
  void add_cron_options() {
    app_->add_option("--min-hold", min_hold_text_,
                     "Hold the lock at least this long after the grant, even once CMD has "
                     "ended (ShedLock's lockAtLeastFor); dlock waits until then")
        ->type_name("DUR");
    app_->add_option("--max-hold", max_hold_text_,
                     "If CMD still runs this long after the grant, stop it as on a lost lock "
                     "(SIGTERM, SIGKILL after --grace) and exit 79")
        ->type_name("DUR");
    add_conflict_exit_code(*app_, args_.conflict_exit_code, "the lock");
    shell_ = app_->add_option("-c,--shell", shell_text_,
                              "Run STRING with /bin/sh -c instead of -- CMD (flock -c)")
                 ->type_name("STRING");
  }

  // -c STRING stands for "-- /bin/sh -c STRING"; exactly one of the two says what to run.
  invocation with_shell(const invocation& in) const {
    if (shell_->count() == 0) return in;  // apply() insists on "-- CMD"
    if (in.has_separator) {
      throw failure(exit_usage, "run: -c STRING and -- CMD exclude each other; give one of them");
    }
    auto out = in;
    out.command = {"/bin/sh", "-c", shell_text_};
    out.has_separator = true;
    return out;
  }

  void apply_holds() {
    if (!min_hold_text_.empty()) args_.min_hold = duration_flag("--min-hold", min_hold_text_);
    if (!max_hold_text_.empty()) {
      args_.max_hold = duration_flag("--max-hold", max_hold_text_);
      if (args_.max_hold->count() <= 0) {
        throw failure(exit_usage, "run: --max-hold must be more than 0");
      }
    }
    if (args_.min_hold && args_.max_hold && *args_.min_hold > *args_.max_hold) {
      throw failure(exit_usage, std::string("run: --min-hold (")
                                    .append(min_hold_text_)
                                    .append(") must not exceed --max-hold (")
                                    .append(max_hold_text_)
                                    .append(")"));
    }
  }

  holding_flags flags_;
  run_args args_;
  std::string min_hold_text_, max_hold_text_, shell_text_;
  CLI::Option* shell_ = nullptr;
};

}  // namespace

std::unique_ptr<subcommand> add_run_command(CLI::App& app) {
  return std::make_unique<run_command>(app);
}

}  // namespace dlock::cli
