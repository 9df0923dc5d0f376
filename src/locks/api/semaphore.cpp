// The public semaphore types: what they add to basic_lock (setting and adding permits, releasing
// by id, looking at them). Acquiring and releasing leases is basic_lock's, through the kinds in
// kinds/semaphore.cpp and kinds/leased_semaphore.cpp.
#include "dlock/semaphore.hpp"

#include "core/random.hpp"
#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock_lua_scripts.hpp"
#include "locks/async/awaitable_factory.hpp"
#include "locks/async/one_call.hpp"
#include "locks/runtime/lock_core.hpp"
#include "locks/sansio/holder_record.hpp"

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
  // A leased semaphore's permits-taken set is checked before the count changes.
  const std::string_view keys[] = {n.name, n.channel, n.aux_key1};
  const std::string_view args[] = {count, h.core->topo().publish_command(), how};
  h.core->call_async(
      release_script(), n.name, std::span(keys, n.aux_key1.empty() ? 2 : 3), args,
      detail::to_result<bool>([](const reply& r) { return r.integer() >= 1; }, std::move(done)));
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

// The script's answer {exists, free, server time, {id1, expiry1, ...}, {holder field1, record1,
// ...}} as semaphore_info, waiters not counted yet. A leased semaphore's ids (and its holder
// fields) are raw bytes, shown in hex as lease::permit_id shows them; a plain semaphore's holder
// fields are its grants' ids, hex already.
semaphore_info parse_info(const reply& r, bool leased) {
  semaphore_info info;
  info.exists = r.at(0).integer() == 1;
  info.available = r.at(1).integer();
  const auto now = r.at(2).integer();
  const auto& e = r.at(3).elements();
  for (std::size_t i = 0; i + 1 < e.size(); i += 2) {
    const auto expiry = e[i + 1].integer();
    // Redisson marks a permit taken without expiry with a score far in the future.
    const auto left = expiry >= 900'000'000'000'000
                          ? std::chrono::milliseconds::max()
                          : std::chrono::milliseconds(std::max<std::int64_t>(0, expiry - now));
    // An expired permit is free already: the next acquisition reclaims it.
    if (left.count() == 0) ++info.available;
    info.leased.emplace_back(detail::to_hex(e[i].str()), left);
  }
  const auto& holders = r.at(4).elements();
  for (std::size_t i = 0; i + 1 < holders.size(); i += 2) {
    if (auto identity = detail::decode_holder(holders[i + 1].str())) {
      const auto& id = holders[i].str();
      info.holders.emplace_back(leased ? detail::to_hex(id) : id, std::move(*identity));
    }
  }
  return info;
}

// Reads the semaphore (info_script), without its waiters. Throws errc::invalid_argument over
// RedLock, having sent nothing.
void read_permits(const detail::lock_handle& h, detail::result_callback<semaphore_info> done) {
  refuse_redlock(h);
  const auto& n = *h.names;
  const bool leased = !n.aux_key1.empty();
  const std::string_view keys[] = {n.name, leased ? n.aux_key1 : n.name, n.holder_key};
  const bool records = !h.core->holder_record().empty();
  h.core->call_async(
      info_script(), n.name, std::span(keys, records ? 3 : 2), {},
      detail::to_result<semaphore_info>([leased](const reply& r) { return parse_info(r, leased); },
                                        std::move(done)));
}

// The whole picture: the permits, then the clients subscribed to the channel (waiters).
void read_all(const std::shared_ptr<detail::lock_handle>& h,
              detail::result_callback<semaphore_info> done) {
  read_permits(*h, [h, done = std::move(done)](call_result<semaphore_info> r) {
    if (r.error) return detail::deliver(done, std::move(r));
    const auto& n = *h->names;
    const std::string_view numsub[] = {"PUBSUB", h->core->topo().numsub_command(), n.channel};
    h->core->command_async(n.channel, numsub,
                           detail::to_result<semaphore_info>(
                               [info = std::move(r.value)](const reply& subscribed) {
                                 auto out = info;
                                 out.waiters = subscribed.at(1).integer();
                                 return out;
                               },
                               std::move(done)));
  });
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
  const std::string_view keys[] = {n.name, n.aux_key1, n.channel, n.holder_key};
  const std::string_view args[] = {*ids, h.core->topo().publish_command()};
  const bool records = !h.core->holder_record().empty();
  h.core->call_async(
      release, n.name, std::span(keys, records ? 4 : 3), args,
      detail::to_result<bool>([](const reply& r) { return r.is_integer(); }, std::move(done)));
}

// The calls below as starts (one_call.hpp): each closure holds what its call needs, the
// semaphore's handle and the arguments, and starts it with `done`; it may throw dlock::error,
// having sent nothing. The blocking form waits for it, the callback form reports through `done`,
// the awaitable starts it when awaited.
using handle_ptr = std::shared_ptr<detail::lock_handle>;

auto set_permits(handle_ptr h, std::int64_t permits) {
  return [h = std::move(h), permits](detail::result_callback<bool> done) {
    if (permits < 0) throw error(errc::invalid_argument, "a permit count cannot be negative");
    change_permits(*h, permits, "set", std::move(done));
  };
}

auto add_permits_to(handle_ptr h, std::int64_t permits) {
  return [h = std::move(h), permits](detail::result_callback<void> done) {
    change_permits(*h, permits, "add", [done = std::move(done)](call_result<bool> r) {
      detail::deliver<void>(done, {r.error, std::move(r.message)});
    });
  };
}

auto give_back_permits(handle_ptr h, std::int64_t permits) {
  return [h = std::move(h), permits](detail::result_callback<void> done) {
    give_back(*h, permits, std::move(done));
  };
}

auto release_permit(handle_ptr h, std::string_view permit_id) {
  return [h = std::move(h), id = std::string(permit_id)](detail::result_callback<bool> done) {
    release_by_id(*h, id, std::move(done));
  };
}

auto count_free(handle_ptr h) {
  return [h = std::move(h)](detail::result_callback<std::int64_t> done) {
    read_permits(*h, [done = std::move(done)](call_result<semaphore_info> r) {
      detail::deliver<std::int64_t>(done, {r.value.available, r.error, std::move(r.message)});
    });
  };
}

auto read_info(handle_ptr h) {
  return [h = std::move(h)](detail::result_callback<semaphore_info> done) {
    read_all(h, std::move(done));
  };
}

}  // namespace

// ---- basic_semaphore ----

bool basic_semaphore::try_set_permits(std::int64_t permits) {
  return detail::wait_for_result<bool>(handle_->core->io(), set_permits(handle_, permits));
}

void basic_semaphore::try_set_permits_async(std::int64_t permits,
                                            std::function<void(call_result<bool>)> done) noexcept {
  detail::start_or_report<bool>(handle_->core->io(), std::move(done),
                                set_permits(handle_, permits));
}

call_awaitable<bool> basic_semaphore::try_set_permits_async(std::int64_t permits) {
  return detail::awaitable_factory::call<bool>(set_permits(handle_, permits));
}

void basic_semaphore::add_permits(std::int64_t permits) {
  detail::wait_for_result<void>(handle_->core->io(), add_permits_to(handle_, permits));
}

void basic_semaphore::add_permits_async(std::int64_t permits,
                                        std::function<void(call_result<void>)> done) noexcept {
  detail::start_or_report<void>(handle_->core->io(), std::move(done),
                                add_permits_to(handle_, permits));
}

call_awaitable<void> basic_semaphore::add_permits_async(std::int64_t permits) {
  return detail::awaitable_factory::call<void>(add_permits_to(handle_, permits));
}

std::int64_t basic_semaphore::available() const {
  return detail::wait_for_result<std::int64_t>(handle_->core->io(), count_free(handle_));
}

void basic_semaphore::available_async(
    std::function<void(call_result<std::int64_t>)> done) const noexcept {
  detail::start_or_report<std::int64_t>(handle_->core->io(), std::move(done), count_free(handle_));
}

call_awaitable<std::int64_t> basic_semaphore::available_async() const {
  return detail::awaitable_factory::call<std::int64_t>(count_free(handle_));
}

semaphore_info basic_semaphore::info() const {
  return detail::wait_for_result<semaphore_info>(handle_->core->io(), read_info(handle_));
}

void basic_semaphore::info_async(
    std::function<void(call_result<semaphore_info>)> done) const noexcept {
  detail::start_or_report<semaphore_info>(handle_->core->io(), std::move(done), read_info(handle_));
}

call_awaitable<semaphore_info> basic_semaphore::info_async() const {
  return detail::awaitable_factory::call<semaphore_info>(read_info(handle_));
}

// ---- semaphore ----

semaphore::semaphore(std::shared_ptr<lock_core> core, std::string name)
    : basic_semaphore(std::move(core), std::move(name), detail::semaphore_kind()) {}

void semaphore::release(std::int64_t permits) {
  detail::wait_for_result<void>(handle_->core->io(), give_back_permits(handle_, permits));
}

void semaphore::release_async(std::int64_t permits,
                              std::function<void(call_result<void>)> done) noexcept {
  detail::start_or_report<void>(handle_->core->io(), std::move(done),
                                give_back_permits(handle_, permits));
}

call_awaitable<void> semaphore::release_async(std::int64_t permits) {
  return detail::awaitable_factory::call<void>(give_back_permits(handle_, permits));
}

// ---- leased_semaphore ----

leased_semaphore::leased_semaphore(std::shared_ptr<lock_core> core, std::string name)
    : basic_semaphore(std::move(core), std::move(name), detail::leased_semaphore_kind()) {}

bool leased_semaphore::release(std::string_view permit_id) {
  return detail::wait_for_result<bool>(handle_->core->io(), release_permit(handle_, permit_id));
}

void leased_semaphore::release_async(std::string_view permit_id,
                                     std::function<void(call_result<bool>)> done) noexcept {
  detail::start_or_report<bool>(handle_->core->io(), std::move(done),
                                release_permit(handle_, permit_id));
}

call_awaitable<bool> leased_semaphore::release_async(std::string_view permit_id) {
  return detail::awaitable_factory::call<bool>(release_permit(handle_, permit_id));
}

}  // namespace dlock
