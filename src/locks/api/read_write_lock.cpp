// The public read-write lock types over the kinds in kinds/read_write.cpp, and the upgrade of a
// read hold.
#include "dlock/read_write_lock.hpp"

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "locks/runtime/lock_core.hpp"

namespace dlock {

using detail::lock_core;
using detail::steady;

read_write_lock::read_write_lock(std::shared_ptr<lock_core> core, std::string name)
    : core_(std::move(core)), name_(std::move(name)) {}

read_lock read_write_lock::read() const {
  return read_lock(core_, name_);
}

write_lock read_write_lock::write() const {
  return write_lock(core_, name_);
}

read_lock::read_lock(std::shared_ptr<lock_core> core, std::string name)
    : basic_lock(std::move(core), std::move(name), detail::read_kind()) {}

write_lock::write_lock(std::shared_ptr<lock_core> core, std::string name)
    : basic_lock(std::move(core), std::move(name), detail::write_kind()) {}

namespace {

// What upgrading `hold` acquires: the upgrade kind, owned by the reader ("<client>:<owner>"
// becomes "<client>:<owner>:write"), with the read hold's lease mode. Throws
// errc::invalid_argument unless `hold` is a live read hold of `reads`' lock through its client.
struct upgrade_plan {
  detail::lock_handle handle;
  lease_options options;
};

void plan_upgrade(const detail::lock_handle& reads,
                  const std::shared_ptr<detail::lease_state>& hold, upgrade_plan& plan) {
  auto& core = *reads.core;
  const auto& name = reads.names->name;
  if (!hold || hold->core.get() != &core || &hold->g->kind != &detail::read_kind() ||
      hold->g->names->name != name || !core.grants().valid(*hold->g, steady::now())) {
    throw error(errc::invalid_argument,
                "upgrade needs a live read hold of '" + name + "' taken through this client");
  }
  plan.options.owner = hold->g->owner.substr(core.id().size() + 1);
  if (!hold->g->watchdog) plan.options.lease_time = core.grants().lease_time(*hold->g);
  plan.handle.core = reads.core;
  plan.handle.kind = &detail::upgrade_kind();
  plan.handle.names = reads.names;
}

}  // namespace

namespace detail {

acquire_handle start_upgrade(const lock_handle& reads, const std::shared_ptr<lease_state>& hold,
                             std::chrono::milliseconds wait, acquire_callback& done) {
  upgrade_plan plan;
  plan_upgrade(reads, hold, plan);
  auto request = reads.core->make_request(plan.handle, plan.options, limits_for_wait(wait), {});
  request.done = std::move(done);
  return reads.core->acquire(std::move(request));
}

}  // namespace detail

lease read_lock::upgrade(const lease& read_hold, std::chrono::milliseconds wait) {
  upgrade_plan plan;
  plan_upgrade(*handle_, detail::lease_state::of(read_hold), plan);
  const auto now = steady::now();
  return handle_->core->acquire_until(plan.handle, plan.options,
                                      wait.count() <= 0 ? now : detail::saturating_add(now, wait));
}

acquire_handle read_lock::upgrade_async(const lease& read_hold, std::chrono::milliseconds wait,
                                        acquire_callback done) {
  try {
    return detail::start_upgrade(*handle_, detail::lease_state::of(read_hold), wait, done);
  } catch (const error& e) {
    detail::report_on_io_thread<acquire_result>(handle_->core->io(), std::move(done), e);
    return {};
  }
}

}  // namespace dlock
