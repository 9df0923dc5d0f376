// Builds against the installed dlock and exercises it end to end without a server: URL parsing,
// the error category, and a real connection attempt that must fail with a typed error.
#include <dlock/dlock.hpp>

#include <iostream>

int main() {
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
