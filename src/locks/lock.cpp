// The public client and lock types: thin handles over lock_core. Introspection is in
// inspect.cpp, the lease in lease.cpp, the asynchronous entry points in async.cpp.
#include <future>

#include "core/one_shot.hpp"
#include "core/thread_number.hpp"
#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/lock.hpp"
#include "locks/lock_core.hpp"
#include "net/sentinel_url.hpp"

namespace dlock {

using detail::lock_core;
using detail::steady;

// ---- client ----

client_options client_options::from_url(std::string_view url) {
  client_options o;
  if (url.starts_with("redis-sentinel://")) {
    auto parsed = detail::parse_sentinel_url(url);
    o.connection = std::move(parsed.master);
    o.sentinel = std::move(parsed.sentinel);
    return o;
  }
  o.connection = connection_options::from_url(url);
  return o;
}

client_options client_options::cluster(const std::vector<std::string>& seed_urls) {
  if (seed_urls.empty())
    throw error(errc::invalid_argument, "a cluster needs at least one seed URL");
  client_options o;
  for (const auto& url : seed_urls)
    o.cluster_seeds.push_back(connection_options::from_url(url));
  o.connection = o.cluster_seeds.front();
  return o;
}

client_options client_options::redlock_masters(const std::vector<std::string>& master_urls) {
  if (master_urls.size() < 3) {
    throw error(errc::invalid_argument,
                "RedLock needs at least 3 independent masters (5 is usual), got " +
                    std::to_string(master_urls.size()));
  }
  client_options o;
  for (const auto& url : master_urls)
    o.redlock.masters.push_back(connection_options::from_url(url));
  o.connection = o.redlock.masters.front();
  // A round waits for several masters' replies; polling after the first ones only took CPU from
  // the masters still to answer where they share the client's cores (busy_poll's comment).
  o.busy_poll = std::chrono::microseconds(0);
  return o;
}

reply client::command(std::string_view key, std::initializer_list<std::string_view> args) const {
  return core_->command(key, std::span<const std::string_view>(args.begin(), args.size()));
}

std::vector<redis_client*> client::masters() const {
  return core_->topo().masters();
}

client::client(client_options options) : core_(lock_core::create(std::move(options))) {}
client::client(std::string_view url) : client(client_options::from_url(url)) {}

reentrant_lock client::reentrant(std::string name) const {
  if (name.empty()) throw error(errc::invalid_argument, "lock name is empty");
  return reentrant_lock(core_, std::move(name));
}

simple_lock client::simple(std::string name) const {
  if (name.empty()) throw error(errc::invalid_argument, "lock name is empty");
  return simple_lock(core_, std::move(name));
}

fair_lock client::fair(std::string name) const {
  if (name.empty()) throw error(errc::invalid_argument, "lock name is empty");
  return fair_lock(core_, std::move(name));
}

const std::string& client::id() const noexcept {
  return core_->id();
}
redis_client& client::redis() const noexcept {
  return core_->topo().redis();
}
client_stats client::stats() const noexcept {
  return core_->stats();
}
const client_options& client::options() const noexcept {
  return core_->options();
}

namespace detail {

void lock_core::forbid_io_thread(const char* what) {
  io().refuse_blocking(what, "use the _async form there");
}

lease lock_core::acquire_until(const lock_handle& h, const lease_options& o,
                               steady::time_point deadline) {
  forbid_io_thread("acquiring a lock synchronously");
  one_shot<acquire_result> result;
  acquire(make_request(h, o, limits_until(deadline),
                       [&result](acquire_result r) { result.put(std::move(r)); }));
  auto r = result.take();
  if (r.error) throw error(r.error, r.message);
  return std::move(r.held);
}

}  // namespace detail

// ---- basic_lock ----

basic_lock::basic_lock(std::shared_ptr<lock_core> core, std::string name,
                       const detail::lock_kind& kind)
    : handle_(std::make_shared<detail::lock_handle>()) {
  handle_->core = std::move(core);
  handle_->kind = &kind;
  handle_->names = kind.names_of(std::move(name), handle_->core->options().fence_counter);
}

reentrant_lock::reentrant_lock(std::shared_ptr<lock_core> core, std::string name)
    : basic_lock(std::move(core), std::move(name), detail::reentrant_kind()) {}

simple_lock::simple_lock(std::shared_ptr<lock_core> core, std::string name)
    : basic_lock(std::move(core), std::move(name), detail::simple_kind()) {}

fair_lock::fair_lock(std::shared_ptr<lock_core> core, std::string name)
    : basic_lock(std::move(core), std::move(name), detail::fair_kind()) {}

const std::string& basic_lock::name() const noexcept {
  return handle_->names->name;
}

lease basic_lock::try_acquire_until(steady::time_point deadline, const lease_options& options) {
  return handle_->core->acquire_until(*handle_, options, deadline);
}

lease basic_lock::try_acquire(const lease_options& options) {
  return try_acquire_until(steady::time_point::min(), options);
}

lease basic_lock::try_acquire_for(std::chrono::milliseconds wait, const lease_options& options) {
  if (wait.count() <= 0) return try_acquire(options);
  return try_acquire_until(detail::saturating_add(steady::now(), wait), options);
}

lease basic_lock::acquire(const lease_options& options) {
  return try_acquire_until(steady::time_point::max(), options);
}

std::future<lease> basic_lock::acquire_future(std::chrono::milliseconds wait,
                                              lease_options options) {
  auto result = std::make_shared<std::promise<lease>>();
  auto future = result->get_future();
  acquire_async(
      wait,
      [result](acquire_result r) {
        if (!r.error) {
          result->set_value(std::move(r.held));
          return;
        }
        result->set_exception(std::make_exception_ptr(error(r.error, r.message)));
      },
      std::move(options));
  return future;
}

// ---- Lockable ----

bool basic_lock::keep(lease l) {
  if (!l) return false;
  detail::lock_guard lock(handle_->holds_mutex);
  handle_->holds_by_thread[detail::current_thread_number()].push_back(std::move(l));
  return true;
}

void basic_lock::lock() {
  keep(acquire());
}

bool basic_lock::try_lock() {
  return keep(try_acquire());
}

void basic_lock::unlock() noexcept {
  lease l;
  {
    detail::lock_guard lock(handle_->holds_mutex);
    auto it = handle_->holds_by_thread.find(detail::current_thread_number());
    if (it == handle_->holds_by_thread.end() || it->second.empty()) {
      handle_->core->counters.release_failures.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    l = std::move(it->second.back());
    it->second.pop_back();
    if (it->second.empty()) handle_->holds_by_thread.erase(it);
  }
  l.release();
}

std::size_t basic_lock::local_holds() const noexcept {
  detail::lock_guard lock(handle_->holds_mutex);
  auto it = handle_->holds_by_thread.find(detail::current_thread_number());
  return it == handle_->holds_by_thread.end() ? 0 : it->second.size();
}

}  // namespace dlock
