// Links against the packaged dlock. Without arguments it only builds connection options from a
// URL (no server needed); with a server URL it also takes and releases a lock there.
#include <dlock/dlock.hpp>

#include <iostream>

int main(int argc, char** argv) {
  try {
    const auto options =
        dlock::connection_options::from_url("redis://user:secret@127.0.0.1:6379/0");
    std::cout << "dlock " << dlock::version << ": " << options.redacted_url() << "\n";
    if (argc < 2) return 0;
    dlock::client redis(argv[1]);
    dlock::lease held = redis.simple("test_package:lock").try_acquire();
    if (!held) {
      std::cerr << "test_package: the lock is held elsewhere\n";
      return 1;
    }
    const auto fence = held.fence();
    if (!held.release()) return 1;
    std::cout << "took and released a lock on " << argv[1] << " (fence " << fence << ")\n";
    return 0;
  } catch (const dlock::error& e) {
    std::cerr << "test_package: " << e.what() << "\n";
    return 1;
  }
}
