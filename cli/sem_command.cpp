// dlock sem: run a command holding one leased permit of a semaphore, as `dlock run` holds a lock
// (the same process handling: run_holding in run_command.cpp).
#include <CLI/CLI.hpp>
#include <cstdint>

#include "cli.hpp"
#include "dlock/semaphore.hpp"

namespace dlock::cli {

void add_sem_command(CLI::App& app, sem_options& o) {
  auto* cmd = app.add_subcommand(
      "sem", "Run CMD holding one leased permit of the semaphore NAME (at most N at once)");
  o.cmd = cmd;
  cmd->footer(R"(
Takes one permit of the leased semaphore NAME (Redisson's RPermitExpirableSemaphore layout),
runs CMD with DLOCK_NAME, DLOCK_PERMIT (the permit's id, 32 hex digits) and DLOCK_FENCE (the
grant's fencing token) in its environment, and gives the permit back when CMD and everything it
started have exited, exiting with CMD's status. --permits N creates the semaphore with N permits
if it does not exist yet; an existing semaphore keeps its count. The permit is a watchdog lease
of --ttl, renewed while CMD runs, and comes back by itself at most --ttl after dlock dies. Signals
and a lost permit are handled as by dlock run: not acquired within --wait: exit 75; lost: CMD and
its descendants are stopped and dlock exits 76 (or --lost-exit-code).

Examples:
  dlock sem encoders --permits 4 -- ./encode.sh input.mov
  dlock sem --wait 0 api-quota --permits 10 -- ./call-api.sh     exit 75 at once if none is free)");
  cmd->add_option("--permits", o.permits,
                  "The semaphore's permits, set if it does not exist yet (an existing one keeps "
                  "its count)")
      ->required()
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            return positive_count(text)
                       ? ""
                       : "expected a number of permits from 1 to 2^63-1, got '" + text + "'";
          },
          "POSITIVE"))
      ->type_name("N");
  cmd->add_option("--wait", o.wait_text,
                  "How long to wait for a permit (default: forever; 0 = one attempt)")
      ->type_name("DUR");
  cmd->add_option("--ttl", o.ttl_text, "The permit's lease, renewed while CMD runs (default 30s)")
      ->type_name("DUR");
  cmd->add_option("--grace", o.grace_text,
                  "After a lost permit, SIGTERM then SIGKILL after this (default 10s)")
      ->type_name("DUR");
  cmd->add_option("--lost-exit-code", o.lost_exit_code,
                  "Exit with this instead of 76 when the permit was lost")
      ->check(CLI::Range(1, 255))
      ->type_name("N");
  cmd->add_option("name", o.name, "Semaphore name")->required();
}

int sem(const sem_options& o, const target_flags& target, const std::vector<std::string>& command,
        bool has_separator) {
  if (!has_separator) {
    throw failure(exit_usage,
                  "sem: missing '--' before the command (dlock sem NAME --permits N -- CMD)");
  }
  if (command.empty()) throw failure(exit_usage, "sem: no command after '--'");
  run_args args;
  args.target = resolve_target(target);
  if (!args.target.redlock.masters.empty()) {
    throw failure(exit_usage, "sem: semaphores are not available over RedLock's masters");
  }
  args.names = {o.name};
  args.command = command;
  if (!o.wait_text.empty()) args.wait = duration_flag("--wait", o.wait_text);
  args.ttl = duration_flag("--ttl", o.ttl_text);
  args.grace = duration_flag("--grace", o.grace_text);
  if (args.ttl < std::chrono::milliseconds(100)) {
    throw failure(exit_usage, "sem: --ttl must be at least 100ms");
  }
  args.lost_exit_code = o.lost_exit_code;

  holding_plan plan;
  plan.what = "a permit of " + o.name;
  plan.busy = o.name + " has no free permit";
  const auto name = o.name;
  const auto permits = o.permits;
  plan.acquire = [name, permits](const dlock::client& c, std::chrono::milliseconds wait,
                                 lease_options options, std::function<void(grant_result)> done) {
    auto semaphore = c.leased_semaphore(name);
    semaphore.try_set_permits(permits);  // only if it does not exist yet
    options.permits = 1;
    return acquire_lease(semaphore, wait, std::move(options), std::move(done));
  };
  plan.environment = [name](const std::vector<lease>& leases) {
    const auto& permit = leases.front();
    return std::vector<std::string>{"DLOCK_NAME=" + name,
                                    "DLOCK_FENCE=" + std::to_string(permit.fence()),
                                    "DLOCK_PERMIT=" + permit.permit_id()};
  };
  return run_holding(args, plan);
}

}  // namespace dlock::cli
