// The leased semaphore, in Redisson's RPermitExpirableSemaphore layout (leased_acquire.lua): each
// permit taken is a random 16-byte id in `{NAME}:timeout`, scored by its expiry. The lease's
// owner is its permits' ids, so only its holder can give them back or renew them.
#include "core/random.hpp"
#include "dlock/error.hpp"
#include "dlock/keys.hpp"
#include "dlock/lease.hpp"
#include "dlock/lock.hpp"
#include "dlock_lua_scripts.hpp"
#include "locks/kinds/lock_kind.hpp"
#include "locks/kinds/renewal_call.hpp"

namespace dlock::detail {

std::size_t permits_announced(std::string_view message) noexcept;  // semaphore.cpp

namespace {

class leased_semaphore_protocol final : public lock_kind {
 public:
  std::string_view name() const noexcept override { return "leased semaphore"; }
  std::string_view redis_type() const noexcept override { return "string"; }
  lock_type public_type() const noexcept override { return lock_type::other; }
  bool reentrant() const noexcept override { return false; }
  std::size_t max_holders() const noexcept override { return SIZE_MAX; }
  bool counts_permits() const noexcept override { return true; }
  std::size_t woken_by(std::string_view message) const noexcept override {
    return permits_announced(message);
  }

  std::shared_ptr<const lock_names> names_of(std::string name,
                                             const std::string& fence_counter) const override {
    auto n = std::make_shared<lock_names>(std::move(name), fence_counter);
    n->channel = derived_key("redisson_sc", n->name);
    n->aux_key1 = suffixed_key(n->name, "timeout");
    return n;
  }

  // 16 bytes from the CSPRNG per permit, as Redisson's ids.
  std::string owner_for(const std::string&, const lease_options& o) const override {
    if (!o.owner.empty()) {
      throw error(errc::invalid_argument, "a leased permit's owner is its random id");
    }
    return random_raw(16 * static_cast<std::size_t>(o.permits));
  }

  void attempt(const lock_call& c, net::reply_callback done) const override {
    const std::string lease_ms = std::to_string(c.lease.count());
    const std::string_view keys[] = {c.names.name, c.names.aux_key1, c.names.fence_key,
                                     c.names.channel, c.names.holder_key};
    const std::string_view args[] = {c.owner, lease_ms, c.topo.publish_command(), c.identity};
    c.topo.eval(c.node, acquire_, with_record(keys, c), args, c.deadline, durability::replicas,
                std::move(done));
  }
  // Every end of the hold gives back whichever of the owner's ids are still held: a grant that
  // never happened left none, and a drop sent for it changes nothing.
  void end_hold(const lock_call& c, hold_end how, net::reply_callback done) const override {
    const std::string_view keys[] = {c.names.name, c.names.aux_key1, c.names.channel,
                                     c.names.holder_key};
    const std::string_view args[] = {c.owner, unlock_publisher(c, how)};
    c.topo.eval(c.node, release_, with_record(keys, c), args, c.deadline, durability::master,
                std::move(done));
  }
  void renew(topology& t, node_id node, std::span<const renewal_item> items,
             net::clock::time_point deadline, net::reply_callback done) const override {
    send_renewal(t, node, renew_, items, deadline, std::move(done));
  }
  // The owner is the permits' ids, 16 bytes each.
  std::string permit_id(const std::string& owner) const override { return to_hex(owner); }

 private:
  const script acquire_{std::string(lua::leased_acquire)};
  const script release_{std::string(lua::leased_release)};
  const script renew_{std::string(lua::leased_renew)};
};

}  // namespace

const lock_kind& leased_semaphore_kind() noexcept {
  static const leased_semaphore_protocol kind;
  return kind;
}

}  // namespace dlock::detail
