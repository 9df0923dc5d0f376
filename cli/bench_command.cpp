// dlock bench: dlock's locks beside references measured in the same run. The work is the
// scenario library's run_bench (bench/bench_run.hpp), shared with dlock_lock_bench; this file
// maps the command's options and failures and draws the progress line.
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>

#include "bench_run.hpp"
#include "cli.hpp"
#include "embedded/redis_server.hpp"
#include "progress_line.hpp"

namespace dlock::cli {

int bench(const bench_args& args) {
  bench::bench_run_options o;
  o.scenarios = args.scenarios;
  o.url = args.url;
  o.seconds = args.seconds;
  o.rounds = 0;  // from --seconds: one interleaved slice per 0.25 s, 1 to 6
  o.json = args.json;
  o.plot_dir = args.plot_dir;
  o.topology = args.topology;

  progress_line line("dlock bench");  // erased on the way out, whatever happens
  std::ostringstream results;
  try {
    bench::run_bench(
        o, results, [&](std::string_view m) { line.show(m); },
        [&](std::string_view m) { line.warn(m); });
  } catch (const bench::bench_usage_error& e) {
    throw failure(exit_usage, std::string("bench: ") + e.what());
  } catch (const bench::missing_program& e) {
    throw failure(exit_unavailable, std::string("bench: ") + e.what());
  } catch (const embedded::server_error& e) {
    throw failure(exit_unavailable, std::string("bench: ") + e.what());
  }
  line.clear();
  std::cout << results.str() << std::flush;
  return exit_ok;
}

}  // namespace dlock::cli
