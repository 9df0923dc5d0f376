#include "worker_pool.hpp"

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

worker_pool::worker_pool(worker_pool_options o) : o_(std::move(o)) {}

worker_pool::~worker_pool() {
  for (auto& w : workers_) {
    w.process.reset();  // SIGKILL and reap
    if (w.pidfd >= 0) ::close(w.pidfd);
  }
}

void worker_pool::start_workers() {
  workers_.resize(static_cast<std::size_t>(o_.workers));
  for (int i = 0; i < o_.workers; ++i)
    spawn(i);
}

void worker_pool::spawn(int slot) {
  auto& w = workers_.at(static_cast<std::size_t>(slot));
  w.id = to_string(next_id_++);
  w.log = o_.dir + "/w" + w.id + ".log";
  logs_.push_back(w.log);
  const auto ms = [](std::chrono::milliseconds d) { return to_string(d.count()); };
  const std::vector<std::string> args = {o_.worker_program,
                                         "--id",
                                         w.id,
                                         "--topology",
                                         o_.topology,
                                         "--lock-url",
                                         o_.lock_url,
                                         "--resource-port",
                                         to_string(o_.resource_port),
                                         "--replicas",
                                         to_string(o_.replicas),
                                         "--kinds",
                                         o_.kinds,
                                         "--permits",
                                         to_string(o_.permits),
                                         "--fair-waiter-lease-ms",
                                         ms(o_.fair_waiter_lease),
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

void worker_pool::reap(worker_slot& w) {
  w.process.reset();
  if (w.pidfd >= 0) ::close(w.pidfd);
  w.pidfd = -1;
}

bool worker_pool::wait_until(std::chrono::steady_clock::time_point deadline) {
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

worker_pool::victim worker_pool::pick_victim(std::mt19937_64& rng,
                                             std::chrono::milliseconds patience) {
  const auto deadline = std::chrono::steady_clock::now() + patience;
  std::vector<int> holders, others;
  std::vector<std::string> held(workers_.size()), held_kind(workers_.size());
  for (;;) {
    holders.clear();
    others.clear();
    for (std::size_t i = 0; i < workers_.size(); ++i) {
      // Granted, or past its read and into its work: well before its release, which could
      // otherwise already have reached the server when the fault lands.
      const auto line = last_line(workers_[i].log);
      const auto f = split_fields(line);
      if (!f.empty() && (f[0] == "G" || (f[0] == "O" && f.size() > 5 && f[5] == "r"))) {
        holders.push_back(static_cast<int>(i));
        held[i] = std::string(f[3]);
        held_kind[i] = f[0] == "G" && f.size() > 7 ? std::string(f[7]) : std::string{};
      } else if (f.empty() || f[0] != "V" || f.size() < 6 || f[5] != "semaphore") {
        // Not between a plain semaphore's valid() check and its release's line: killed there,
        // nobody could tell whether its permits went back (worker.cpp).
        others.push_back(static_cast<int>(i));
      }
    }
    // Nobody may hold a lock for a moment (everyone waiting out a fault): look again shortly.
    if (!holders.empty() || std::chrono::steady_clock::now() >= deadline ||
        !wait_until(std::chrono::steady_clock::now() + 2ms)) {
      break;
    }
  }
  const bool holder = !holders.empty();
  const auto& from = holder ? holders : others;
  const int slot =
      from.empty() ? 0 : from[std::uniform_int_distribution<std::size_t>(0, from.size() - 1)(rng)];
  const auto s = static_cast<std::size_t>(slot);
  return {slot, workers_[s].id, holder, holder ? held[s] : std::string{},
          holder ? held_kind[s] : std::string{}};
}

std::string worker_pool::kill_and_respawn(int slot) {
  auto& w = workers_.at(static_cast<std::size_t>(slot));
  reap(w);  // the process's destructor SIGKILLs it, and waits for it
  auto last = last_line(w.log);
  spawn(slot);
  return last;
}

void worker_pool::signal(int slot, int sig) {
  workers_.at(static_cast<std::size_t>(slot)).process->signal(sig);
}

void worker_pool::stop_workers(std::chrono::milliseconds grace) {
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
