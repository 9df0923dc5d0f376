// dlock_torture: the torture harness's controller. It checks dlock's safety promises (no stale
// write accepted by a fenced resource, no lost lease left unsignalled, no two holds in conflict
// where the deployment promises none and none unsignalled where it allows them; with --writes
// held, no write under a lease landing once the lease no longer held its lock) while a nemesis
// breaks things, and reports what it saw.
//
//   dlock_torture [--topology standalone|sentinel|cluster|redlock] [--replicas N]
//                 [--kinds LIST] [--permits N] [--seconds N] [--workers N] [--names N]
//                 [--min-grants N] [--seed N] [--json] [--faults LIST] [--lease-ms N]
//                 [--fault-gap MIN,MAX] [--dir PATH] [--keep] [--appendfsync always|everysec]
//                 [--long-work-ppm N] [--worker PATH] [--writes fenced|held]
//
// It starts the deployment (deployment.hpp: one server behind the fault proxy, a Sentinel set,
// a cluster, or five RedLock masters behind a proxy each), a resource redis-server (healthy,
// never faulted), then W worker processes (worker.cpp) that take the lock names, each of its
// kind, with short watchdog leases, and under each exclusive hold do a fenced read and a fenced
// write (read + 1) on the resource server, whose scripts number every op. While they run, the
// nemesis (nemesis.hpp) injects one fault at a time, each kind the deployment can suffer once per
// shuffled round (--faults picks some; "all" by default). With --writes held the resource lives
// on the lock server instead, beside the locks, and the workers' ops go through
// lease::write_while_held (no fences). Workers that die are respawned. At the end the workers are
// stopped, and the checker (checker.hpp states the definitions) reads every log and prints the
// report; report.hpp says when a run fails.
//
// Exit status: 0 pass; 1 if the verdict found a failure; 2 if the harness itself failed (or was
// given options that do not go together); 77 without redis-server (or redis-sentinel,
// redis-cli for the topologies that need them); 130 if interrupted. Every process it started
// is stopped by PID in all cases (and dies with it through PR_SET_PDEATHSIG). Logs stay in the
// run directory when the run fails or with --keep. tests/torture/README.md has the long runs.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <random>

#include "checker.hpp"
#include "deployment.hpp"
#include "dlock/dlock.hpp"
#include "embedded/redis_cluster.hpp"
#include "embedded/redis_sentinel_set.hpp"
#include "event_log.hpp"
#include "lock_client_options.hpp"
#include "nemesis.hpp"
#include "report.hpp"
#include "worker_pool.hpp"

namespace dlock::torture {
namespace {

using namespace std::chrono_literals;

struct options {
  std::string topology = "standalone";
  int replicas = 0;
  std::string kinds = "reentrant,simple";
  int permits = 2;
  double seconds = 120;
  int workers = 8;
  int names = 4;
  std::uint64_t min_grants = 1;
  std::uint64_t seed = 0;
  bool json = false;
  std::string faults = "all";
  int lease_ms = 1000;
  std::vector<int> fault_gap = {1000, 3000};
  std::string dir;
  bool keep = false;
  std::string appendfsync = "always";
  int long_work_ppm = 100;
  std::string worker_program;
  std::string writes = "fenced";
};

std::string default_worker_program() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (self.parent_path() / "dlock_torture_worker").string();
}

std::string make_run_dir(const std::string& wanted) {
  if (!wanted.empty()) {
    // The logs are appended to: another run's would be read as this one's.
    std::filesystem::create_directories(wanted);
    if (!std::filesystem::is_empty(wanted)) {
      throw std::invalid_argument("--dir " + wanted + " is not empty");
    }
    return wanted;
  }
  char tmpl[] = "/tmp/dlock-torture-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("cannot create a run directory");
  return tmpl;
}

int run_in(const options& o, const std::string& dir);

const std::vector<std::string> known_kinds = {
    "reentrant", "simple", "fair", "read-write", "semaphore", "leased-semaphore", "multi", "latch"};

// The fault kinds to inject, out of those the deployment can suffer. Held writes keep the
// resource on the lock server, so a restart with the data gone loses the resource too: every
// check of its values would then fail for a reason that is no bug of the lock (docs/safety.md,
// 2a, states the assumption). A plain semaphore's count has no owner to tell when it is lost
// with the data. "all" leaves that fault out for them, and naming it is refused.
std::vector<fault_kind> faults_for(const options& o, const std::vector<fault_kind>& available) {
  auto kinds = parse_faults(o.faults, available);
  const auto kinds_named = split_commas(o.kinds);
  const bool plain_semaphore =
      std::find(kinds_named.begin(), kinds_named.end(), "semaphore") != kinds_named.end();
  if (o.writes != "held" && !plain_semaphore) return kinds;
  const auto empty = std::find(kinds.begin(), kinds.end(), fault_kind::restart_empty);
  if (empty == kinds.end()) return kinds;
  if (o.faults != "all") {
    throw std::invalid_argument(
        "restart-empty loses what --writes held or a plain semaphore keeps on the lock server: "
        "leave that fault out");
  }
  kinds.erase(empty);
  return kinds;
}

// Options that do not go together, refused before anything starts.
void check_options(const options& o) {
  for (const auto& k : split_commas(o.kinds)) {
    if (std::find(known_kinds.begin(), known_kinds.end(), k) == known_kinds.end()) {
      throw std::invalid_argument("unknown kind '" + k + "'");
    }
    if (o.topology == "redlock" && k != "reentrant" && k != "simple") {
      throw std::invalid_argument("RedLock takes reentrant and simple locks only, not '" + k + "'");
    }
  }
  if (split_commas(o.kinds).empty()) throw std::invalid_argument("--kinds is empty");
  if (o.topology == "redlock" && o.writes == "held") {
    throw std::invalid_argument("--writes held needs one lock server; RedLock has five");
  }
  if ((o.topology == "standalone" || o.topology == "redlock") && o.replicas != 0) {
    throw std::invalid_argument("--replicas is for sentinel and cluster");
  }
}

int run_in(const options& o, const std::string& dir);

int run(const options& o) {
  if (!embedded::server_available() ||
      (o.topology == "sentinel" && !embedded::sentinel_available()) ||
      (o.topology == "cluster" && !embedded::cluster_available())) {
    std::fprintf(stderr,
                 "dlock_torture: redis-server (or redis-sentinel, redis-cli) not found; "
                 "skipped\n");
    return 77;
  }
  install_interrupt_handlers();
  const auto dir = make_run_dir(o.dir);
  try {
    return run_in(o, dir);
  } catch (...) {
    std::fprintf(stderr, "dlock_torture: the harness failed; logs so far in %s\n", dir.c_str());
    throw;
  }
}

int run_in(const options& o, const std::string& dir) {
  const auto seed = o.seed != 0 ? o.seed : std::random_device{}();
  const auto lease = std::chrono::milliseconds(o.lease_ms);
  const auto command_timeout = std::max(1ms, lease * 3 / 10);
  const auto recheck = std::max(1ms, lease / 5);
  const auto fair_waiter_lease = std::max(30ms, lease);
  std::vector<std::string> names;
  for (int i = 0; i < o.names; ++i)
    names.push_back("torture-" + std::to_string(i));

  check_report report;
  run_info info;
  bool completed = false;
  {
    const auto d = make_deployment(
        {.topology = o.topology, .appendfsync = o.appendfsync, .lease = lease, .lock_names = names},
        o.replicas);
    const auto faults = faults_for(o, topology_faults(o.topology));
    std::vector<fault_kind> two_masters;
    std::vector<std::string> write_losing_faults, two_master_faults;
    for (const auto k : d->two_master_faults()) {
      if (std::find(faults.begin(), faults.end(), k) == faults.end()) continue;
      two_masters.push_back(k);
      two_master_faults.emplace_back(fault_name(k));
    }
    for (const auto k : faults) {
      if (d->may_lose_writes(k)) write_losing_faults.emplace_back(fault_name(k));
    }
    std::optional<embedded::redis_server> resource;
    if (o.writes != "held") resource.emplace();
    info = {
        .topology = o.topology,
        .deployment = d->describe(),
        .kinds = o.kinds,
        .replicas = o.replicas,
        .may_grant_twice = d->may_grant_twice(faults),
        // The older holder hears of it at its next renewal: a watchdog period, plus a
        // reconnection to the new master (connect and command timeouts, the reconnect backoff).
        .conflict_bound_ms = static_cast<double>((lease / 3 + command_timeout * 2 + 250ms).count()),
        .two_master_faults = two_masters,
        // A dead waiter's place lapses, and the next waiter re-checks.
        .fair_handoff_bound_ms =
            static_cast<double>((fair_waiter_lease + recheck + command_timeout).count()),
        .seed = seed,
        .workers = o.workers,
        .names = o.names,
        .faults = faults,
        .writes = o.writes,
        .min_grants = o.min_grants,
        .lease_ms = o.lease_ms,
        .dir = dir};
    worker_pool pool(
        {.dir = dir,
         .worker_program = o.worker_program.empty() ? default_worker_program() : o.worker_program,
         .topology = o.topology,
         .lock_url = d->lock_url(),
         .resource_port = resource ? resource->port() : std::uint16_t{0},
         .replicas = o.replicas,
         .kinds = o.kinds,
         .permits = o.permits,
         .workers = o.workers,
         .names = o.names,
         .seed = seed,
         .lease = lease,
         .recheck = recheck,
         .command_timeout = command_timeout,
         .connect_timeout = command_timeout,
         .wait = lease * 2,
         .fair_waiter_lease = fair_waiter_lease,
         .long_work_ppm = o.long_work_ppm,
         .writes = o.writes});
    // The controller's own client, for what an operator would do: give back a plain
    // semaphore's permits that a killed holder took with it.
    std::optional<client> repairs;
    nemesis n(pool, *d,
              {.kinds = faults,
               .lease = lease,
               .gap_min = std::chrono::milliseconds(o.fault_gap.at(0)),
               .gap_max = std::chrono::milliseconds(o.fault_gap.at(1)),
               .seed = seed,
               .log_path = dir + "/nemesis.log",
               .return_permits = [&](const std::string& name) {
                 if (!repairs) {
                   repairs.emplace(lock_client_options(o.topology, d->lock_url(), 5s, 5s));
                 }
                 repairs->semaphore(name).release(1);
               }});
    pool.start_workers();
    const auto t_start = now_ns();
    completed = n.run_until(std::chrono::steady_clock::now() +
                            std::chrono::milliseconds(static_cast<std::int64_t>(o.seconds * 1e3)));
    d->heal();
    const auto t_end = now_ns();
    pool.stop_workers(5s);
    repairs.reset();
    info.unexpected_worker_exits = pool.unexpected_exits();
    info.proxy = d->proxies();
    report = check({.worker_logs = pool.worker_logs(),
                    .nemesis_log = dir + "/nemesis.log",
                    .t_start = t_start,
                    .t_end = t_end,
                    .permits = o.permits,
                    .excerpt_ns = lease.count() * 2'000'000,
                    .write_losing_faults = write_losing_faults,
                    // A client leaves a replaced master when it hears of the switch, or at its
                    // next master check (sentinel_options::master_check_period, 1 s).
                    .two_master_faults = two_master_faults,
                    .two_master_ns = (1000ms + command_timeout * 2 + 250ms).count() * 1'000'000,
                    // A lost message is made up for by the next re-check; then a round trip.
                    .latch_release_bound_ns = (recheck + 300ms).count() * 1'000'000});
    if (resource) resource->kill();
  }  // every process stopped here
  const auto failures = verdict(report, info);
  const bool keep = o.keep || !o.dir.empty() || !failures.empty() || !completed;
  if (!keep) info.dir.clear();
  std::cout << (o.json ? json_report(report, info, failures) : text_report(report, info, failures));
  std::cout.flush();
  if (!keep) std::filesystem::remove_all(dir);
  if (!completed) return 130;
  return failures.empty() ? 0 : 1;
}

}  // namespace
}  // namespace dlock::torture

int main(int argc, char** argv) {
  dlock::torture::options o;
  CLI::App app{"dlock's torture harness: locks under faults, and a checker of its promises"};
  app.add_option("--seconds", o.seconds, "how long the workload and the nemesis run")
      ->capture_default_str();
  app.add_option("--workers", o.workers, "worker processes")->capture_default_str();
  app.add_option("--names", o.names, "lock names (even ones reentrant, odd ones simple)")
      ->capture_default_str();
  app.add_option("--min-grants", o.min_grants, "fail with fewer grants")->capture_default_str();
  app.add_option("--seed", o.seed, "random seed (0: a random one, printed in the report)");
  app.add_flag("--json", o.json, "print the report as JSON");
  app.add_option("--faults", o.faults,
                 "comma-separated fault kinds, 'all' or 'none': kill, stop, restart-persistent, "
                 "restart-empty, debug-sleep, client-kill, client-pause, proxy-latency, "
                 "proxy-stall, proxy-half-open, proxy-reset")
      ->capture_default_str();
  app.add_option("--lease-ms", o.lease_ms, "the workers' watchdog lease; faults scale with it")
      ->capture_default_str()
      ->check(CLI::Range(50, 60'000));
  app.add_option("--fault-gap", o.fault_gap, "MIN,MAX ms between faults")
      ->delimiter(',')
      ->expected(2)
      ->capture_default_str();
  app.add_option("--dir", o.dir, "keep the logs in this directory");
  app.add_flag("--keep", o.keep, "keep the logs even when the run passes");
  app.add_option("--appendfsync", o.appendfsync, "the lock server's AOF fsync policy")
      ->check(CLI::IsMember({"always", "everysec"}))
      ->capture_default_str();
  app.add_option("--long-work-ppm", o.long_work_ppm,
                 "critical sections per million that work 0.1-1.5 s instead of 0-2 ms")
      ->capture_default_str();
  app.add_option("--worker", o.worker_program, "the worker program (default: beside this one)");
  app.add_option("--writes", o.writes,
                 "fenced: the resource on its own server, fenced ops; held: on the lock server, "
                 "ops through lease::write_while_held (restart-empty left out)")
      ->check(CLI::IsMember({"fenced", "held"}))
      ->capture_default_str();
  app.add_option("--topology", o.topology, "what the locks live on")
      ->check(CLI::IsMember({"standalone", "sentinel", "cluster", "redlock"}))
      ->capture_default_str();
  app.add_option("--replicas", o.replicas,
                 "sentinel, cluster: replicas that must acknowledge each grant and renewal "
                 "(client_options::min_replica_acks)")
      ->capture_default_str()
      ->check(CLI::Range(0, 2));
  app.add_option("--kinds", o.kinds,
                 "the names' kinds, name i of kind i mod the list: reentrant, simple, fair, "
                 "read-write, semaphore, leased-semaphore, multi, latch")
      ->capture_default_str();
  app.add_option("--permits", o.permits, "each semaphore's permits (a latch counts from it + 1)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  CLI11_PARSE(app, argc, argv);
  if (o.workers < 1 || o.names < 1 || o.fault_gap.size() != 2 || o.fault_gap[0] < 0 ||
      o.fault_gap[1] < o.fault_gap[0]) {
    std::fprintf(stderr, "dlock_torture: bad --workers, --names or --fault-gap\n");
    return 2;
  }
  try {
    dlock::torture::check_options(o);
    dlock::torture::faults_for(o, dlock::torture::topology_faults(o.topology));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock_torture: %s\n", e.what());
    return 2;
  }
  try {
    return dlock::torture::run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock_torture: %s\n", e.what());
    return 2;
  }
}
