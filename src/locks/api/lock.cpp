// The public lock types: thin handles over lock_core (the client is in client.cpp). Introspection
// is in inspect.cpp, the lease in lease.cpp, the asynchronous entry points in async.cpp.
#include <future>

#include "core/one_shot.hpp"
#include "core/thread_number.hpp"
#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/lock.hpp"
#include "locks/runtime/lock_core.hpp"

namespace dlock {

using detail::lock_core;
using detail::steady;

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
