// dlock::client and its options: the connection settings a URL or a deployment gives, and the
// handles the client hands out (locks, semaphores, latches, multi-locks), each a thin handle
// over the lock core that the types' own files implement.
#include <algorithm>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/latch.hpp"
#include "dlock/lock.hpp"
#include "dlock/multi_lock.hpp"
#include "dlock/read_write_lock.hpp"
#include "dlock/semaphore.hpp"
#include "locks/runtime/lock_core.hpp"
#include "net/sentinel_url.hpp"

namespace dlock {

using detail::lock_core;

client_options client_options::from_url(std::string_view url) {
  client_options o;
  if (detail::is_sentinel_url(url)) {
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
metrics_snapshot client::metrics() const {
  return core_->metrics();
}
const client_options& client::options() const noexcept {
  return core_->options();
}

read_write_lock client::read_write(std::string name) const {
  if (name.empty()) throw error(errc::invalid_argument, "lock name is empty");
  return read_write_lock(core_, std::move(name));
}

semaphore client::semaphore(std::string name) const {
  if (name.empty()) throw error(errc::invalid_argument, "semaphore name is empty");
  return dlock::semaphore(core_, std::move(name));
}

leased_semaphore client::leased_semaphore(std::string name) const {
  if (name.empty()) throw error(errc::invalid_argument, "semaphore name is empty");
  return dlock::leased_semaphore(core_, std::move(name));
}

dlock::multi_lock client::multi(std::vector<std::string> names) const {
  if (names.empty()) throw error(errc::invalid_argument, "a multi-lock needs at least one name");
  if (std::any_of(names.begin(), names.end(), [](const std::string& n) { return n.empty(); })) {
    throw error(errc::invalid_argument, "lock name is empty");
  }
  // One global order for every multi-lock: std::string compares bytes as unsigned char, as
  // memcmp does, whatever the platform's char signedness.
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return multi_lock(core_, std::move(names));
}

countdown_latch client::latch(std::string name) const {
  if (name.empty()) throw error(errc::invalid_argument, "latch name is empty");
  return countdown_latch(core_, std::move(name));
}

}  // namespace dlock
