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

}  // namespace

std::string format_results_table(const std::vector<scenario_result>& results, bool with_extra) {
  text_table table;
  table.header = {"scenario",     "metric",           "dlock", "reference", "ratio",
                  "reference is", "target (DESIGN 6)"};
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
    for (const auto& e : r.extra) {
      const std::pair<std::string, std::string> kv{e.key, value_text(e.value)};
      if (std::find(shown.begin(), shown.end(), kv) != shown.end()) continue;
      shown.push_back(kv);
      block += "    " + kv.first + " = " + kv.second + "\n";
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
}

}  // namespace dlock::bench
