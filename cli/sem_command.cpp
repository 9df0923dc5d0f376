// dlock sem: run a command holding one leased permit of a semaphore, as `dlock run` holds a lock
// (the same process handling: run_holding, in run_supervisor.cpp).
#include <CLI/CLI.hpp>
#include <cstdint>

#include "cli.hpp"
#include "dlock/semaphore.hpp"

namespace dlock::cli {
namespace {

class sem_command final : public subcommand {
 public:
  explicit sem_command(CLI::App& app)
      : subcommand(app.add_subcommand(
            "sem", "Run CMD holding one leased permit of the semaphore NAME (at most N at once)")) {
    app_->footer(R"(
Takes one permit of the leased semaphore NAME (Redisson's RPermitExpirableSemaphore layout),
runs CMD with DLOCK_NAME, DLOCK_PERMIT (the permit's id, 32 hex digits) and DLOCK_FENCE (the
grant's fencing token) in its environment, and gives the permit back when CMD and everything it
started have exited, exiting with CMD's status. --permits N creates the semaphore with N permits
if it does not exist yet; an existing semaphore keeps its count. The permit is a watchdog lease
of --ttl, renewed while CMD runs, and comes back by itself at most --ttl after dlock dies. Signals
and a lost permit are handled as by dlock run: not acquired within --wait: exit 75 (or
--conflict-exit-code); lost: CMD and its descendants are stopped and dlock exits 76 (or
--lost-exit-code).

Examples:
  dlock sem encoders --permits 4 -- ./encode.sh input.mov
  dlock sem --wait 0 api-quota --permits 10 -- ./call-api.sh     exit 75 at once if none is free)");
    app_->add_option("--permits", permits_,
                     "The semaphore's permits, set if it does not exist yet (an existing one "
                     "keeps its count)")
        ->required()
        ->check(CLI::Validator(
            [](std::string& text) -> std::string {
              return positive_count(text)
                         ? ""
                         : "expected a number of permits from 1 to 2^63-1, got '" + text + "'";
            },
            "POSITIVE"))
        ->type_name("N");
    flags_.add_to(*app_, "a permit");
    add_conflict_exit_code(*app_, conflict_exit_code_, "a permit");
    app_->add_option("name", name_, "Semaphore name")->required();
  }
  bool takes_command() const override { return true; }

  int run(const invocation& in) override {
    run_args args;
    flags_.apply(in, "sem", "dlock sem NAME --permits N -- CMD", args);
    if (!args.target.redlock.masters.empty()) {
      throw failure(exit_usage, "sem: semaphores are not available over RedLock's masters");
    }
    args.names = {name_};
    args.conflict_exit_code = conflict_exit_code_;
    holding_plan plan;
    plan.what = "a permit of " + name_;
    plan.name = name_;
    plan.busy = name_ + " has no free permit";
    plan.acquire = [name = name_, permits = permits_](
                       const dlock::client& c, std::chrono::milliseconds wait,
                       lease_options options, std::function<void(grant_result)> done) {
      auto semaphore = c.leased_semaphore(name);
      semaphore.try_set_permits(permits);  // only if it does not exist yet
      options.permits = 1;
      return acquire_lease(semaphore, wait, std::move(options), std::move(done));
    };
    plan.environment = [name = name_](const std::vector<lease>& leases) {
      const auto& permit = leases.front();
      return std::vector<std::string>{"DLOCK_NAME=" + name,
                                      "DLOCK_FENCE=" + std::to_string(permit.fence()),
                                      "DLOCK_PERMIT=" + permit.permit_id()};
    };
    return run_holding(args, plan);
  }

 private:
  std::string name_;
  std::int64_t permits_ = 0;
  int conflict_exit_code_ = exit_not_acquired;
  holding_flags flags_;
};

}  // namespace

std::unique_ptr<subcommand> add_sem_command(CLI::App& app) {
  return std::make_unique<sem_command>(app);
}

}  // namespace dlock::cli
