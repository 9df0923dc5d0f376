// A hand driver for the marketplace library: short runs, the table (or JSON), and switches for
// dlock's settings so their effect can be measured. `dlock market` is the real front end.
//
//   dlock_market_probe [--seconds S] [--variants a,b] [--loads 1/1,5/5] [--url U --flush]
//                      [--json] [--per-worker-client] [--one-connection] [--reentrant] [--watchdog]
//                      [--try-first] [--separate-reads] [--separate-writes]
//                      [--busy-poll US] [--busy-poll-under-load never|when-it-pays|always]
//                      [--fence-counter KEY]
#include <algorithm>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_support.hpp"
#include "market/market.hpp"

namespace {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, sep);) {
    if (!part.empty()) out.push_back(part);
  }
  return out;
}

int usage(const char* self) {
  std::cerr << "usage: " << self
            << " [--seconds S] [--variants a,b] [--loads 1/1,5/5] [--url U --flush] [--json]\n"
               "       [--per-worker-client] [--one-connection] [--reentrant] [--watchdog] "
               "[--try-first] [--separate-reads] [--separate-writes]\n"
               "       [--busy-poll US] [--busy-poll-under-load never|when-it-pays|always]\n"
               "       [--fence-counter KEY]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  dlock::market::options o;
  o.seconds = 3;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    try {
      if (a == "--seconds") {
        o.seconds = std::stod(value());
      } else if (a == "--variants") {
        o.variants = split(value(), ',');
      } else if (a == "--loads") {
        o.loads.clear();
        for (const auto& l : split(value(), ',')) {
          const auto parts = split(l, '/');
          if (parts.size() != 2) throw std::invalid_argument("load '" + l + "' is not L/B");
          o.loads.push_back({std::stoi(parts[0]), std::stoi(parts[1])});
        }
      } else if (a == "--url") {
        o.url = value();
      } else if (a == "--flush") {
        o.allow_flush = true;
      } else if (a == "--json") {
        json = true;
      } else if (a == "--per-worker-client") {
        o.dlock.shared_client = false;
      } else if (a == "--one-connection") {
        o.dlock.shared_client = false;
        o.dlock.work_on_lock_connection = true;
      } else if (a == "--reentrant") {
        o.dlock.simple = false;
      } else if (a == "--watchdog") {
        o.dlock.fixed_lease = false;
      } else if (a == "--try-first") {
        o.dlock.try_first = true;
      } else if (a == "--separate-reads") {
        o.dlock.reads_with_acquisition = false;
      } else if (a == "--separate-writes") {
        o.dlock.writes_with_release = false;
      } else if (a == "--fence-counter") {
        o.dlock.fence_counter = value();
      } else if (a == "--busy-poll") {
        o.dlock.busy_poll = std::chrono::microseconds(std::stoi(value()));
      } else if (a == "--busy-poll-under-load") {
        const std::string mode = value();
        const auto& names = dlock::bench::load_polling_names;
        const auto it = std::find_if(names.begin(), names.end(),
                                     [&](const auto& named) { return named.first == mode; });
        if (it == names.end()) {
          throw std::invalid_argument("--busy-poll-under-load: never, when-it-pays or always");
        }
        o.dlock.busy_poll_under_load = it->second;
      } else {
        return usage(argv[0]);
      }
    } catch (const std::exception& e) {
      std::cerr << e.what() << "\n";
      return usage(argv[0]);
    }
  }
  o.progress = [](const std::string& line) { std::cerr << line << std::endl; };
  try {
    const auto r = dlock::market::run(o);
    if (json) {
      std::cout << dlock::market::to_json(r).dump(2) << "\n";
    } else {
      std::cout << dlock::market::render_table(r);
    }
  } catch (const std::exception& e) {
    std::cerr << "market: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
