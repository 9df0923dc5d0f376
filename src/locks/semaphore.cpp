// The public semaphore types: what they add to basic_lock (setting and adding permits, releasing
// by id, looking at them). Acquiring and releasing leases is basic_lock's, through the kinds in
// kinds/semaphore.cpp and kinds/leased_semaphore.cpp.
#include "dlock/semaphore.hpp"

#include "core/random.hpp"
#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock_lua_scripts.hpp"
#include "locks/awaitable_factory.hpp"
#include "locks/lock_core.hpp"
#include "locks/one_call.hpp"

namespace dlock {

using detail::lock_core;

namespace {

const script& release_script() {
  static const script s{std::string(lua::semaphore_release)};
  return s;
}
const script& info_script() {
  static const script s{std::string(lua::semaphore_info)};
  return s;
}

// A semaphore's count lives on one server: over RedLock's independent masters there is no one
// count to change or read (acquisitions refuse RedLock too).
void refuse_redlock(const detail::lock_handle& h) {
  if (!h.core->options().redlock.masters.empty()) {
    throw error(errc::invalid_argument,
                "a " + std::string(h.kind->name()) +
                    " cannot run over RedLock's independent masters; use a standalone, Sentinel "
                    "or cluster deployment");
  }
}

// Sets (`set`: only if absent) or adds to the free count, telling waiters; `done` learns whether
// it changed. Throws errc::invalid_argument over RedLock, having sent nothing.
void change_permits(const detail::lock_handle& h, std::int64_t permits, std::string_view how,
                    detail::result_callback<bool> done) {
  refuse_redlock(h);
  const auto& n = *h.names;
  const std::string count = std::to_string(permits);
  const std::string_view keys[] = {n.name, n.channel};
  const std::string_view args[] = {count, h.core->topo().publish_command(), how};
  h.core->call_async(
      release_script(), n.name, keys, args,
      detail::to_result<bool>([](const reply& r) { return r.integer() >= 1; }, std::move(done)));
}

bool change_permits(const detail::lock_handle& h, std::int64_t permits, std::string_view how) {
  return detail::wait_for_result<bool>(h.core->io(), [&](detail::result_callback<bool> done) {
    change_permits(h, permits, how, std::move(done));
  });
}

// Gives back `permits` permits (Redisson's release: anyone may). Throws errc::invalid_argument
// for fewer than one, or over RedLock, having sent nothing.
void give_back(const detail::lock_handle& h, std::int64_t permits,
               detail::result_callback<void> done) {
  if (permits < 1) throw error(errc::invalid_argument, "release at least one permit");
  change_permits(h, permits, "add", [done = std::move(done)](call_result<bool> r) {
    detail::deliver<void>(done, {r.error, std::move(r.message)});
  });
}

semaphore_info read_info(const detail::lock_handle& h) {
  refuse_redlock(h);
  const auto& n = *h.names;
  const std::string_view keys[] = {n.name, n.aux_key1.empty() ? n.name : n.aux_key1};
  const auto r = h.core->call(info_script(), n.name, keys, {});
  semaphore_info info;
  info.exists = r.at(0).integer() == 1;
  info.available = r.at(1).integer();
  const auto now = r.at(2).integer();
  const auto& e = r.elements();
  for (std::size_t i = 3; i + 1 < e.size(); i += 2) {
    const auto expiry = e[i + 1].integer();
    // Redisson marks a permit taken without expiry with a score far in the future.
    const auto left = expiry >= 900'000'000'000'000
                          ? std::chrono::milliseconds::max()
                          : std::chrono::milliseconds(std::max<std::int64_t>(0, expiry - now));
    // An expired permit is free already: the next acquisition reclaims it.
    if (left.count() == 0) ++info.available;
    info.leased.emplace_back(detail::to_hex(e[i].str()), left);
  }
  const std::string_view numsub[] = {"PUBSUB", h.core->topo().numsub_command(), n.channel};
  info.waiters = h.core->command(n.channel, numsub).at(1).integer();
  return info;
}

// Releases the permits whose ids `permit_id` holds (hex), from any process; `done` learns whether
// they were held. Throws errc::invalid_argument for an id that is not whole permits in hex, or
// over RedLock, having sent nothing.
void release_by_id(const detail::lock_handle& h, std::string_view permit_id,
                   detail::result_callback<bool> done) {
  const auto ids = detail::from_hex(permit_id);
  if (!ids || ids->empty() || ids->size() % 16 != 0) {
    throw error(errc::invalid_argument,
                "a permit id is 32 hex digits per permit, as lease::permit_id() gives it");
  }
  refuse_redlock(h);
  static const script release{std::string(lua::leased_release)};
  const auto& n = *h.names;
  const std::string_view keys[] = {n.name, n.aux_key1, n.channel};
  const std::string_view args[] = {*ids, h.core->topo().publish_command()};
  h.core->call_async(
      release, n.name, keys, args,
      detail::to_result<bool>([](const reply& r) { return r.is_integer(); }, std::move(done)));
}

void require_count(std::int64_t permits, bool allow_negative) {
  if (permits < 0 && !allow_negative) {
    throw error(errc::invalid_argument, "a permit count cannot be negative");
  }
}

}  // namespace

semaphore::semaphore(std::shared_ptr<lock_core> core, std::string name)
    : basic_lock(std::move(core), std::move(name), detail::semaphore_kind()) {}

bool semaphore::try_set_permits(std::int64_t permits) {
  require_count(permits, false);
  return change_permits(*handle_, permits, "set");
}

void semaphore::add_permits(std::int64_t permits) {
  change_permits(*handle_, permits, "add");
}

void semaphore::release(std::int64_t permits) {
  detail::wait_for_result<void>(handle_->core->io(), [&](detail::result_callback<void> done) {
    give_back(*handle_, permits, std::move(done));
  });
}

void semaphore::release_async(std::int64_t permits,
                              std::function<void(call_result<void>)> done) noexcept {
  detail::start_or_report<void>(
      handle_->core->io(), std::move(done),
      [&](detail::result_callback<void> d) { give_back(*handle_, permits, std::move(d)); });
}

call_awaitable<void> semaphore::release_async(std::int64_t permits) {
  return detail::awaitable_factory::call<void>(
      [h = handle_, permits](detail::result_callback<void> done) {
        give_back(*h, permits, std::move(done));
      });
}

std::int64_t semaphore::available() const {
  return read_info(*handle_).available;
}

semaphore_info semaphore::info() const {
  return read_info(*handle_);
}

leased_semaphore::leased_semaphore(std::shared_ptr<lock_core> core, std::string name)
    : basic_lock(std::move(core), std::move(name), detail::leased_semaphore_kind()) {}

bool leased_semaphore::try_set_permits(std::int64_t permits) {
  require_count(permits, false);
  return change_permits(*handle_, permits, "set");
}

void leased_semaphore::add_permits(std::int64_t permits) {
  change_permits(*handle_, permits, "add");
}

bool leased_semaphore::release(std::string_view permit_id) {
  return detail::wait_for_result<bool>(handle_->core->io(),
                                       [&](detail::result_callback<bool> done) {
                                         release_by_id(*handle_, permit_id, std::move(done));
                                       });
}

void leased_semaphore::release_async(std::string_view permit_id,
                                     std::function<void(call_result<bool>)> done) noexcept {
  detail::start_or_report<bool>(
      handle_->core->io(), std::move(done),
      [&](detail::result_callback<bool> d) { release_by_id(*handle_, permit_id, std::move(d)); });
}

call_awaitable<bool> leased_semaphore::release_async(std::string_view permit_id) {
  return detail::awaitable_factory::call<bool>(
      [h = handle_, id = std::string(permit_id)](detail::result_callback<bool> done) {
        release_by_id(*h, id, std::move(done));
      });
}

std::int64_t leased_semaphore::available() const {
  return read_info(*handle_).available;
}

semaphore_info leased_semaphore::info() const {
  return read_info(*handle_);
}

semaphore client::semaphore(std::string name) const {
  if (name.empty()) throw error(errc::invalid_argument, "semaphore name is empty");
  return dlock::semaphore(core_, std::move(name));
}

leased_semaphore client::leased_semaphore(std::string name) const {
  if (name.empty()) throw error(errc::invalid_argument, "semaphore name is empty");
  return dlock::leased_semaphore(core_, std::move(name));
}

}  // namespace dlock
