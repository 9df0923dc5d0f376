// dlock's log lines through spdlog: client_options::logger forwards each line to an spdlog
// logger at the matching level (the adapter below, quoted by docs/library.md), min_log_level
// chooses how much dlock says. At debug it logs every grant and release:
//
//   spdlog_logger [URL [debug|info|warning|error]]     URL: else $DLOCK_URL; level: else info
//   [...] [dlock] [debug] reentrant lock 'examples:spdlog' acquired after 0.4 ms, fence 1, ...
#include <dlock/dlock.hpp>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace {

// "debug", "info", "warning" or "error", as dlock::to_string spells the levels.
dlock::log_level level_named(std::string_view name) {
  using dlock::log_level;
  for (auto level : {log_level::debug, log_level::info, log_level::warning, log_level::error}) {
    if (dlock::to_string(level) == name) return level;
  }
  throw std::invalid_argument("unknown log level '" + std::string(name) + "'");
}

}  // namespace

int main(int argc, char** argv) {
  const char* url = argc > 1 ? argv[1] : std::getenv("DLOCK_URL");
  if (url == nullptr) {
    std::cerr << "usage: spdlog_logger URL [debug|info|warning|error] (or set DLOCK_URL)\n";
    return 64;
  }
  try {
    auto options = dlock::client_options::from_url(url);
    options.min_log_level = level_named(argc > 2 ? argv[2] : "info");

    // The adapter: dlock's levels onto spdlog's. dlock filters (min_log_level), spdlog passes all.
    auto log = spdlog::stderr_color_mt("dlock");
    log->set_level(spdlog::level::debug);
    options.logger = [log](dlock::log_level level, std::string_view line) {
      using dlock::log_level;
      const auto to = level == log_level::error     ? spdlog::level::err
                      : level == log_level::warning ? spdlog::level::warn
                      : level == log_level::info    ? spdlog::level::info
                                                    : spdlog::level::debug;
      log->log(to, "{}", line);
    };

    dlock::client client(options);
    auto lock = client.reentrant("examples:spdlog");
    dlock::lease held = lock.try_acquire_for(std::chrono::seconds(5));
    if (!held) throw std::runtime_error("examples:spdlog is held by someone else");
    if (!held.release()) throw std::runtime_error("the release was not confirmed");
    // Leaving the scope closes the client, which first delivers the log lines still queued.
  } catch (const std::exception& e) {
    std::cerr << "spdlog_logger: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
