// dlock status NAME: what a name holds, its holders, TTL, fence and waiters.
#include <CLI/CLI.hpp>
#include <iostream>

#include "cli.hpp"
#include "display.hpp"
#include "lock_view.hpp"

namespace dlock::cli {
namespace {

int status(const client_options& target, const std::string& name, bool json) {
  const auto c = connect_to(target);
  const auto s = inspect(c, name);
  const auto& info = s.info;
  if (json) {
    std::cout << to_json(name, s).dump() << "\n";
    return exit_ok;
  }
  std::cout << "lock     " << escaped(name) << "\n"
            << "kind     " << kind_text(s) << "\n";
  if (!s.mode.empty()) std::cout << "mode     " << s.mode << "\n";
  if (s.kind == "leased-semaphore") {
    std::cout << "permits  " << permits_text(*s.permits) << "\n";
  } else if (s.permits) {
    for (std::size_t i = 0; i < s.permits->holders.size(); ++i) {
      std::cout << (i == 0 ? "taken by " : "         ") << s.permits->holders[i].first << " "
                << identity_text(s.permits->holders[i].second) << "\n";
    }
  } else if (info.holders.empty()) {
    std::cout << "holders  -\n";
  } else {
    // The owner as the server keeps it, and under it who that is, where its client recorded it.
    for (std::size_t i = 0; i < info.holders.size(); ++i) {
      const auto& h = info.holders[i];
      std::cout << (i == 0 ? "holders  " : "         ") << escaped(h.owner) << " (" << h.holds
                << (h.holds == 1 ? " hold)" : " holds)") << "\n";
      if (h.identity) std::cout << "         " << identity_text(*h.identity) << "\n";
    }
  }
  if (s.kind == "fair") std::cout << "queue    " << queue_text(info) << "\n";
  std::cout << "ttl      " << ttl_text(info.ttl) << "\n"
            << "fence    " << info.fence << "\n"
            << "waiters  " << info.waiters << "\n";
  return exit_ok;
}

class status_command final : public subcommand {
 public:
  explicit status_command(CLI::App& app)
      : subcommand(app.add_subcommand(
            "status", "Show a lock or semaphore: kind, holders, TTL, fence, waiters")) {
    app_->add_option("name", name_, "Lock name")->required();
    app_->add_flag("--json", json_, "Print JSON (schema: docs/cli.md)");
    app_->footer(
        "\nKinds: reentrant, simple, fair (and its queue), read-write (and its mode), leased "
        "semaphore (free and leased permits), semaphore or latch (a bare count), free.\n"
        "Examples:\n  dlock status nightly-report\n  dlock status deploy --json");
  }
  int run(const invocation& in) override { return status(resolve_target(in.target), name_, json_); }

 private:
  std::string name_;
  bool json_ = false;
};

}  // namespace

std::unique_ptr<subcommand> add_status_command(CLI::App& app) {
  return std::make_unique<status_command>(app);
}

}  // namespace dlock::cli
