// dlock_torture_worker: one worker process of the torture harness (torture_main.cpp starts,
// kills, pauses and respawns them). It takes locks on the deployment (deployment.hpp) and, under
// each exclusive hold, does a read-modify-write of a resource, logging every event to its own
// file (event_log.hpp describes the lines). Name i is of kind i mod the --kinds list: reentrant,
// simple, fair, read-write (a third of the holds write), semaphore and leased-semaphore (one of
// --permits permits per hold; no resource ops: holders share), multi (seven holds in ten take
// the name and NAME-m together, the rest one of them alone as a reentrant lock), latch (a
// countdown latch of --permits + 1: re-armed by whoever finds it at 0, after a pause; otherwise
// counted down or waited on, half and half). With
// `--writes fenced` (the default) the resource is on the resource server and each op is fenced;
// with `--writes held` it is on the lock server itself, next to the lock, and each op is a
// `lease::write_while_held`, which the server runs only while the lease still holds the lock.
// It runs until SIGTERM (then it finishes the iteration, logs its client's stats and exits 0)
// or SIGKILL.
//
//   dlock_torture_worker --id N --topology T --lock-url URL --resource-port P --names N
//                        --log PATH (--resource-port may be 0 with --writes held)
//                        [--kinds LIST] [--permits N] [--replicas N] [--writes fenced|held]
//                        [--seed N] [--lease-ms N] [--recheck-ms N] [--command-timeout-ms N]
//                        [--connect-timeout-ms N] [--wait-ms N] [--fair-waiter-lease-ms N]
//                        [--long-work-ppm N]
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <future>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock_lua_scripts.hpp"  // tests/torture/scripts, embedded at build time
#include "event_log.hpp"
#include "lock_client_options.hpp"

namespace dlock::torture {
namespace {

using namespace std::chrono_literals;
using std::to_string;

volatile sig_atomic_t stop_requested = 0;

void on_sigterm(int) {
  stop_requested = 1;
}

struct settings {
  std::string id;
  std::string topology = "standalone";
  std::string lock_url;
  std::uint16_t resource_port = 0;
  std::vector<std::string> kinds;
  int permits = 2;
  int replicas = 0;
  std::chrono::milliseconds fair_waiter_lease{1000};
  int names = 4;
  std::string log;
  std::uint64_t seed = 1;
  std::chrono::milliseconds lease{1000}, recheck{200}, command_timeout{300}, connect_timeout{300},
      wait{2000};
  int long_work_ppm = 100;
  bool held_writes = false;  // --writes held
};

settings parse(int argc, char** argv) {
  std::map<std::string, std::string> kv;
  for (int i = 1; i + 1 < argc; i += 2)
    kv[argv[i]] = argv[i + 1];
  auto number = [&](const char* key, long fallback) {
    const auto it = kv.find(key);
    return it == kv.end() ? fallback : std::stol(it->second);
  };
  settings s;
  s.id = kv.count("--id") ? kv["--id"] : "0";
  s.topology = kv.count("--topology") ? kv["--topology"] : "standalone";
  s.lock_url = kv["--lock-url"];
  s.kinds = split_commas(kv.count("--kinds") ? kv["--kinds"] : "reentrant,simple");
  s.permits = static_cast<int>(number("--permits", 2));
  s.replicas = static_cast<int>(number("--replicas", 0));
  s.fair_waiter_lease = std::chrono::milliseconds(number("--fair-waiter-lease-ms", 1000));
  s.resource_port = static_cast<std::uint16_t>(number("--resource-port", 0));
  s.names = static_cast<int>(number("--names", 4));
  s.log = kv["--log"];
  s.seed = static_cast<std::uint64_t>(number("--seed", 1));
  s.lease = std::chrono::milliseconds(number("--lease-ms", 1000));
  s.recheck = std::chrono::milliseconds(number("--recheck-ms", 200));
  s.command_timeout = std::chrono::milliseconds(number("--command-timeout-ms", 300));
  s.connect_timeout = std::chrono::milliseconds(number("--connect-timeout-ms", 300));
  s.wait = std::chrono::milliseconds(number("--wait-ms", 2000));
  s.long_work_ppm = static_cast<int>(number("--long-work-ppm", 100));
  const std::string writes = kv.count("--writes") ? kv["--writes"] : "fenced";
  s.held_writes = writes == "held";
  if (s.lock_url.empty() || (s.resource_port == 0 && !s.held_writes) || s.log.empty() ||
      s.names < 1 || s.kinds.empty() || (writes != "fenced" && writes != "held")) {
    throw std::invalid_argument(
        "usage: dlock_torture_worker --id N --topology T --lock-url URL --resource-port P "
        "--names N --log PATH [--kinds LIST] [--writes fenced|held] [...]");
  }
  return s;
}

std::string code_name(const std::system_error& e) {
  if (e.code().category() == dlock::error_category()) return "dlock:" + to_string(e.code().value());
  return e.code().category().name() + std::string(":") + to_string(e.code().value());
}

const char* outcome_name(release_outcome o) {
  switch (o) {
    case release_outcome::released:
      return "released";
    case release_outcome::not_held:
      return "not_held";
    case release_outcome::unconfirmed:
      return "unconfirmed";
  }
  return "?";
}

struct op_result {
  std::int64_t seq = 0;
  bool accepted = false;
  std::string a, b;
};

// One grant the worker holds: a lease and what its lines say about it. A multi-lock's grant
// is one per name.
struct hold {
  lease l;
  std::string name;
  std::string gid;
};

class worker {
 public:
  explicit worker(settings s) : s_(std::move(s)), log_(s_.log), rng_(s_.seed) {
    for (int i = 0; i < s_.names; ++i)
      names_.push_back("torture-" + to_string(i));
  }

  int run() {
    log_.write({"S", s_.id, to_string(::getpid()), to_string(now_ns())});
    std::optional<redis_client> resource;  // held writes keep the resource on the lock server
    if (!s_.held_writes) {
      connection_options direct;
      direct.port = s_.resource_port;
      direct.client_name = "torture-worker-" + s_.id;
      resource.emplace(direct);
    }
    if (!connect()) return 0;
    while (!stop_requested)
      iteration(resource);
    const auto st = client_->stats();
    log_.write({"T", s_.id, to_string(now_ns()), to_string(st.grants), to_string(st.attempts),
                to_string(st.grants_born_dead), to_string(st.leases_lost),
                to_string(st.release_failures)});
    return 0;
  }

 private:
  const std::string& kind_of(std::size_t name_index) const {
    return s_.kinds[name_index % s_.kinds.size()];
  }

  // The deployment may be failing over, restarting or behind a refusing proxy when a worker
  // starts. A semaphore gets its permits from the first worker to get there.
  bool connect() {
    while (!stop_requested) {
      try {
        auto o =
            lock_client_options(s_.topology, s_.lock_url, s_.command_timeout, s_.connect_timeout);
        o.connection.client_name = "torture-worker-" + s_.id;
        o.watchdog_lease = s_.lease;
        o.max_recheck = s_.recheck;
        o.min_replica_acks = s_.replicas;
        o.replica_ack_timeout = s_.command_timeout / 2;
        o.fair_waiter_lease = s_.fair_waiter_lease;
        client_.emplace(o);
        for (std::size_t i = 0; i < names_.size(); ++i) {
          if (kind_of(i) == "semaphore") client_->semaphore(names_[i]).try_set_permits(s_.permits);
          if (kind_of(i) == "leased-semaphore") {
            client_->leased_semaphore(names_[i]).try_set_permits(s_.permits);
          }
        }
        return true;
      } catch (const std::system_error& e) {
        client_.reset();
        log_.write({"E", s_.id, "0", to_string(now_ns()), "connect", code_name(e)});
        std::this_thread::sleep_for(50ms);  // the workload's own pace, not a test's wait
      }
    }
    return false;
  }

  // Takes name `i` as its kind says; fills `holds` (empty: not granted within the wait) and
  // returns the kind logged on the grant's lines.
  std::string acquire(std::size_t i, std::vector<hold>& holds) {
    const auto& name = names_[i];
    const auto& kind = kind_of(i);
    std::vector<std::string> names = {name};
    std::string label = kind;
    const auto pick = std::uniform_int_distribution<int>(0, 9)(rng_);
    if (kind == "multi") {
      names.push_back(name + "-m");
      if (pick >= 7) {
        names = {names[static_cast<std::size_t>(pick % 2)]};
        label = "reentrant";
      }
    } else if (kind == "read-write") {
      label = pick < 3 ? "write" : "read";
    }
    std::vector<std::string> gids;
    for (std::size_t k = 0; k < names.size(); ++k)
      gids.push_back(to_string(++next_grant_));
    // Runs on the client's I/O thread: one write(2) per line, nothing that blocks. A multi-lock
    // says that one of its holds was lost, not which: every one of them is marked.
    lease_options o{.on_lost = [this, gids](lease_lost_reason why) {
      for (const auto& gid : gids) {
        log_.write({"L", s_.id, gid, to_string(now_ns()),
                    why == lease_lost_reason::expired ? "expired" : "not_held"});
      }
    }};
    if (label == "multi") {
      // An owner of its own: what a refused attempt left behind can only be its own.
      o.owner = "multi-" + s_.id + "-" + gids[0];
      auto held = client_->multi(names).try_acquire_for(s_.wait, o);
      if (!held) {
        check_nothing_left(names, o.owner);
        return label;
      }
      auto leases = held.take();
      for (std::size_t k = 0; k < leases.size(); ++k)
        holds.push_back({std::move(leases[k]), names[k], gids[k]});
      return label;
    }
    lease l;
    if (label == "reentrant") l = client_->reentrant(names[0]).try_acquire_for(s_.wait, o);
    if (label == "simple") l = client_->simple(names[0]).try_acquire_for(s_.wait, o);
    if (label == "fair") l = client_->fair(names[0]).try_acquire_for(s_.wait, o);
    if (label == "read") l = client_->read_write(names[0]).read().try_acquire_for(s_.wait, o);
    if (label == "write") l = client_->read_write(names[0]).write().try_acquire_for(s_.wait, o);
    if (label == "semaphore") l = client_->semaphore(names[0]).try_acquire_for(s_.wait, o);
    if (label == "leased-semaphore") {
      l = client_->leased_semaphore(names[0]).try_acquire_for(s_.wait, o);
    }
    if (l) holds.push_back({std::move(l), names[0], gids[0]});
    return label;
  }

  // A multi-lock's wait that ended without the lock holds nothing, not even a part (the server
  // is asked; an error asking is logged as one, not as a leftover).
  void check_nothing_left(const std::vector<std::string>& names, const std::string& owner) {
    for (const auto& n : names) {
      try {
        const auto count = client_->reentrant(n).hold_count(owner);
        if (count != 0) log_.write({"M", s_.id, n, to_string(count), to_string(now_ns())});
      } catch (const std::system_error& e) {
        log_.write({"E", s_.id, "0", to_string(now_ns()), "leftover-check", code_name(e)});
      }
    }
  }

  // One latch operation, logged before it is sent (a worker killed during it leaves that line
  // alone: its outcome is unknown) and when it returns: set (1 armed, 0 it existed), down (the
  // count left), wait (1 reached, 0 the wait ended); "err" if it threw.
  void latch_iteration(const std::string& name) {
    auto latch = client_->latch(name);
    std::int64_t count = 0;
    try {
      count = latch.count();
    } catch (const std::system_error& e) {
      log_.write({"E", s_.id, "0", to_string(now_ns()), "latch-count", code_name(e)});
      return;
    }
    const auto coin = std::uniform_int_distribution<int>(0, 1)(rng_);
    const char* op = count == 0 ? "set" : coin == 0 ? "down" : "wait";
    // A latch at 0 stays there a while, so that the checker sees whether its waiters all left.
    if (count == 0) {
      std::this_thread::sleep_for(
          std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 2000)(rng_)));
    }
    const auto t_call = to_string(now_ns());
    log_.write({"c", s_.id, name, op, t_call});
    std::string result;
    try {
      if (count == 0) {
        result = latch.try_set_count(s_.permits + 1) ? "1" : "0";
      } else if (coin == 0) {
        // The asynchronous form says what count it left; this thread waits for it.
        std::promise<call_result<std::int64_t>> done;
        latch.count_down_async([&done](call_result<std::int64_t> r) { done.set_value(r); });
        const auto left = done.get_future().get();
        if (left.error) throw dlock::error(left.error, left.message);
        result = to_string(left.value);
      } else {
        result = latch.wait_for(s_.wait) ? "1" : "0";
      }
    } catch (const std::system_error& e) {
      log_.write({"E", s_.id, "0", to_string(now_ns()), std::string("latch-") + op, code_name(e)});
      result = "err";
    }
    log_.write({"C", s_.id, name, op, t_call, to_string(now_ns()), result});
  }

  void iteration(std::optional<redis_client>& resource) {
    const auto i =
        static_cast<std::size_t>(std::uniform_int_distribution<int>(0, s_.names - 1)(rng_));
    if (kind_of(i) == "latch") return latch_iteration(names_[i]);
    const auto t_call = now_ns();
    std::vector<hold> holds;
    std::string kind;
    try {
      kind = acquire(i, holds);
    } catch (const std::system_error& e) {
      log_.write({"E", s_.id, "0", to_string(now_ns()), "acquire", code_name(e)});
      return;
    }
    const auto t_grant = to_string(now_ns());
    if (holds.empty()) {
      log_.write({"N", s_.id, names_[i], to_string(t_call), t_grant});
      return;
    }
    for (const auto& h : holds) {
      log_.write(
          {"G", s_.id, h.gid, h.name, to_string(h.l.fence()), to_string(t_call), t_grant, kind});
    }
    // Holders of a semaphore share it, and readers only read: the read-modify-write is for the
    // exclusive holds (a multi-lock's on its first name).
    const bool shared = kind == "semaphore" || kind == "leased-semaphore";
    const bool writes = !shared && kind != "read";
    auto& first = holds.front();
    const auto fence = to_string(first.l.fence());
    // The lock name's hash tag puts the resource in the lock's slot: held writes need that.
    const std::string key = "torture:resource:{" + first.name + "}";
    const auto do_op = [&](char op_kind, const std::string& read_value) {
      return s_.held_writes
                 ? held_op(first.l, first.gid, first.name, fence, op_kind, key, read_value)
                 : op(*resource, first.gid, first.name, fence, op_kind, key, read_value);
    };
    std::optional<op_result> read;
    if (!shared) read = do_op('r', {});
    // A rejected read means a newer holder exists (fenced), or the lock is no longer ours (held).
    const bool go_on = shared || (read && read->accepted);
    if (go_on) work();
    for (const auto& h : holds) {
      log_.write({"V", s_.id, h.gid, to_string(now_ns()), h.l.valid() ? "1" : "0", h.name, kind});
    }
    if (go_on && writes) do_op('w', read->a);
    for (auto& h : holds)
      release_and_log(h.l, h.gid);
  }

  // Sleeps: the critical section's work. Mostly 0–2 ms; rarely 0.1–1.5 s, across watchdog
  // renewals, so that valid() and the faults have a long holder to bite on. Rarely, because
  // every other worker soon queues on the name a long holder keeps.
  void work() {
    if (std::uniform_int_distribution<int>(0, 999'999)(rng_) < s_.long_work_ppm) {
      std::this_thread::sleep_for(
          std::chrono::milliseconds(std::uniform_int_distribution<int>(100, 1500)(rng_)));
    } else {
      std::this_thread::sleep_for(
          std::chrono::microseconds(std::uniform_int_distribution<int>(0, 2000)(rng_)));
    }
  }

  std::optional<op_result> op(redis_client& resource, const std::string& gid,
                              const std::string& name, const std::string& fence, char kind,
                              const std::string& key, const std::string& read_value) {
    const auto t_send = now_ns();
    op_result r;
    try {
      const auto& s = kind == 'r' ? read_script_ : write_script_;
      const std::string_view keys[] = {key};
      const std::string_view args[] = {fence, read_value};
      const auto reply = resource.eval(s, keys, std::span(args, kind == 'r' ? 1 : 2));
      r.seq = reply.at(0).integer();
      r.accepted = reply.at(1).integer() == 1;
      r.a = reply.at(2).str();
      r.b = reply.at(3).str();
    } catch (const std::system_error& e) {
      log_op_error(gid, kind, e);
      return std::nullopt;
    }
    log_.write({"O", s_.id, gid, name, fence, std::string_view(&kind, 1), to_string(r.seq),
                r.accepted ? "1" : "0", kind == 'r' ? r.a : read_value, kind == 'r' ? r.b : r.a,
                to_string(t_send), to_string(now_ns())});
    return r;
  }

  // The same read-modify-write on the lock server, under the hold: the resource's op count
  // (HINCRBY seq) numbers the ops that ran, in the server's order, and the writes check the
  // hold in the same atomic step. An op refused because the lease no longer held the lock ran
  // nothing: it is logged rejected, unnumbered (seq "-"). The fence is logged but not used.
  std::optional<op_result> held_op(lease& l, const std::string& gid, const std::string& name,
                                   const std::string& fence, char kind, const std::string& key,
                                   const std::string& read_value) {
    const auto t_send = now_ns();
    std::vector<std::vector<std::string>> writes = {{"HINCRBY", key, "seq", "1"},
                                                    {"HGET", key, "value"}};
    if (kind == 'w')
      writes.push_back({"HSET", key, "value", to_string(std::stoll(read_value) + 1)});
    op_result r;
    std::string seq;
    try {
      const auto replies = l.write_while_held(writes);
      for (const auto& reply : replies) {
        if (reply.is_error()) throw dlock::error(errc::unexpected_reply, reply.str());
      }
      r.seq = replies.at(0).integer();
      r.accepted = true;
      r.a = replies.at(1).is_nil() ? "0" : replies.at(1).str();  // read: the value; write: replaced
      seq = to_string(r.seq);
    } catch (const std::system_error& e) {
      if (e.code() != errc::lease_lost) {
        log_op_error(gid, kind, e);
        return std::nullopt;
      }
    }
    log_.write({"O", s_.id, gid, name, fence, std::string_view(&kind, 1), seq,
                r.accepted ? "1" : "0", kind == 'r' ? r.a : read_value, kind == 'r' ? "" : r.a,
                to_string(t_send), to_string(now_ns())});
    return r;
  }

  void log_op_error(const std::string& gid, char kind, const std::system_error& e) {
    log_.write(
        {"E", s_.id, gid, to_string(now_ns()), kind == 'r' ? "read" : "write", code_name(e)});
  }

  // The one place a grant ends. release_checked() says whether the lock was still ours when the
  // release reached the server, which the checker needs to tell a lost grant from a clean one.
  // The lease's validity as it stood when the hold ended tells the checker until when this
  // holder had reason to believe in it.
  void release_and_log(lease& l, const std::string& gid) {
    const auto valid_until = to_string(
        std::chrono::duration_cast<std::chrono::nanoseconds>(l.valid_until().time_since_epoch())
            .count());
    const auto t_start = now_ns();
    const auto outcome = l.release_checked();
    log_.write({"R", s_.id, gid, to_string(t_start), to_string(now_ns()), outcome_name(outcome),
                valid_until});
  }

  settings s_;
  event_writer log_;  // before client_: on_lost may write until the client is gone
  std::optional<client> client_;
  std::mt19937_64 rng_;
  std::vector<std::string> names_;
  std::uint64_t next_grant_ = 0;
  const script read_script_{std::string(lua::torture_read)};
  const script write_script_{std::string(lua::torture_write)};
};

}  // namespace
}  // namespace dlock::torture

int main(int argc, char** argv) {
  struct sigaction sa {};
  sa.sa_handler = dlock::torture::on_sigterm;
  ::sigaction(SIGTERM, &sa, nullptr);
  try {
    return dlock::torture::worker(dlock::torture::parse(argc, argv)).run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock_torture_worker: %s\n", e.what());
    return 2;
  }
}
