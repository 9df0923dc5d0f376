// A separate process for the multi-process tests of the synchronizers (fair lock, read-write
// lock, leased semaphore): tests/integration/synchronizers_multiprocess_test.cpp. It reports
// what happens on stdout, one line per event, so the test waits for lines instead of sleeping.
// A line starting with "violation" means an exclusion or bound this worker checks was broken.
//
//   sync_worker fifo        URL NAME COUNTER INDEX N
//       fair lock NAME, owner "w<INDEX>"; prints "owner <owner id>", then N acquisitions, each:
//       RPUSH grants:{NAME} <owner id> (the grant order), GET COUNTER then SET +1 (not
//       atomic: only the lock keeps it exact), release; "done"
//   sync_worker fair-wait   URL NAME OWNER WAITER_LEASE_MS WAIT_MS
//       prints "owner <owner id>", waits up to WAIT_MS for fair lock NAME (fair_waiter_lease
//       WAITER_LEASE_MS); "acquired <fence>" or "timeout"; releases; "done"
//   sync_worker rw-reader   URL NAME PREFIX N HOLD_MS
//       N read holds: INCR PREFIX:readers_inside, PREFIX:writer_inside must be absent (at the
//       start and the end of the hold), HOLD_MS of work, DECR; "done max=<most readers inside>"
//   sync_worker rw-writer   URL NAME PREFIX N
//       N write holds: PREFIX:readers_inside must be 0 and PREFIX:writer_inside absent; SET
//       writer_inside, GET PREFIX:counter then SET +1, DEL writer_inside; "done"
//   sync_worker upgrade     URL NAME PREFIX ROUNDS
//       two of these, in ROUNDS rounds: take a read hold, meet the other (barrier on
//       PREFIX:held:<r>), upgrade (10 s wait); "round <r> upgraded <ms>" (then release both) or
//       "round <r> conflict <ms>" (then release the read hold) or "round <r> timeout"; meet
//       again (PREFIX:done:<r>); "done"
//   sync_worker read-loop   URL NAME PREFIX HOLD_MS
//       read holds of HOLD_MS each, back to back, INCR/DECR PREFIX:readers_inside around each,
//       until PREFIX:stop exists; "reading" after the first hold, "done <holds>"
//   sync_worker write-timed URL NAME PREFIX ROUNDS
//       ROUNDS times: wait until at least 2 readers are inside (PREFIX:readers_inside), then
//       take the write lock (30 s wait); "acquired <ms waited>" (readers_inside must be 0);
//       release; "done"
//   sync_worker sem-loop    URL NAME PREFIX N PERMITS
//       leased semaphore NAME, N acquisitions of one permit: INCR PREFIX:inside (must be <=
//       PERMITS), 1 ms of work, DECR, release; "done max=<most inside>"
//   sync_worker sem-hold    URL NAME WATCHDOG_LEASE_MS LEASE_MS
//       takes one permit (LEASE_MS > 0: that fixed lease; 0: a watchdog lease of
//       WATCHDOG_LEASE_MS), prints "acquired <permit id>", holds it until killed (at most 60 s)
//   sync_worker sem-wait    URL NAME LEASE_MS WAIT_MS
//       "waiting", waits up to WAIT_MS for one permit with a fixed lease of LEASE_MS;
//       "acquired <permit id>" or "timeout"; then holds it until killed (at most 60 s)
//   sync_worker sem-release URL NAME ID
//       leased_semaphore::release(ID) from this process: "released 1" or "released 0"
//
// URL is a server's or a redis-sentinel:// URL, or "cluster:URL,URL..." for a cluster's seeds.

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"

namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

void say(const std::string& line) {
  static std::mutex out;
  std::lock_guard lock(out);
  std::cout << line << std::endl;  // flushed: the test is reading
}

std::int64_t ms_since(steady::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - t).count();
}

std::int64_t int_of(const dlock::reply& r) {
  if (r.is_nil()) return 0;
  if (r.is_integer()) return r.integer();
  return std::stoll(r.str());
}

std::int64_t get(const dlock::client& c, const std::string& key) {
  return int_of(c.command(key, {"GET", key}));
}

bool exists(const dlock::client& c, const std::string& key) {
  return c.command(key, {"EXISTS", key}).integer() != 0;
}

/// Waits (30 s at most) until `key` counts at least `n`; false if it never does.
bool wait_until_at_least(const dlock::client& c, const std::string& key, std::int64_t n) {
  const auto limit = steady::now() + 30s;
  while (get(c, key) < n) {
    if (steady::now() > limit) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

/// Both workers of a round arrive here before either goes on.
bool meet(const dlock::client& c, const std::string& key) {
  c.command(key, {"INCR", key});
  if (wait_until_at_least(c, key, 2)) return true;
  say("violation the other worker never arrived at " + key);
  return false;
}

/// Holds the calling thread until `l` is lost or `limit` passes; true if lost.
bool wait_for_loss(const dlock::lease& l, std::chrono::milliseconds limit) {
  std::mutex m;
  std::condition_variable cv;
  bool lost = false;
  std::stop_callback on_stop(l.stop_token(), [&] {
    std::lock_guard lock(m);
    lost = true;
    cv.notify_all();
  });
  std::unique_lock lock(m);
  return cv.wait_for(lock, limit, [&] { return lost; });
}

int fifo(const dlock::client& c, const std::string& name, const std::string& counter, int index,
         int n) {
  auto lock = c.fair(name);
  const std::string owner = "w" + std::to_string(index);
  const std::string owner_id = c.id() + ":" + owner;
  const std::string grants = dlock::derived_key("grants", name);
  say("owner " + owner_id);
  for (int i = 0; i < n; ++i) {
    auto l = lock.acquire({.owner = owner});
    c.command(grants, {"RPUSH", grants, owner_id});
    const std::string next = std::to_string(get(c, counter) + 1);
    c.command(counter, {"SET", counter, next});
    if (!l.release()) {
      say("violation release failed");
      return 1;
    }
  }
  say("done");
  return 0;
}

int fair_wait(const dlock::client& c, const std::string& name, const std::string& owner,
              std::chrono::milliseconds wait) {
  say("owner " + c.id() + ":" + owner);
  auto l = c.fair(name).try_acquire_for(wait, {.owner = owner});
  say(l ? "acquired " + std::to_string(l.fence()) : "timeout");
  l.release();
  say("done");
  return 0;
}

int rw_reader(const dlock::client& c, const std::string& name, const std::string& prefix, int n,
              std::chrono::milliseconds hold) {
  auto reader = c.read_write(name).read();
  const std::string inside = prefix + ":readers_inside", writer = prefix + ":writer_inside";
  std::int64_t most = 0;
  for (int i = 0; i < n; ++i) {
    auto l = reader.acquire();
    most = std::max(most, c.command(inside, {"INCR", inside}).integer());
    if (exists(c, writer)) say("violation a writer is inside while a reader holds the lock");
    std::this_thread::sleep_for(hold);  // work, not synchronisation
    if (exists(c, writer)) say("violation a writer came in while a reader held the lock");
    c.command(inside, {"DECR", inside});
    l.release();
  }
  say("done max=" + std::to_string(most));
  return 0;
}

int rw_writer(const dlock::client& c, const std::string& name, const std::string& prefix, int n) {
  auto writer_lock = c.read_write(name).write();
  const std::string inside = prefix + ":readers_inside", writer = prefix + ":writer_inside",
                    counter = prefix + ":counter";
  for (int i = 0; i < n; ++i) {
    auto l = writer_lock.acquire();
    if (const auto readers = get(c, inside); readers != 0) {
      say("violation " + std::to_string(readers) + " readers inside with the writer");
    }
    if (exists(c, writer)) say("violation another writer is inside");
    c.command(writer, {"SET", writer, "1"});
    const std::string next = std::to_string(get(c, counter) + 1);
    c.command(counter, {"SET", counter, next});
    c.command(writer, {"DEL", writer});
    l.release();
  }
  say("done");
  return 0;
}

int upgrade(const dlock::client& c, const std::string& name, const std::string& prefix,
            int rounds) {
  auto rw = c.read_write(name);
  for (int r = 0; r < rounds; ++r) {
    const std::string round = "round " + std::to_string(r) + " ";
    auto read = rw.read().acquire();
    if (!meet(c, prefix + ":held:" + std::to_string(r))) return 1;
    const auto asked = steady::now();
    try {
      auto w = rw.read().upgrade(read, 10s);
      const auto waited = ms_since(asked);
      if (!w) {
        say(round + "timeout");
      } else {
        if (c.command(name, {"HGET", name, "mode"}).str() != "write") {
          say("violation upgraded but the lock is not in write mode");
        }
        say(round + "upgraded " + std::to_string(waited));
      }
      w.release();
      read.release();
    } catch (const dlock::error& e) {
      if (e.code() != dlock::errc::upgrade_conflict) throw;
      const auto waited = ms_since(asked);
      read.release();  // the refused upgrader lets go, so the other one can finish
      say(round + "conflict " + std::to_string(waited));
    }
    if (!meet(c, prefix + ":done:" + std::to_string(r))) return 1;
  }
  say("done");
  return 0;
}

int read_loop(const dlock::client& c, const std::string& name, const std::string& prefix,
              std::chrono::milliseconds hold) {
  auto reader = c.read_write(name).read();
  const std::string inside = prefix + ":readers_inside", stop = prefix + ":stop";
  int holds = 0;
  while (!exists(c, stop)) {
    auto l = reader.acquire();
    c.command(inside, {"INCR", inside});
    std::this_thread::sleep_for(hold);  // the read hold's work
    c.command(inside, {"DECR", inside});
    l.release();
    if (++holds == 1) say("reading");
  }
  say("done " + std::to_string(holds));
  return 0;
}

int write_timed(const dlock::client& c, const std::string& name, const std::string& prefix,
                int rounds) {
  auto writer = c.read_write(name).write();
  const std::string inside = prefix + ":readers_inside";
  for (int r = 0; r < rounds; ++r) {
    if (!wait_until_at_least(c, inside, 2)) {
      say("violation the readers never overlapped");
      return 1;
    }
    const auto asked = steady::now();
    auto l = writer.try_acquire_for(30s);
    const auto waited = ms_since(asked);
    if (!l) {
      say("timeout");
      return 1;
    }
    if (const auto readers = get(c, inside); readers != 0) {
      say("violation " + std::to_string(readers) + " readers inside with the writer");
    }
    say("acquired " + std::to_string(waited));
    l.release();
  }
  say("done");
  return 0;
}

int sem_loop(const dlock::client& c, const std::string& name, const std::string& prefix, int n,
             std::int64_t permits) {
  auto sem = c.leased_semaphore(name);
  const std::string inside = prefix + ":inside";
  std::int64_t most = 0;
  for (int i = 0; i < n; ++i) {
    auto l = sem.acquire();
    const auto now_inside = c.command(inside, {"INCR", inside}).integer();
    most = std::max(most, now_inside);
    if (now_inside > permits) say("violation " + std::to_string(now_inside) + " inside");
    std::this_thread::sleep_for(1ms);  // work
    c.command(inside, {"DECR", inside});
    l.release();
  }
  say("done max=" + std::to_string(most));
  return 0;
}

int sem_hold(const dlock::client& c, const std::string& name, std::chrono::milliseconds lease) {
  dlock::lease_options o;
  if (lease > 0ms) o.lease_time = lease;
  auto l = c.leased_semaphore(name).acquire(o);
  say("acquired " + l.permit_id());
  wait_for_loss(l, 60s);
  return 0;
}

int sem_wait(const dlock::client& c, const std::string& name, std::chrono::milliseconds lease,
             std::chrono::milliseconds wait) {
  say("waiting");
  auto l = c.leased_semaphore(name).try_acquire_for(wait, {.lease_time = lease});
  if (!l) {
    say("timeout");
    return 0;
  }
  say("acquired " + l.permit_id());
  wait_for_loss(l, 60s);
  return 0;
}

std::vector<std::string> split_urls(std::string_view rest) {
  std::vector<std::string> urls;
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    urls.emplace_back(rest.substr(0, comma));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return urls;
}

dlock::client_options options_for(const std::string& target) {
  constexpr std::string_view cluster = "cluster:";
  if (target.starts_with(cluster)) {
    return dlock::client_options::cluster(split_urls(target.substr(cluster.size())));
  }
  return dlock::client_options::from_url(target);
}

std::chrono::milliseconds ms(const std::string& text) {
  return std::chrono::milliseconds(std::stol(text));
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> a(argv + 1, argv + argc);
  try {
    if (a.size() == 6 && a[0] == "fifo") {
      return fifo(dlock::client(options_for(a[1])), a[2], a[3], std::stoi(a[4]), std::stoi(a[5]));
    }
    if (a.size() == 6 && a[0] == "fair-wait") {
      auto o = options_for(a[1]);
      o.fair_waiter_lease = ms(a[4]);
      return fair_wait(dlock::client(o), a[2], a[3], ms(a[5]));
    }
    if (a.size() == 6 && a[0] == "rw-reader") {
      return rw_reader(dlock::client(options_for(a[1])), a[2], a[3], std::stoi(a[4]), ms(a[5]));
    }
    if (a.size() == 5 && a[0] == "rw-writer") {
      return rw_writer(dlock::client(options_for(a[1])), a[2], a[3], std::stoi(a[4]));
    }
    if (a.size() == 5 && a[0] == "upgrade") {
      return upgrade(dlock::client(options_for(a[1])), a[2], a[3], std::stoi(a[4]));
    }
    if (a.size() == 5 && a[0] == "read-loop") {
      return read_loop(dlock::client(options_for(a[1])), a[2], a[3], ms(a[4]));
    }
    if (a.size() == 5 && a[0] == "write-timed") {
      return write_timed(dlock::client(options_for(a[1])), a[2], a[3], std::stoi(a[4]));
    }
    if (a.size() == 6 && a[0] == "sem-loop") {
      return sem_loop(dlock::client(options_for(a[1])), a[2], a[3], std::stoi(a[4]),
                      std::stoll(a[5]));
    }
    if (a.size() == 5 && a[0] == "sem-hold") {
      auto o = options_for(a[1]);
      o.watchdog_lease = ms(a[3]);
      return sem_hold(dlock::client(o), a[2], ms(a[4]));
    }
    if (a.size() == 5 && a[0] == "sem-wait") {
      return sem_wait(dlock::client(options_for(a[1])), a[2], ms(a[3]), ms(a[4]));
    }
    if (a.size() == 4 && a[0] == "sem-release") {
      const dlock::client c(options_for(a[1]));
      say(std::string("released ") + (c.leased_semaphore(a[2]).release(a[3]) ? "1" : "0"));
      return 0;
    }
  } catch (const std::exception& e) {
    say(std::string("error ") + e.what());
    return 1;
  }
  std::cerr << "usage: see the comment at the top of sync_worker.cpp\n";
  return 64;
}
