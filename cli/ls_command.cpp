// dlock ls [PATTERN]: every lock name on every master (SCAN, never KEYS), with its status.
#include <fnmatch.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <optional>

#include "cli.hpp"
#include "display.hpp"
#include "dlock/redis/client.hpp"
#include "lock_view.hpp"

namespace dlock::cli {
namespace {

// Lists the locks on every master (all of a cluster's).
int list(const client_options& target, const std::string& pattern, bool json, bool include_free) {
  const auto c = connect_to(target);
  nlohmann::json all = nlohmann::json::array();
  std::vector<std::pair<std::string, shown>> rows;
  std::vector<std::string> names;
  // RedLock keeps every lock on every master: a master that is down hides nothing, and each
  // name is listed once.
  const bool redlock = !target.redlock.masters.empty();
  std::optional<dlock::error> unreachable;
  std::size_t scanned = 0;
  for (auto* master : c.masters()) {
    try {
      auto more = scan_lock_names(c, *master);
      names.insert(names.end(), more.begin(), more.end());
      ++scanned;
    } catch (const dlock::error& e) {
      if (!redlock) throw;
      if (!unreachable) unreachable = e;
    }
  }
  if (scanned == 0 && unreachable) throw *unreachable;
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  for (const auto& name : names) {
    if (::fnmatch(pattern.c_str(), name.c_str(), 0) != 0) continue;
    auto s = inspect(c, name);
    if (include_free || in_use(s)) rows.emplace_back(name, std::move(s));
  }
  if (json) {
    for (const auto& [name, info] : rows)
      all.push_back(to_json(name, info));
    std::cout << nlohmann::json{{"locks", all}}.dump() << "\n";
    return exit_ok;
  }
  std::size_t width = 4, kind_width = 9;
  for (const auto& [name, s] : rows) {
    width = std::max(width, escaped(name).size());
    kind_width = std::max(kind_width, kind_text(s).size());
  }
  std::printf("%-*s  %-*s  %-9s  %16s  %7s  %s\n", static_cast<int>(width), "NAME",
              static_cast<int>(kind_width), "KIND", "TTL", "FENCE", "WAITERS", "HOLDERS");
  for (const auto& [name, s] : rows) {
    std::printf("%-*s  %-*s  %-9s  %16llu  %7lld  %s\n", static_cast<int>(width),
                escaped(name).c_str(), static_cast<int>(kind_width), kind_text(s).c_str(),
                ttl_text(s.info.ttl).c_str(), static_cast<unsigned long long>(s.info.fence),
                static_cast<long long>(s.info.waiters), details_text(s).c_str());
  }
  return exit_ok;
}

class ls_command final : public subcommand {
 public:
  explicit ls_command(CLI::App& app)
      : subcommand(app.add_subcommand(
            "ls", "List held locks and semaphores (SCAN, never KEYS) with status columns")) {
    app_->add_option("pattern", pattern_, "Glob on lock names (default *)");
    app_->add_flag("--all", all_,
                   "Also list free names (every name ever locked keeps its fence counter)");
    app_->add_flag("--json", json_, "Print JSON (schema: docs/cli.md)");
    app_->footer("\nExamples:\n  dlock ls\n  dlock ls 'deploy:*' --json\n  dlock ls --all");
  }
  int run(const invocation& in) override {
    return list(resolve_target(in.target), pattern_, json_, all_);
  }

 private:
  std::string pattern_ = "*";
  bool json_ = false;
  bool all_ = false;
};

}  // namespace

std::unique_ptr<subcommand> add_ls_command(CLI::App& app) {
  return std::make_unique<ls_command>(app);
}

}  // namespace dlock::cli
