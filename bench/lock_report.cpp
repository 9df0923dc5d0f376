// Formatting of lock benchmark results (as text or JSON); the caller decides where it goes.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>

#include <nlohmann/json.hpp>

#include "bench_support.hpp"
#include "lock_scenarios.hpp"

namespace dlock::bench {

namespace {

std::string number(double v) {
  const double a = std::fabs(v);
  if (a >= 1000 || (a < 1e15 && v == std::floor(v))) return format("%.0f", v);
  if (a >= 10) return format("%.1f", v);
  return format("%.3g", v);
}

std::string value_text(const std::variant<double, std::string>& v) {
  return std::visit(
      [](const auto& x) -> std::string {
        if constexpr (std::is_same_v<std::decay_t<decltype(x)>, double>) {
          return number(x);
        } else {
          return x;
        }
      },
      v);
}

// "p1", "p2.5", "p99.99": the key of a percentile in JSON.
std::string percentile_key(double p) {
  return format("p%g", p);
}

// A few percentiles of a distribution, for the table.
std::string distribution_text(const distribution& d) {
  const auto& ps = distribution_percentiles();
  std::string text;
  for (const double want : {50.0, 90.0, 99.0, 99.9}) {
    const auto at = std::find(ps.begin(), ps.end(), want);
    const auto i = static_cast<std::size_t>(at - ps.begin());
    if (at == ps.end() || i >= d.values.size()) continue;
    text += format("%s %s, ", percentile_key(want).c_str(), number(d.values[i]).c_str());
  }
  return text + format("%zu samples", d.samples);
}

nlohmann::ordered_json distribution_json(const distribution& d) {
  nlohmann::ordered_json j{{"samples", d.samples}};
  const auto& ps = distribution_percentiles();
  for (std::size_t i = 0; i < d.values.size() && i < ps.size(); ++i) {
    j[percentile_key(ps[i])] = d.values[i];
  }
  return j;
}

}  // namespace

std::string format_results_table(const std::vector<scenario_result>& results, bool with_extra) {
  text_table table;
  table.header = {"scenario",
                  "metric",
                  "dlock",
                  "reference",
                  "ratio",
                  "reference is",
                  "target (docs/design.md)"};
  table.align = "llrrrll";
  for (const auto& r : results) {
    table.rows.push_back({r.name, r.metric, number(r.dlock), number(r.reference),
                          format("%.2f", r.ratio), r.reference_name, r.target});
  }
  auto text = table.render();
  if (!with_extra) return text;
  text += "\n";
  // Rows of one scenario often share extra fields: show each field once per scenario name.
  std::string current;
  std::vector<std::pair<std::string, std::string>> shown;
  for (const auto& r : results) {
    if (r.name != current) {
      current = r.name;
      shown.clear();
    }
    std::string block;
    const auto show = [&](std::string key, std::string value) {
      const std::pair<std::string, std::string> kv{std::move(key), std::move(value)};
      if (std::find(shown.begin(), shown.end(), kv) != shown.end()) return;
      block += "    " + kv.first + " = " + kv.second + "\n";
      shown.push_back(kv);
    };
    for (const auto& e : r.extra)
      show(e.key, value_text(e.value));
    if (r.dlock_latency_us) show("latency_us dlock", distribution_text(*r.dlock_latency_us));
    if (r.reference_latency_us) {
      show("latency_us " + r.reference_name, distribution_text(*r.reference_latency_us));
    }
    if (!block.empty()) text += r.name + " [" + r.metric + "]\n" + block;
  }
  return text;
}

void to_json(nlohmann::ordered_json& j, const scenario_result& r) {
  j = nlohmann::ordered_json{{"name", r.name},
                             {"metric", r.metric},
                             {"dlock", r.dlock},
                             {"reference", r.reference},
                             {"reference_name", r.reference_name},
                             {"ratio", r.ratio},
                             {"target", r.target}};
  for (const auto& e : r.extra) {
    std::visit([&](const auto& x) { j[e.key] = x; }, e.value);
  }
  if (r.dlock_latency_us || r.reference_latency_us) {
    auto latency = nlohmann::ordered_json::object();
    if (r.dlock_latency_us) latency["dlock"] = distribution_json(*r.dlock_latency_us);
    if (r.reference_latency_us) latency["reference"] = distribution_json(*r.reference_latency_us);
    j["latency_us"] = std::move(latency);
  }
}

}  // namespace dlock::bench
