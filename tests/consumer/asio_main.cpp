// The optional asio adapter, built against the installed dlock the way a user's project does:
// dlock/asio.hpp with standalone asio (libasio-dev). Without arguments it only proves that the
// header compiles and links; with a server URL it acquires and releases through a callback on an
// io_context and through asio::use_awaitable.
#include <asio/bind_executor.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/use_awaitable.hpp>
#include <dlock/asio.hpp>
#include <dlock/dlock.hpp>
#include <iostream>

namespace {

int online(const char* url) {
  using namespace std::chrono_literals;
  dlock::client redis(url);
  auto lock = redis.simple("consumer:asio");
  asio::io_context io;
  int rc = 30;
  // A callback bound to the io_context; run() returns once it has run (the operation keeps
  // work counted there until then).
  dlock::async_acquire(lock, 5s,
                       asio::bind_executor(io, [&](std::error_code ec, dlock::lease held) {
                         if (ec || !held) return;
                         rc = held.release() ? 31 : 32;
                       }));
  io.run();
  if (rc != 31) return rc;
  rc = 0;
#if defined(ASIO_HAS_CO_AWAIT)  // asio 1.22's coroutines need GCC's (Clang: experimental ones)
  rc = 31;
  io.restart();
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        dlock::lease held = co_await dlock::async_acquire(lock, 5s, asio::use_awaitable);
        if (!held) co_return;
        rc = co_await dlock::async_release(held, asio::use_awaitable) ? 0 : 33;
      },
      asio::detached);
  io.run();
#endif
  if (rc == 0) std::cout << "asio consumer ok against " << url << "\n";
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc < 2) {
      std::cout << "asio consumer ok (dlock/asio.hpp compiles)\n";
      return 0;
    }
    return online(argv[1]);
  } catch (const std::exception& e) {
    std::cerr << "asio consumer: " << e.what() << "\n";
    return 20;
  }
}
