// The simple lock, in the layout of node-redlock, redsync and redis-py: a string NAME holding a
// random 128-bit token, set with SET NX PX; release and renewal compare the token.
#include "core/random.hpp"
#include "dlock/error.hpp"
#include "dlock/lease.hpp"
#include "dlock/lock.hpp"
#include "dlock_lua_scripts.hpp"
#include "locks/kinds/lock_kind.hpp"
#include "locks/kinds/renewal_call.hpp"

namespace dlock::detail {
namespace {

class simple_protocol final : public lock_kind {
 public:
  std::string_view name() const noexcept override { return "simple"; }
  std::string_view redis_type() const noexcept override { return "string"; }
  lock_type public_type() const noexcept override { return lock_type::simple; }
  bool reentrant() const noexcept override { return false; }

  std::string owner_for(const std::string&, const lease_options& o) const override {
    if (!o.owner.empty()) {
      throw error(errc::invalid_argument, "an owner id applies to reentrant locks only");
    }
    return random_hex(16);  // 128 bits from the CSPRNG, fresh for every acquisition
  }

  void attempt(const lock_call& c, net::reply_callback done) const override {
    const std::string lease_ms = std::to_string(c.lease.count());
    const std::string_view keys[] = {c.names.name, c.names.fence_key, c.names.holder_key};
    const std::string_view args[] = {c.owner, lease_ms, c.identity};
    c.topo.eval(c.node, acquire_, with_record(keys, c), args, c.deadline, durability::replicas,
                std::move(done));
  }

  // A token is never re-entered: every end of its hold deletes it, if it is still the token's.
  void end_hold(const lock_call& c, hold_end how, net::reply_callback done) const override {
    const std::string_view keys[] = {c.names.name, c.names.channel, c.names.holder_key};
    const std::string_view args[] = {c.owner, unlock_message, unlock_publisher(c, how)};
    c.topo.eval(c.node, release_, with_record(keys, c), args, c.deadline, durability::master,
                std::move(done));
  }

  void renew(topology& t, node_id node, std::span<const renewal_item> items,
             net::clock::time_point deadline, net::reply_callback done) const override {
    send_renewal(t, node, renew_, items, deadline, std::move(done));
  }

 private:
  const script acquire_{std::string(lua::simple_acquire)};
  const script release_{std::string(lua::simple_release)};
  const script renew_{std::string(lua::simple_renew)};
};

}  // namespace

const lock_kind& simple_kind() noexcept {
  static const simple_protocol kind;
  return kind;
}

}  // namespace dlock::detail
