// dlock market: Redis in Action's marketplace (§6.2), the book's algorithms and dlock's locks on
// the same work, printed beside the book's own table. The work is bench/market's library.
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "cli.hpp"
#include "embedded/redis_server.hpp"
#include "market/market.hpp"
#include "progress_line.hpp"

namespace dlock::cli {

int market(const market_args& args) {
  dlock::market::options o;
  o.url = args.url;
  o.allow_flush = args.flush;
  o.seconds = args.seconds;
  o.variants = args.variants;
  if (!args.loads.empty()) {
    o.loads.clear();
    for (const auto& text : args.loads) {
      dlock::market::load l;
      char slash = 0;
      std::istringstream in(text);
      if (!(in >> l.listers >> slash >> l.buyers) || slash != '/' || !in.eof() || l.listers < 1 ||
          l.buyers < 1) {
        throw failure(exit_usage,
                      "market: a load is LISTERS/BUYERS, e.g. 5/1 (got '" + text + "')");
      }
      o.loads.push_back(l);
    }
  }
  progress_line line("dlock market");  // erased on the way out, whatever happens
  o.progress = [&](const std::string& m) { line.show(m); };
  dlock::market::report r;
  try {
    r = dlock::market::run(o);
  } catch (const std::invalid_argument& e) {
    throw failure(exit_usage, std::string("market: ") + e.what());
  } catch (const embedded::server_error& e) {
    throw failure(exit_unavailable, std::string("market: ") + e.what());
  }
  line.clear();
  if (args.json) {
    std::cout << dlock::market::to_json(r).dump() << std::endl;
  } else {
    std::cout << dlock::market::render_table(r) << std::flush;
  }
  return exit_ok;
}

}  // namespace dlock::cli
