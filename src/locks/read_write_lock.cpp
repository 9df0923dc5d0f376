// The public read-write lock types over the kinds in kinds/read_write.cpp, and the upgrade of a
// read hold.
#include "dlock/read_write_lock.hpp"

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "locks/lock_core.hpp"

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

lease read_lock::upgrade(const lease& read_hold, std::chrono::milliseconds wait) {
  const auto& hold = detail::lease_state::of(read_hold);
  auto& core = *handle_->core;
  if (!hold || hold->core.get() != &core || &hold->g->kind != &detail::read_kind() ||
      hold->g->names->name != name() || !read_hold.valid()) {
    throw error(errc::invalid_argument,
                "upgrade needs a live read hold of '" + name() + "' taken through this client");
  }
  // The write hold is owned by the reader: "<client>:<owner>" becomes "<client>:<owner>:write".
  lease_options options;
  options.owner = hold->g->owner.substr(core.id().size() + 1);
  if (!hold->g->watchdog) options.lease_time = core.grants().lease_time(*hold->g);
  detail::lock_handle upgrade;
  upgrade.core = handle_->core;
  upgrade.kind = &detail::upgrade_kind();
  upgrade.names = handle_->names;
  const auto now = steady::now();
  return core.acquire_until(upgrade, options,
                            wait.count() <= 0 ? now : detail::saturating_add(now, wait));
}

read_write_lock client::read_write(std::string name) const {
  if (name.empty()) throw error(errc::invalid_argument, "lock name is empty");
  return read_write_lock(core_, std::move(name));
}

}  // namespace dlock
