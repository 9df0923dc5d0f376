// A separate process for the multi-process tests. It reports what happens on stdout, one line
// per event, so the test can wait for events instead of sleeping.
//
//   lock_worker count   URL KIND NAME COUNTER N           N critical sections: GET, then SET+1
//   lock_worker hold    URL KIND NAME LEASE_MS PERIOD_MS RESOURCE
//                       hold with the watchdog; when the lease is lost, try a fenced write
//   lock_worker handoff URL KIND NAME THREADS             each thread acquires once, releases
//
// URL is a server's or a redis-sentinel:// URL, "cluster:URL,URL..." for a cluster's seeds, or
// "redlock:URL,URL..." for RedLock's independent masters.
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <iostream>
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

int count(const dlock::client& c, const std::string& kind, const std::string& name,
          const std::string& counter, int n) {
  for (int i = 0; i < n; ++i) {
    auto l = acquire(c, kind, name);
    // Deliberately not atomic: only the lock keeps two processes from losing an update.
    const auto value = c.command(counter, {"GET", counter});
    const long next = value.is_nil() ? 1 : std::stol(value.str()) + 1;
    const std::string text = std::to_string(next);
    c.command(counter, {"SET", counter, text});
    if (!l.release()) {
      say("release-failed");
      return 1;
    }
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

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> a(argv + 1, argv + argc);
  try {
    if (a.size() == 6 && a[0] == "count") {
      return count(dlock::client(options_for(a[1])), a[2], a[3], a[4], std::stoi(a[5]));
    }
    if (a.size() == 7 && a[0] == "hold") {
      auto o = options_for(a[1]);
      o.watchdog_lease = std::chrono::milliseconds(std::stol(a[4]));
      o.watchdog_period = std::chrono::milliseconds(std::stol(a[5]));
      return hold(dlock::client(o), a[2], a[3], a[6]);
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
