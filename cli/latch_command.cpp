// dlock latch: a countdown latch from the shell (Redisson's RCountDownLatch layout), so that
// scripts on several machines can wait until N pieces of work are done:
//   dlock latch NAME set N | down | wait [--wait DUR]
#include <CLI/CLI.hpp>
#include <iostream>

#include "cli.hpp"
#include "dlock/latch.hpp"

namespace dlock::cli {

namespace {

std::int64_t count_operand(const std::vector<std::string>& operands) {
  if (operands.size() != 1) {
    throw failure(exit_usage, "latch: set takes one count (dlock latch NAME set N)");
  }
  const auto& text = operands.front();
  const auto n = positive_count(text);
  if (!n)
    throw failure(exit_usage, "latch: set needs a count from 1 to 2^63-1, got '" + text + "'");
  return *n;
}

// Runs `dlock latch NAME set N | down | wait [--wait DUR]`: 0 (set: it was set; down: the count
// after it printed; wait: the count is 0), 1 (set: the latch exists), 75 (wait: not 0 within
// --wait); failure(exit_usage) for bad operands, dlock::error for the server's refusals.
int latch(const dlock::client_options& target, const std::string& name, const std::string& action,
          const std::vector<std::string>& operands, const std::string& wait_text) {
  // Every usage error is reported before connecting.
  if (action != "set" && !operands.empty()) {
    throw failure(exit_usage, "latch: " + action + " takes no operand after it");
  }
  if (action != "wait" && !wait_text.empty()) {
    throw failure(exit_usage, "latch: --wait applies to wait only");
  }
  const std::int64_t count = action == "set" ? count_operand(operands) : 0;
  const auto wait =
      wait_text.empty() ? std::chrono::milliseconds::max() : duration_flag("--wait", wait_text);
  if (!target.redlock.masters.empty()) {
    throw failure(exit_usage, "latch: latches are not available over RedLock's masters");
  }

  const auto c = connect(target);
  auto l = c.latch(name);
  if (action == "set") {
    if (!l.try_set_count(count)) {
      // Not atomic with the attempt: the count may have moved since, which is why it is only
      // shown, never acted on.
      throw failure(
          1, "latch '" + name + "' already exists (count " + std::to_string(l.count()) + ")");
    }
    return exit_ok;
  }
  if (action == "down") {
    l.count_down();
    // The count read just after: a count-down elsewhere at the same moment may be in it too.
    std::cout << l.count() << std::endl;
    return exit_ok;
  }
  if (l.wait_for(wait)) return exit_ok;
  throw failure(exit_not_acquired,
                "latch '" + name + "' did not reach 0" +
                    (wait.count() > 0 ? " within " + wait_text : std::string(" (checked once)")));
}

class latch_command final : public subcommand {
 public:
  explicit latch_command(CLI::App& app)
      : subcommand(app.add_subcommand(
            "latch", "A countdown latch: set it to N, count it down, wait until it reaches 0")) {
    app_->footer(R"(
  Actions:
    set N   sets the count to N (at least 1) if the latch does not exist; exit 1 if it does
    down    counts down by one and prints the count after it; at 0 the latch is deleted and every
            waiter wakes (counting down a latch that does not exist does nothing)
    wait    waits until the count is 0 (a latch that does not exist is at 0); exit 75 if --wait
            ends first
  The layout is Redisson's RCountDownLatch (the string NAME holds the count; the channel
  redisson_countdownlatch__channel__{NAME} wakes waiters), so dlock and Redisson share latches.
  A name holding anything else is refused with exit 65 and left alone.

  Examples:
    dlock latch import-42 set 3
    dlock latch import-42 down                       in each of the 3 jobs, when it is done
    dlock latch import-42 wait --wait 30m && ./publish.sh)");
    app_->add_option("--wait", wait_text_,
                     "wait: how long to wait for 0 (default: forever; 0 = check once)")
        ->type_name("DUR");
    app_->add_option("name", name_, "Latch name")->required();
    app_->add_option("action", action_, "set, down or wait")
        ->required()
        ->check(CLI::IsMember({"set", "down", "wait"}));
    app_->add_option("count", operands_, "set: the count")->type_name("N");
  }
  int run(const invocation& in) override {
    return latch(resolve_target(in.target), name_, action_, operands_, wait_text_);
  }

 private:
  std::string name_;
  std::string action_;                 // set, down or wait
  std::vector<std::string> operands_;  // what follows the action: set's count
  std::string wait_text_;              // wait's --wait; empty: forever
};

}  // namespace

std::unique_ptr<subcommand> add_latch_command(CLI::App& app) {
  return std::make_unique<latch_command>(app);
}

}  // namespace dlock::cli
