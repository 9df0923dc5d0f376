#include "cluster.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <system_error>

#include "event_log.hpp"

namespace dlock::torture {
namespace {

using namespace std::chrono_literals;
using std::to_string;

int interrupt_pipe[2] = {-1, -1};
volatile sig_atomic_t interrupt_seen = 0;

void on_interrupt(int) {
  interrupt_seen = 1;
  const char byte = 1;
  [[maybe_unused]] auto n = ::write(interrupt_pipe[1], &byte, 1);
}

// A pidfd turns "a worker exited" into something poll() can wait for beside the interrupt pipe.
int open_pidfd(pid_t pid) {
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "pidfd_open");
  return fd;
}

int millis_until(std::chrono::steady_clock::time_point deadline) {
  const auto left =
      std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return static_cast<int>(std::clamp<std::int64_t>(left.count(), 0, 60'000));
}

}  // namespace

void install_interrupt_handlers() {
  if (::pipe2(interrupt_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw std::system_error(errno, std::generic_category(), "pipe2");
  }
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  for (int sig : {SIGINT, SIGTERM, SIGHUP})
    ::sigaction(sig, &sa, nullptr);
  // A proxy or admin write to a closed socket must be an error code, not the end of the run.
  ::signal(SIGPIPE, SIG_IGN);
}

bool interrupted() noexcept {
  return interrupt_seen != 0;
}

cluster::cluster(cluster_options o) : o_(std::move(o)) {
  if (o_.writes != "held") resource_ = std::make_unique<embedded::redis_server>();
  embedded::server_options lock_options;
  lock_options.extra_args = {"--appendonly",           "yes", "--appendfsync", o_.appendfsync,
                             "--enable-debug-command", "yes"};
  lock_ = std::make_unique<embedded::redis_server>(lock_options);
  proxy_ = std::make_unique<fault_proxy>(lock_->port());
  connection_options admin;
  admin.port = lock_->port();
  admin.client_name = "torture-admin";
  admin.connect_timeout = 5s;
  admin.command_timeout = 20s;
  admin_ = std::make_unique<redis_client>(admin);
}

cluster::~cluster() {
  for (auto& w : workers_) {
    w.process.reset();  // SIGKILL and reap
    if (w.pidfd >= 0) ::close(w.pidfd);
  }
  workers_.clear();
  admin_.reset();
  proxy_.reset();
  // Crashes, not shutdowns: nothing of their data is needed, and a server in DEBUG SLEEP or
  // CLIENT PAUSE would only delay a SIGTERM.
  lock_->kill();
  if (resource_) resource_->kill();
}

void cluster::start_workers() {
  workers_.resize(static_cast<std::size_t>(o_.workers));
  for (int i = 0; i < o_.workers; ++i)
    spawn(i);
}

void cluster::spawn(int slot) {
  auto& w = workers_.at(static_cast<std::size_t>(slot));
  w.id = to_string(next_id_++);
  w.log = o_.dir + "/w" + w.id + ".log";
  logs_.push_back(w.log);
  const auto ms = [](std::chrono::milliseconds d) { return to_string(d.count()); };
  const std::vector<std::string> args = {o_.worker_program,
                                         "--id",
                                         w.id,
                                         "--lock-port",
                                         to_string(proxy_->port()),
                                         "--resource-port",
                                         to_string(resource_ ? resource_->port() : 0),
                                         "--names",
                                         to_string(o_.names),
                                         "--log",
                                         w.log,
                                         "--seed",
                                         to_string(o_.seed * 1'000'003 + std::stoull(w.id)),
                                         "--lease-ms",
                                         ms(o_.lease),
                                         "--recheck-ms",
                                         ms(o_.recheck),
                                         "--command-timeout-ms",
                                         ms(o_.command_timeout),
                                         "--connect-timeout-ms",
                                         ms(o_.connect_timeout),
                                         "--wait-ms",
                                         ms(o_.wait),
                                         "--long-work-ppm",
                                         to_string(o_.long_work_ppm),
                                         "--writes",
                                         o_.writes};
  w.process = std::make_unique<embedded::child_process>(args);
  w.pidfd = open_pidfd(w.process->pid());
}

void cluster::reap(worker_slot& w) {
  w.process.reset();
  if (w.pidfd >= 0) ::close(w.pidfd);
  w.pidfd = -1;
}

bool cluster::wait_until(std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    if (interrupted()) return false;
    if (std::chrono::steady_clock::now() >= deadline) return true;
    std::vector<pollfd> fds = {{interrupt_pipe[0], POLLIN, 0}};
    for (const auto& w : workers_)
      fds.push_back({w.pidfd, POLLIN, 0});
    const int ready = ::poll(fds.data(), fds.size(), millis_until(deadline));
    if (ready < 0 && errno != EINTR)
      throw std::system_error(errno, std::generic_category(), "poll");
    for (std::size_t i = 1; ready > 0 && i < fds.size(); ++i) {
      if ((fds[i].revents & POLLIN) == 0) continue;
      // Nobody asked this worker to go: it crashed or gave up. Keep W running and count it.
      ++unexpected_exits_;
      reap(workers_[i - 1]);
      spawn(static_cast<int>(i - 1));
    }
  }
}

cluster::victim cluster::pick_victim(std::mt19937_64& rng, std::chrono::milliseconds patience) {
  const auto deadline = std::chrono::steady_clock::now() + patience;
  std::vector<int> holders;
  for (;;) {
    for (std::size_t i = 0; i < workers_.size(); ++i) {
      // Granted, or past its read and into its work: well before its release, which could
      // otherwise already have reached the server when the fault lands.
      const auto line = last_line(workers_[i].log);
      const auto f = split_fields(line);
      if (!f.empty() && (f[0] == "G" || (f[0] == "O" && f.size() > 5 && f[5] == "r"))) {
        holders.push_back(static_cast<int>(i));
      }
    }
    // Nobody may hold a lock for a moment (everyone waiting out a fault): look again shortly.
    if (!holders.empty() || std::chrono::steady_clock::now() >= deadline ||
        !wait_until(std::chrono::steady_clock::now() + 2ms)) {
      break;
    }
  }
  const bool holder = !holders.empty();
  int slot = 0;
  if (holder) {
    slot = holders[std::uniform_int_distribution<std::size_t>(0, holders.size() - 1)(rng)];
  } else {
    slot = std::uniform_int_distribution<int>(0, static_cast<int>(workers_.size()) - 1)(rng);
  }
  return {slot, workers_[static_cast<std::size_t>(slot)].id, holder};
}

void cluster::kill_and_respawn(int slot) {
  reap(workers_.at(static_cast<std::size_t>(slot)));  // the process's destructor SIGKILLs it
  spawn(slot);
}

void cluster::signal(int slot, int sig) {
  workers_.at(static_cast<std::size_t>(slot)).process->signal(sig);
}

void cluster::stop_workers(std::chrono::milliseconds grace) {
  for (auto& w : workers_) {
    if (!w.process) continue;
    w.process->signal(SIGCONT);
    w.process->signal(SIGTERM);
  }
  const auto deadline = std::chrono::steady_clock::now() + grace;
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<worker_slot*> who;
    for (auto& w : workers_) {
      if (w.pidfd < 0) continue;
      fds.push_back({w.pidfd, POLLIN, 0});
      who.push_back(&w);
    }
    if (fds.empty()) break;
    const int wait_ms = millis_until(deadline);
    const int ready = ::poll(fds.data(), fds.size(), wait_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) break;  // the grace is over: the rest are SIGKILLed
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents & POLLIN) reap(*who[i]);
    }
  }
  for (auto& w : workers_)
    reap(w);
}

}  // namespace dlock::torture
