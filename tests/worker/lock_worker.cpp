// A separate process for the multi-process tests. It reports what happens on stdout, one line
// per event, so the test can wait for events instead of sleeping.
//
//   lock_worker count   URL KIND NAME COUNTER N [DATA_URL]
//                       N critical sections: GET, then SET+1 (on DATA_URL's server if given)
//   lock_worker fence   URL KIND NAME DATA_URL PREFIX N
//                       N grants, each: INCR PREFIX:seq (its place in grant order), a fenced write
//                       to PREFIX:resource with the grant's token, and a write with this
//                       worker's previous token when someone else held the lock in between,
//                       which must be rejected; prints "grant SEQ FENCE" per grant (2 s
//                       watchdog leases)
//   lock_worker hold    URL KIND NAME LEASE_MS PERIOD_MS RESOURCE
//                       hold with the watchdog; when the lease is lost, try a fenced write
//   lock_worker write-held URL KIND NAME LEASE_MS PERIOD_MS RESOURCE
//                       hold with the watchdog and write RESOURCE with write_while_held every
//                       2 ms until a write is refused; prints "writing" after the first
//   lock_worker handoff URL KIND NAME THREADS             each thread acquires once, releases
//   lock_worker lose-and-exit URL NAME LEASE_MS
//                       a simple lock with a fixed lease, left to expire; on_lost wakes main
//                       and then keeps the I/O thread busy for a while; main closes the client
//                       and checks that this joined the I/O thread (else says so and exits
//                       3), then returns from main
//
// URL is a server's or a redis-sentinel:// URL, "cluster:URL,URL..." for a cluster's seeds, or
// "redlock:URL,URL..." for RedLock's independent masters.
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"

namespace {

using namespace std::chrono_literals;

void say(const std::string& line) {
  static std::mutex out;
  std::lock_guard lock(out);
  std::cout << line << std::endl;  // flushed: the test is reading
}

dlock::lease acquire(const dlock::client& c, const std::string& kind, const std::string& name,
                     const dlock::lease_options& o = {}) {
  if (kind == "simple") return c.simple(name).acquire(o);
  return c.reentrant(name).acquire(o);
}

// Runs commands on the lock's own deployment, or on a separate server (RedLock's masters come
// and go in some tests; the data they protect must not).
struct data_store {
  const dlock::client& locks;
  std::unique_ptr<dlock::redis_client> separate;
  dlock::reply operator()(const std::string& key, std::initializer_list<std::string_view> args) {
    if (separate) return separate->command(std::vector<std::string>(args.begin(), args.end()));
    return locks.command(key, args);
  }
};

// On stderr (ctest shows it when a test fails): what the client met on the way, for a failure
// that depends on timing (timeouts, lost connections, late answers) to be read afterwards.
void report_counters(const dlock::client& c) {
  const auto s = c.stats();
  std::string line =
      "counters: grants " + std::to_string(s.grants) + ", attempts " + std::to_string(s.attempts) +
      ", release failures " + std::to_string(s.release_failures) + ", born dead " +
      std::to_string(s.grants_born_dead) + ", redlock misses " + std::to_string(s.redlock_misses) +
      ", late answers " + std::to_string(s.redlock_late_answers);
  const auto masters = c.masters();
  for (std::size_t i = 0; i < masters.size(); ++i) {
    const auto n = masters[i]->counters();
    line += "; master " + std::to_string(i) + ": timeouts " + std::to_string(n.timeouts) +
            ", losses " + std::to_string(n.connection_losses);
  }
  std::cerr << line << std::endl;
}

int count(const dlock::client& c, const std::string& kind, const std::string& name,
          const std::string& counter, int n, data_store data) {
  for (int i = 0; i < n; ++i) {
    auto l = acquire(c, kind, name);
    // Deliberately not atomic: only the lock keeps two processes from losing an update.
    const auto value = data(counter, {"GET", counter});
    const long next = value.is_nil() ? 1 : std::stol(value.str()) + 1;
    const std::string text = std::to_string(next);
    data(counter, {"SET", counter, text});
    if (!l.release()) {
      say("release-failed");
      return 1;
    }
  }
  report_counters(c);
  say("done");
  return 0;
}

int fence(const dlock::client& c, const std::string& kind, const std::string& name,
          dlock::redis_client& data, const std::string& prefix, int n) {
  const std::string seq_key = prefix + ":seq", resource = prefix + ":resource";
  std::int64_t last_seq = 0;
  std::uint64_t last_fence = 0;
  for (int i = 0; i < n; ++i) {
    auto l = acquire(c, kind, name);
    const auto seq = data.command({"INCR", seq_key}).integer();
    if (last_seq != 0 && seq > last_seq + 1) {
      // Someone else held the lock since our last grant and wrote with a newer token.
      const auto stale = dlock::fenced_set(data, resource, "stale", last_fence);
      if (stale.written) say("stale-accepted " + std::to_string(last_fence));
    }
    const auto w = dlock::fenced_set(data, resource, "grant " + std::to_string(seq), l.fence());
    if (!w.written) say("write-rejected " + std::to_string(l.fence()));
    say("grant " + std::to_string(seq) + " " + std::to_string(l.fence()));
    last_seq = seq;
    last_fence = l.fence();
    l.release();
  }
  say("done");
  return 0;
}

int hold(const dlock::client& c, const std::string& kind, const std::string& name,
         const std::string& resource) {
  std::mutex m;
  std::condition_variable cv;
  bool lost = false;
  bool callback_ran = false;
  auto l = acquire(c, kind, name, {.on_lost = [&](dlock::lease_lost_reason) {
                     std::lock_guard lock(m);
                     callback_ran = true;
                   }});
  std::stop_callback on_stop(l.stop_token(), [&] {
    std::lock_guard lock(m);
    lost = true;
    cv.notify_all();
  });
  say("acquired " + std::to_string(l.fence()));
  const auto first = dlock::fenced_set(c, resource, "first holder", l.fence());
  say("wrote " + std::to_string(first.written));
  {
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return lost; });
  }
  const bool expired = l.lost_reason() == dlock::lease_lost_reason::expired;
  std::lock_guard lock(m);
  say(std::string("lost ") + (expired ? "expired" : "not_held") +
      " callback=" + std::to_string(callback_ran) + " valid=" + std::to_string(l.valid()));
  const auto late = dlock::fenced_set(c, resource, "stale holder", l.fence());
  say("fenced written=" + std::to_string(late.written) +
      " highest=" + std::to_string(late.highest));
  return 0;
}

int write_held(const dlock::client& c, const std::string& kind, const std::string& name,
               const std::string& resource) {
  auto l = acquire(c, kind, name);
  for (int n = 0;; ++n) {
    try {
      (void)l.write_while_held({{"SET", resource, "first holder " + std::to_string(n)}});
    } catch (const dlock::error& e) {
      if (e.code() != dlock::errc::lease_lost) throw;
      const bool expired = l.lost_reason() == dlock::lease_lost_reason::expired;
      say(std::string("refused lost=") + (expired ? "expired" : "not_held") +
          " valid=" + std::to_string(l.valid()));
      return 0;
    }
    if (n == 0) say("writing");
    std::this_thread::sleep_for(2ms);  // pacing the writes, not waiting for an event
  }
}

int handoff(const dlock::client& c, const std::string& kind, const std::string& name, int threads) {
  std::vector<std::thread> waiters;
  for (int t = 0; t < threads; ++t) {
    waiters.emplace_back([&, t] {
      auto l = acquire(c, kind, name);
      say("acquired " + std::to_string(t) + " " + std::to_string(l.fence()));
      l.release();
    });
  }
  say("started");
  for (auto& w : waiters)
    w.join();
  say("done");
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
  constexpr std::string_view cluster = "cluster:", redlock = "redlock:";
  if (target.starts_with(cluster)) {
    return dlock::client_options::cluster(split_urls(target.substr(cluster.size())));
  }
  if (target.starts_with(redlock)) {
    return dlock::client_options::redlock_masters(split_urls(target.substr(redlock.size())));
  }
  return dlock::client_options::from_url(target);
}

// What `dlock run` does when its lease is lost: on_lost wakes the main thread, which lets
// everything go and returns from main. Closing the client must join its I/O thread even though
// that thread is still busy with the loss: if the client outlived its last handle there, its
// teardown would race exit's cleanups.
int lose_and_exit(const std::string& url, const std::string& name,
                  std::chrono::milliseconds lease) {
  std::mutex m;
  std::condition_variable cv;
  bool lost = false;
  pid_t io_thread = 0;
  {
    const dlock::client c(url);
    dlock::lease_options o;
    o.lease_time = lease;
    o.on_lost = [&](dlock::lease_lost_reason) {
      {
        const std::lock_guard lock(m);
        lost = true;
        io_thread = ::gettid();
        cv.notify_one();
      }
      // The rest of the loss's work on the I/O thread, drawn out so that main is sure to close
      // the client meanwhile.
      std::this_thread::sleep_for(20ms);
    };
    auto held = c.simple(name).acquire(o);
    say("acquired");
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return lost; });
  }
  if (std::filesystem::exists("/proc/self/task/" + std::to_string(io_thread))) {
    say("the I/O thread (" + std::to_string(io_thread) + ") outlived the client");
    return 3;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> a(argv + 1, argv + argc);
  try {
    if ((a.size() == 6 || a.size() == 7) && a[0] == "count") {
      const dlock::client c(options_for(a[1]));
      data_store data{c, a.size() == 7 ? std::make_unique<dlock::redis_client>(a[6]) : nullptr};
      return count(c, a[2], a[3], a[4], std::stoi(a[5]), std::move(data));
    }
    if (a.size() == 7 && a[0] == "fence") {
      dlock::redis_client data(a[4]);
      // A short lease: a release a restarting master missed leaves the lock there until it
      // expires (RedLock's safety net), which should not stall the run for half a minute.
      auto o = options_for(a[1]);
      o.watchdog_lease = 2s;
      o.watchdog_period = 500ms;
      return fence(dlock::client(o), a[2], a[3], data, a[5], std::stoi(a[6]));
    }
    if (a.size() == 7 && a[0] == "hold") {
      auto o = options_for(a[1]);
      o.watchdog_lease = std::chrono::milliseconds(std::stol(a[4]));
      o.watchdog_period = std::chrono::milliseconds(std::stol(a[5]));
      return hold(dlock::client(o), a[2], a[3], a[6]);
    }
    if (a.size() == 7 && a[0] == "write-held") {
      auto o = options_for(a[1]);
      o.watchdog_lease = std::chrono::milliseconds(std::stol(a[4]));
      o.watchdog_period = std::chrono::milliseconds(std::stol(a[5]));
      return write_held(dlock::client(o), a[2], a[3], a[6]);
    }
    if (a.size() == 4 && a[0] == "lose-and-exit") {
      return lose_and_exit(a[1], a[2], std::chrono::milliseconds(std::stol(a[3])));
    }
    if (a.size() == 5 && a[0] == "handoff") {
      return handoff(dlock::client(options_for(a[1])), a[2], a[3], std::stoi(a[4]));
    }
  } catch (const std::exception& e) {
    say(std::string("error ") + e.what());
    return 1;
  }
  std::cerr << "usage: see the comment at the top of lock_worker.cpp\n";
  return 64;
}
