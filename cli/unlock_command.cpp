// dlock unlock --force NAME: deletes a lock whoever holds it and wakes its waiters; refuses
// anything that is not in a lock's layout.
#include <CLI/CLI.hpp>
#include <iostream>

#include "cli.hpp"
#include "display.hpp"
#include "dlock/lock.hpp"
#include "lock_view.hpp"

namespace dlock::cli {
namespace {

// `kind`: "" or the kind the operator confirms for a lock left without an expiry.
int force_unlock(const client_options& target, const std::string& name, const std::string& kind) {
  const auto c = connect_to(target);
  lock_info removed;
  try {
    // The kind confirms what a lock left without an expiry is; without it only unambiguous locks
    // are deleted (and the lock object's kind does not matter: the script judges the key).
    const auto check =
        kind.empty() ? force_unlock_check::layout_and_expiry : force_unlock_check::confirmed_kind;
    removed = kind == "simple" ? c.simple(name).force_unlock(check)
                               : c.reentrant(name).force_unlock(check);
  } catch (const dlock::error& e) {
    if (e.code() != errc::wrong_type) throw;
    throw failure(exit_not_a_lock, message_of(e) + "; nothing was deleted");
  }
  if (removed.type == lock_type::none) {
    std::cout << "no lock named " << escaped(name) << ": nothing removed\n";
    return exit_ok;
  }
  std::cout << "removed " << kind_name(removed.type) << " lock " << escaped(name) << " held by "
            << holders_text(removed) << ", ttl " << ttl_text(removed.ttl) << ", fence "
            << removed.fence << "; waiters woken\n";
  return exit_ok;
}

class unlock_command final : public subcommand {
 public:
  explicit unlock_command(CLI::App& app)
      : subcommand(app.add_subcommand(
            "unlock", "Delete a lock whoever holds it, wake its waiters, say what was removed")) {
    app_->add_option("name", name_, "Lock name")->required();
    app_->add_flag("--force", force_, "Required: the holder loses the lock")->required();
    app_->add_option("--kind", kind_,
                     "reentrant or simple: confirms that a key in that lock's layout but "
                     "without an expiry is a lock")
        ->check(CLI::IsMember({"reentrant", "simple"}))
        ->type_name("KIND");
    app_->footer(R"(
Only locks are deleted: a key that is not in a lock's layout (a list, a JSON string, a hash of
user fields, a counter) is refused with exit 65 and left alone; so is a lock-like key without an
expiry, unless --kind confirms it.
Example:
  dlock unlock --force nightly-report)");
  }
  int run(const invocation& in) override {
    return force_unlock(resolve_target(in.target), name_, kind_);
  }

 private:
  std::string name_, kind_;
  bool force_ = false;
};

}  // namespace

std::unique_ptr<subcommand> add_unlock_command(CLI::App& app) {
  return std::make_unique<unlock_command>(app);
}

}  // namespace dlock::cli
