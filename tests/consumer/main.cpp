// Builds against the installed dlock the way a user's project does, and exercises it end to end.
// Without arguments it needs no server: URL parsing, the error category, and a connection attempt
// that must fail with a typed error. With a server URL it also takes, fences and releases locks.
#include <dlock/dlock.hpp>

#include <iostream>

namespace {

int offline() {
  const auto options = dlock::connection_options::from_url("redis://user:secret@127.0.0.1:1/2");
  if (options.redacted_url() != "redis://user:***@127.0.0.1:1/2") return 1;
  try {
    auto o = options;
    o.connect_timeout = std::chrono::milliseconds(2000);
    dlock::redis_client client(o);
    return 2;  // nothing listens on port 1
  } catch (const dlock::error& e) {
    if (e.code() != dlock::errc::connect_failed) return 3;
    std::cout << "consumer ok: " << e.what() << "\n";
  }
  return 0;
}

int online(const char* url) {
  using namespace std::chrono_literals;
  dlock::client redis(url);
  auto lock = redis.reentrant("consumer:job");
  dlock::lease held = lock.try_acquire_for(5s);
  if (!held || !held.valid()) return 10;
  // A second client cannot take it while it is held.
  dlock::client other(url);
  if (other.simple("consumer:job").try_acquire()) return 11;
  const auto fence = held.fence();
  if (!dlock::fenced_set(redis, "consumer:state", "done", fence).written) return 12;
  if (!held.release()) return 13;
  {
    auto second = other.simple("consumer:other");
    std::scoped_lock both(lock, second);  // the locks are standard Lockables
  }
  if (lock.is_locked()) return 14;
  std::cout << "consumer ok against " << url << ": fence " << fence << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (const int rc = offline(); rc != 0) return rc;
    return argc > 1 ? online(argv[1]) : 0;
  } catch (const dlock::error& e) {
    std::cerr << "consumer: " << e.what() << "\n";
    return 20;
  }
}
