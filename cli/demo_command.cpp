// dlock demo: a tour on a private redis-server (or valkey-server), in under a minute.
//
// Every process the tour starts runs in a process group of its own that the tour kills at the
// end, or when it is interrupted; the server dies with the tour (PR_SET_PDEATHSIG) whatever
// happens. Nothing is left behind.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <thread>

#include <CLI/CLI.hpp>

#include "cli.hpp"
#include "dlock/dlock.hpp"
#include "embedded/process.hpp"
#include "embedded/redis_server.hpp"

namespace dlock::cli {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
using embedded::child_process;
using embedded::spawn_options;

// Process groups to kill if the tour is interrupted. A fixed array: the signal handler may only
// read it.
std::atomic<pid_t> groups[16];

void remember_group(pid_t leader) {
  for (auto& g : groups) {
    pid_t empty = 0;
    if (g.compare_exchange_strong(empty, leader)) return;
  }
}

extern "C" void on_interrupt(int sig) {
  for (auto& g : groups) {
    if (const pid_t p = g.load(); p > 0) ::kill(-p, SIGKILL);
  }
  // The default action now ends the tour; the kernel then kills the server.
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void heading(int n, const std::string& title) {
  std::cout << "\n" << n << ". " << title << "\n" << std::flush;
}

void say(const std::string& line) {
  std::cout << "   " << line << "\n" << std::flush;
}

double seconds(steady::duration d) {
  return std::chrono::duration<double>(d).count();
}

std::string fmt(double v, const char* spec = "%.1f") {
  char buf[32];
  std::snprintf(buf, sizeof buf, spec, v);
  return buf;
}

// A `dlock run` of the tour, in its own process group.
child_process start_run(const std::string& self, const std::string& url,
                        std::vector<std::string> run_args, bool capture) {
  std::vector<std::string> argv = {self, "--url", url, "run"};
  argv.insert(argv.end(), run_args.begin(), run_args.end());
  child_process p(argv, spawn_options{.capture_stdout = capture, .new_process_group = true});
  remember_group(p.pid());
  return p;
}

void contention(const std::string& self, const std::string& url, const std::string& dir) {
  heading(1, "Five processes contend for one lock through `dlock run`");
  const std::string file = dir + "/counter";
  std::ofstream(file) << "0\n";
  say("each runs: dlock run demo:counter -- sh -c 'read n < counter; sleep 0.2; echo $((n+1)) > "
      "counter'");
  say("a read-modify-write with a pause in the middle: only the lock keeps updates from being "
      "lost");
  std::vector<child_process> runs;
  const auto start = steady::now();
  for (int i = 1; i <= 5; ++i) {
    runs.push_back(start_run(
        self, url,
        {"demo:counter", "--", "sh", "-c",
         "read n < \"$1\"; sleep 0.2; echo $((n+1)) > \"$1\"; "
         "echo \"   run $2: held the lock with fencing token $DLOCK_FENCE, counter now $((n+1))\"",
         "sh", file, std::to_string(i)},
        false));
  }
  for (auto& r : runs) {
    if (r.wait(60s) != 0) throw failure(exit_software, "a contending run failed");
  }
  std::string value;
  std::ifstream(file) >> value;
  say("counter = " + value + " after 5 runs in " + fmt(seconds(steady::now() - start)) +
      " s: one at a time, each with a larger fencing token");
}

void crash(const std::string& self, const std::string& url, const dlock::client& c) {
  heading(2, "A holder is killed with SIGKILL: the lock comes back when its lease runs out");
  say("$ dlock run --ttl 2s demo:crash -- sleep 60      (the watchdog renews the 2 s lease)");
  auto holder = start_run(
      self, url, {"--ttl", "2s", "demo:crash", "--", "sh", "-c", "echo held; exec sleep 60"}, true);
  if (!holder.wait_for("held", 30s)) throw failure(exit_software, "the holder never started");
  const auto info = c.reentrant("demo:crash").info();
  say("held by " + (info.holders.empty() ? std::string("?") : info.holders[0].owner) +
      ", fencing token " + std::to_string(info.fence));
  holder.signal(SIGKILL, true);  // dlock and its command, as if the machine died
  holder.wait();
  const auto killed = steady::now();
  say("kill -9: no release, no more renewals; the lease is the safety net");
  say("$ dlock run --wait 10s demo:crash -- echo ...");
  auto next = start_run(self, url,
                        {"--wait", "10s", "demo:crash", "--", "sh", "-c",
                         "echo \"   acquired, fencing token $DLOCK_FENCE\""},
                        false);
  if (next.wait(30s) != 0) throw failure(exit_software, "the lock did not come back");
  say("came back " + fmt(seconds(steady::now() - killed)) +
      " s after the kill, when the lease ran out (not before, and without polling)");
}

void pause_and_fence(const std::string& self, const std::string& url, const dlock::client& c) {
  heading(3, "A paused holder loses its lease, and its late write is fenced off");
  child_process holder({self, "_demo-holder", url, "demo:paused", "demo:resource"},
                       spawn_options{.capture_stdout = true, .new_process_group = true});
  remember_group(holder.pid());
  const auto wrote = holder.wait_for("wrote", 30s);
  if (!wrote) throw failure(exit_software, "the demo holder never started");
  say("holder: " + *wrote);
  holder.signal(SIGSTOP);
  say("holder paused with SIGSTOP (a long GC pause, a VM migration...) past its 1 s lease");
  auto l = c.reentrant("demo:paused").try_acquire_for(20s);
  if (!l) throw failure(exit_software, "the paused holder's lease did not run out");
  const auto write = fenced_set(c, "demo:resource", "written by the new holder", l.fence());
  say("another client took the lock (fencing token " + std::to_string(l.fence()) +
      ") and wrote: " + (write.written ? "accepted" : "rejected"));
  holder.signal(SIGCONT);
  say("holder resumed:");
  for (const char* prefix : {"lost", "fenced"}) {
    if (auto line = holder.wait_for(prefix, 30s)) say("holder: " + *line);
  }
  holder.wait(30s);
  say("resource = \"" + c.redis().command({"GET", "demo:resource"}).str() +
      "\": the stale holder's write never landed");
}

// The paused holder of the tour, run as a separate process (`dlock _demo-holder`).
int demo_holder(const std::string& url, const std::string& name, const std::string& resource) {
  auto o = client_options::from_url(url);
  o.watchdog_lease = 1s;
  o.watchdog_period = 300ms;
  dlock::client c(o);
  auto l = c.reentrant(name).acquire();
  std::atomic<bool> lost{false};
  std::stop_callback on_stop(l.stop_token(), [&] {
    lost = true;
    lost.notify_all();
  });
  const auto first = fenced_set(c, resource, "written by the first holder", l.fence());
  std::cout << "wrote with fencing token " << l.fence() << ": "
            << (first.written ? "accepted" : "rejected") << std::endl;
  lost.wait(false);
  std::cout << "lost the lease ("
            << (l.lost_reason() == lease_lost_reason::expired ? "it expired" : "it was taken")
            << "): the stop_token fired; valid() = " << (l.valid() ? "true" : "false") << std::endl;
  const auto late = fenced_set(c, resource, "stale write", l.fence());
  std::cout << "fenced write with the old token " << l.fence() << ": "
            << (late.written ? "ACCEPTED (bug!)"
                             : "rejected, newest token is " + std::to_string(late.highest))
            << std::endl;
  return exit_ok;
}

int demo(const std::string& self) {
  if (!embedded::server_available()) {
    throw failure(exit_unavailable,
                  "the tour needs redis-server or valkey-server; install one (Debian: apt-get "
                  "install redis-server)");
  }
  for (int sig : {SIGINT, SIGTERM, SIGHUP})
    ::signal(sig, on_interrupt);
  const auto started = steady::now();
  std::cout << "dlock " << dlock::version << " tour\n";
  embedded::redis_server server;
  std::cout << "private " << embedded::default_programs().server
            << " on 127.0.0.1:" << server.port() << " in " << server.dir()
            << " (stopped at the end)\n";
  const dlock::client c(server.url());

  contention(self, server.url(), server.dir());
  crash(self, server.url(), c);
  pause_and_fence(self, server.url(), c);

  heading(4, "Next");
  say("dlock bench     lock throughput, latency and hand-off beside redis-benchmark");
  say("dlock market    Redis in Action's marketplace: WATCH vs coarse vs fine-grained locks");
  say("dlock --help    run, status, ls, unlock");
  std::cout << "\ntour finished in " << fmt(seconds(steady::now() - started)) << " s\n";
  for (auto& g : groups) {
    if (const pid_t p = g.exchange(0); p > 0) ::kill(-p, SIGKILL);
  }
  return exit_ok;
}

class demo_command final : public subcommand {
 public:
  explicit demo_command(CLI::App& app)
      : subcommand(
            app.add_subcommand("demo", "A tour on a private redis-server (under a minute)")) {}
  int run(const invocation& in) override { return demo(in.self); }
};

// Hidden: the tour starts it.
class demo_holder_command final : public subcommand {
 public:
  explicit demo_holder_command(CLI::App& app) : subcommand(app.add_subcommand("_demo-holder", "")) {
    app_->group("");
    app_->add_option("url", url_)->required();
    app_->add_option("name", name_)->required();
    app_->add_option("resource", resource_)->required();
  }
  int run(const invocation&) override { return demo_holder(url_, name_, resource_); }

 private:
  std::string url_, name_, resource_;
};

}  // namespace

std::unique_ptr<subcommand> add_demo_command(CLI::App& app) {
  return std::make_unique<demo_command>(app);
}

std::unique_ptr<subcommand> add_demo_holder_command(CLI::App& app) {
  return std::make_unique<demo_holder_command>(app);
}

}  // namespace dlock::cli
