// Charts of lock benchmark results: gnuplot data and scripts, drawn to PNG by gnuplot.
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <utility>

#include "bench_run.hpp"
#include "bench_support.hpp"
#include "embedded/redis_server.hpp"

namespace dlock::bench {

namespace {

namespace fs = std::filesystem;

// A gnuplot string literal in double quotes ("\n" in `s` stays a line break).
std::string gp_string(const std::string& s) {
  std::string q = "\"";
  for (const char c : s) {
    if (c == '\n') {
      q += "\\n";
    } else {
      if (c == '"' || c == '\\') q += '\\';
      q += c;
    }
  }
  return q + "\"";
}

// A gnuplot string literal in single quotes (no escapes: a quote is doubled).
std::string gp_path(const std::string& s) {
  std::string q = "'";
  for (const char c : s) {
    q += c;
    if (c == '\'') q += '\'';
  }
  return q + "'";
}

// The start of every script: a PNG terminal (cairo when this gnuplot has it), UTF-8, no
// "enhanced" text (names such as try_acquire must not turn into subscripts), and colours that
// stay apart on white.
std::string preamble(const std::string& name, int width, int height) {
  const std::string size = format("%d,%d", width, height);
  std::string s =
      "# Written by dlock bench; redraw with: gnuplot " + name + ".gp (in this directory)\n";
  s += "set encoding utf8\n";
  s += "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n";
  s += "  set terminal pngcairo size " + size + " noenhanced font 'sans,10'\n";
  s += "} else {\n";
  s += "  set terminal png size " + size + " noenhanced\n";
  s += "}\n";
  s += "set output " + gp_path(name + ".png") + "\n";
  s += "set datafile missing '?'\n";
  s += "set grid\n";
  int n = 0;
  for (const char* colour : {"#6a3d9a", "#009e73", "#0072b2", "#d55e00", "#b8860b", "#444444"}) {
    s += format("set linetype %d lc rgb '%s'\n", ++n, colour);
  }
  return s + format("set linetype cycle %d\n", n);
}

struct chart {
  std::string name;  // DIR/name.{dat,gp,png}
  std::string data;
  std::string script;
};

// ---- throughput against threads ----

std::optional<chart> throughput_chart(const std::vector<scenario_result>& results,
                                      const std::string& caption) {
  struct point {
    double dlock = 0;
    std::optional<double> same, ceiling;
  };
  std::map<int, point> points;
  std::string ceiling_name = "redis-benchmark ceiling";
  std::string title = "Lock+unlock throughput against threads: simple lock, one key per thread";
  for (const auto& r : results) {
    if (r.name.rfind("throughput.", 0) != 0) continue;
    const auto threads = std::find_if(r.extra.begin(), r.extra.end(),
                                      [](const extra_field& e) { return e.key == "threads"; });
    if (threads == r.extra.end() || !std::holds_alternative<double>(threads->value)) continue;
    if (r.name.rfind("throughput.try_acquire.", 0) == 0) {
      title =
          "Lock+unlock throughput against threads: simple lock through try_acquire(), one "
          "key per thread";
    }
    auto& p = points[static_cast<int>(std::get<double>(threads->value))];
    p.dlock = r.dlock;
    if (r.reference_name.find("(ceiling)") != std::string::npos) {
      p.ceiling = r.reference;
      ceiling_name = r.reference_name;
    } else if (r.reference_name.rfind("redis-benchmark", 0) == 0) {
      p.same = r.reference;
    }
  }
  if (points.empty()) return std::nullopt;

  chart c{"throughput", "", ""};
  c.data =
      "# lock+unlock pairs/s by thread count; '?' = not measured\n"
      "# threads  dlock  redis-benchmark_-c_N_-P_1  " +
      ceiling_name + "\n";
  const auto cell = [](const std::optional<double>& v) {
    return v ? format("%.1f", *v) : std::string("?");
  };
  for (const auto& [threads, p] : points) {
    c.data +=
        format("%d %.1f %s %s\n", threads, p.dlock, cell(p.same).c_str(), cell(p.ceiling).c_str());
  }
  c.script = preamble("throughput", 1000, 620) + "set title " + gp_string(title + "\n" + caption) +
             "\n"
             "set xlabel 'threads sharing one dlock client  =  redis-benchmark clients (-c N)'\n"
             "set ylabel 'lock+unlock pairs per second (higher is better)'\n"
             "set logscale x 2\n"
             "set offsets graph 0.05, graph 0.05, 0, 0\n"
             "set yrange [0:*]\n"
             "set key top left box opaque\n"
             "plot 'throughput.dat' using 1:2:xtic(1) with linespoints lw 2 pt 7 ps 1.3 "
             "title 'dlock: one client, N threads', \\\n"
             "     '' using 1:3 with linespoints lw 2 pt 5 ps 1.3 "
             "title 'redis-benchmark -c N -P 1, same scripts', \\\n"
             "     '' using 1:4 with linespoints lw 2 dt 2 pt 9 ps 1.3 title " +
             gp_path(ceiling_name + ", same scripts") + "\n";
  return c;
}

// ---- latency distributions ----

struct series {
  std::string label;
  bool reference = false;
  const distribution* d = nullptr;
};

std::optional<chart> latency_chart(const std::vector<scenario_result>& results,
                                   const std::string& scenario, const std::string& what,
                                   const std::string& why_negative, const std::string& caption) {
  std::vector<series> all;
  const auto add = [&](std::string label, bool reference, const std::optional<distribution>& d) {
    if (!d || d->values.empty()) return;
    for (const auto& s : all)
      if (s.label == label) return;
    all.push_back({std::move(label), reference, &*d});
  };
  const std::string prefix = scenario + ".";
  for (const auto& r : results) {
    if (r.name.rfind(prefix, 0) != 0) continue;
    add("dlock " + r.name.substr(prefix.size()), false, r.dlock_latency_us);
    add(r.reference_name, true, r.reference_latency_us);
  }
  if (all.empty()) return std::nullopt;
  // dlock's variants first, then the references.
  std::stable_partition(all.begin(), all.end(), [](const series& s) { return !s.reference; });

  chart c{"latency_" + scenario, "", ""};
  const auto& ps = distribution_percentiles();
  const auto at = [&](const series& s, double p) {
    const auto i = static_cast<std::size_t>(std::find(ps.begin(), ps.end(), p) - ps.begin());
    return i < s.d->values.size() ? s.d->values[i] : 0.0;
  };
  c.data = "# " + what + ": latency in microseconds at each percentile\n" +
           "# percentile  tail_x=-log10(1-percentile/100)";
  for (const auto& s : all)
    c.data += "  \"" + s.label + "\"";
  c.data += "\n";
  bool non_positive = false;
  for (std::size_t i = 0; i < ps.size(); ++i) {
    c.data += format("%g %.5f", ps[i], -std::log10(1 - ps[i] / 100));
    for (const auto& s : all) {
      const double v = i < s.d->values.size() ? s.d->values[i] : 0;
      non_positive = non_positive || v <= 0;
      c.data += format(" %.2f", v);
    }
    c.data += "\n";
  }

  std::string counts;
  for (const auto& s : all)
    counts += (counts.empty() ? "" : ", ") + s.label + format(": %zu", s.d->samples);
  std::string title = what + " (µs)\n" + caption + "\nsamples: " + counts;
  // The CDF shows the body (the tail is the right-hand panel's): through the 99th percentile on
  // a log scale, or, when some latencies are at or below 0, through the 95th on a linear one.
  std::string cdf_axis;
  if (!non_positive) {
    double lo = 1e300, hi = 0;
    for (const auto& s : all) {
      lo = std::min(lo, at(s, 1));
      hi = std::max(hi, at(s, 99));
    }
    lo /= 1.25;
    hi *= 1.25;
    // Tics at 1, 2 and 5 of each decade: a range within one or two decades gets labels too.
    std::string tics;
    for (double decade = std::pow(10, std::floor(std::log10(std::max(lo, 1e-3)))); decade <= hi;
         decade *= 10) {
      for (const double m : {1, 2, 5}) {
        if (m * decade < lo || m * decade > hi) continue;
        tics += (tics.empty() ? "" : ", ") + format("%g", m * decade);
      }
    }
    cdf_axis =
        "set title 'CDF through the 99th percentile: share of samples at or below a "
        "latency'\n"
        "set xlabel 'latency (µs, log scale)'\n"
        "set logscale x\n" +
        format("set xrange [%.2f:%.2f]\n", lo, hi) +
        (tics.empty() ? std::string() : "set xtics (" + tics + ")\n");
  } else {
    title += "\nsome latencies are <= 0 (" + why_negative +
             "): the tail panel, on a log scale, leaves those out";
    double lo = 0, hi = 1;
    for (const auto& s : all) {
      lo = std::min(lo, at(s, 1));
      hi = std::max(hi, at(s, 95));
    }
    const double margin = (hi - lo) * 0.05;
    cdf_axis =
        "set title 'CDF through the 95th percentile: share of samples at or below a "
        "latency'\n"
        "set xlabel 'latency (µs, linear)'\n" +
        format("set xrange [%.2f:%.2f]\n", lo - margin, hi + margin) +
        "set arrow 1 from 0, graph 0 to 0, graph 1 nohead dt 3 lw 1.5\n";
  }
  const std::string file = gp_path(c.name + ".dat");
  const auto plot = [&](bool cdf) {
    std::string p = "plot ";
    for (std::size_t k = 0; k < all.size(); ++k) {
      const auto& s = all[k];
      const std::string col = std::to_string(k + 3);
      if (k > 0) p += ", \\\n     ";
      p += (k == 0 ? file : std::string("''")) + " using " +
           (cdf ? col + ":1" : "2:(column(" + col + ") > 0 ? column(" + col + ") : NaN)") +
           " with linespoints lw 2 ps 0.6 pt " + std::to_string(s.reference ? 6 : 7) +
           (s.reference ? " dt 2" : "") + " title " + gp_path(s.label);
    }
    return p + "\n";
  };
  c.script = preamble(c.name, 1400, 660) + "set multiplot layout 1,2 title " + gp_string(title) +
             "\nset key spacing 1.5\n" + "# Left: the distribution as a CDF.\n" + cdf_axis +
             "set ylabel 'percentile (%)'\n"
             "set yrange [0:100]\n"
             "set ytics 10\n"
             "set key bottom right box opaque\n" +
             plot(true) +
             "# Right: the tail, one decade of percentiles per step.\n"
             "unset logscale x\n"
             "unset arrow 1\n"
             "set xtics auto\n"
             "set title 'Tail: latency at each percentile'\n"
             "set xlabel 'percentile (log scale of 1/(1 - p))'\n"
             "set ylabel 'latency (µs, log scale)'\n"
             "set logscale y\n"
             "set yrange [*:*]\n"
             "set ytics auto\n"
             "set xrange [0:4]\n"
             "set xtics ('0' 0, '50' log10(2), '90' 1, '99' 2, '99.9' 3, '99.99' 4)\n"
             "set key top left box opaque\n" +
             plot(false) + "unset multiplot\n";
  return c;
}

}  // namespace

std::vector<std::string> write_plots(const std::vector<scenario_result>& results,
                                     const plot_settings& settings, const progress_callback& warn) {
  const auto warning = [&](const std::string& m) {
    if (warn) warn(m);
  };
  std::vector<chart> charts;
  for (auto c :
       {throughput_chart(results, settings.caption),
        latency_chart(results, "uncontended", "Uncontended lock+unlock: one pair's latency",
                      "clock steps", settings.caption),
        latency_chart(results, "handoff",
                      "Hand-off under contention: release() returning -> the next "
                      "holder's acquisition returning",
                      "the next holder's reply can arrive before the releaser's",
                      settings.caption)}) {
    if (c) charts.push_back(std::move(*c));
  }
  if (charts.empty()) return {};

  const fs::path dir(settings.dir);
  for (const auto& c : charts) {
    for (const auto& [ext, text] : {std::pair{".dat", &c.data}, std::pair{".gp", &c.script}}) {
      std::ofstream f(dir / (c.name + ext));
      f << *text;
      if (!f.flush()) {
        warning("cannot write " + (dir / (c.name + ext)).string() + "; no charts drawn");
        return {};
      }
    }
  }
  if (!embedded::server_available(settings.gnuplot)) {
    warning(settings.gnuplot +
            " not found (Debian: apt-get install gnuplot-nox): wrote the charts' "
            "data and scripts to " +
            settings.dir + " but no PNG");
    return {};
  }

  std::vector<std::string> drawn;
  for (const auto& c : charts) {
    const auto png = dir / (c.name + ".png");
    std::error_code ec;
    fs::remove(png, ec);
    std::string problem;
    try {
      const auto r =
          run_and_capture({settings.gnuplot, "-e", "cd " + gp_path(settings.dir), c.name + ".gp"},
                          std::chrono::seconds(60));
      if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0 || !fs::exists(png)) {
        problem = r.text.substr(0, r.text.find_last_not_of(" \n") + 1);
        std::replace(problem.begin(), problem.end(), '\n', ' ');
        if (problem.size() > 200) problem = problem.substr(0, 200) + "...";
        if (problem.empty()) problem = "no PNG";
      }
    } catch (const std::exception& e) {
      problem = e.what();
    }
    if (problem.empty()) {
      drawn.push_back(png.string());
    } else {
      warning(settings.gnuplot + " failed on " + (dir / (c.name + ".gp")).string() + ": " +
              problem);
    }
  }
  return drawn;
}

}  // namespace dlock::bench
