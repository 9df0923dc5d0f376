// dlock market: Redis in Action's marketplace (§6.2), the book's algorithms and dlock's locks on
// the same work, printed beside the book's own table. The work is bench/market's library.
#include <CLI/CLI.hpp>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "cli.hpp"
#include "embedded/redis_server.hpp"
#include "market/market.hpp"
#include "progress_line.hpp"

namespace dlock::cli {
namespace {

struct market_args {
  std::string url;     // empty: a private redis-server (DLOCK_URL is not read)
  bool flush = false;  // allow FLUSHALL on the --url server
  double seconds = 60;
  std::vector<std::string> variants;  // empty: all
  std::vector<std::string> loads;     // "LISTERS/BUYERS"; empty: 1/1, 5/1, 5/5
  bool json = false;
};

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

class market_command final : public subcommand {
 public:
  explicit market_command(CLI::App& app)
      : subcommand(app.add_subcommand(
            "market",
            "Redis in Action's marketplace: WATCH vs locks vs fine-grained locks (docs/cli.md)")) {
    app_->add_option("--seconds", args_.seconds, "Length of each run (default 60)")
        ->check(CLI::Range(0.1, 3600.0))
        ->type_name("N");
    app_->add_option("--variants", args_.variants,
                     "Comma-separated: watch, book-lock, book-fine, dlock-coarse, dlock-fine, "
                     "no-lock, script")
        ->delimiter(',')
        ->type_name("LIST");
    app_->add_option("--loads", args_.loads, "Comma-separated LISTERS/BUYERS (default 1/1,5/1,5/5)")
        ->delimiter(',')
        ->type_name("LIST");
    app_->add_flag("--json", args_.json, "Print JSON (schema: docs/cli.md)");
    app_->add_flag("--flush", args_.flush,
                   "Allow FLUSHALL on the --url server (required with --url)");
    app_->footer(R"(
Every run starts on a flushed database, so by default it brings its own redis-server.
Examples:
  dlock market --seconds 3
  dlock market --variants watch,dlock-fine --loads 5/5 --json
  dlock --url redis://scratch:6379 market --flush)");
  }
  int run(const invocation& in) override {
    // Only an explicit --url, and only with --flush: every run begins with FLUSHALL.
    if (!in.target.urls.empty()) args_.url = resolve_url(in.target.urls);
    return market(args_);
  }

 private:
  market_args args_;
};

}  // namespace

std::unique_ptr<subcommand> add_market_command(CLI::App& app) {
  return std::make_unique<market_command>(app);
}

}  // namespace dlock::cli
