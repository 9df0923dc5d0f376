// Writes that land only while a lease still holds its lock (lease::write_while_held,
// write_and_release). One script checks the hold the way a release does and runs the writes in
// the same atomic step, so whether they ran is decided by the server at the moment they run, not
// by the holder's clock: a holder paused past its lease, or cut off while the lock expired and
// went to someone else, writes nothing. A release asked for goes right behind the writes, in the
// same send and on the same route, so the server runs it after them.
#include "core/user_callback.hpp"
#include "dlock_lua_scripts.hpp"
#include "locks/sansio/guarded_calls.hpp"
#include "locks/runtime/lock_core.hpp"
#include "net/connection.hpp"

namespace dlock::detail {
namespace {

const script& write_while_held() {
  static const script s{std::string(lua::write_while_held)};
  return s;
}

// The script's reply: {1, {reply, ...}} if the writes ran, {0} if the hold was gone.
enum class write_answer { written, not_held, malformed };

// Moves the writes' replies out of `r` into `replies` when they ran.
write_answer read_write_answer(reply& r, std::vector<reply>& replies) {
  if (!r.is_array() || r.elements().empty() || !r.at(0).is_integer()) {
    return write_answer::malformed;
  }
  if (r.elements().size() == 1 && r.at(0).integer() == 0) return write_answer::not_held;
  if (r.elements().size() == 2 && r.at(0).integer() == 1 && r.at(1).is_array()) {
    replies = std::move(r.elements()[1].elements());
    return write_answer::written;
  }
  return write_answer::malformed;
}

}  // namespace

node_id lock_core::guarded_node(const lock_kind& kind, const std::string& name,
                                const command_list& commands, std::string_view what) {
  check_guarded_commands(commands, what);
  if (kind.counts_permits()) {
    throw error(errc::invalid_argument,
                "a semaphore's permits have no holder on the server to check " + std::string(what) +
                    "s against");
  }
  const auto nodes = topology_->nodes_for(name);
  if (nodes.size() != 1) {
    throw error(errc::invalid_argument, std::string(what) +
                                            "s under a lock need the lock's one server; a "
                                            "RedLock lock has several");
  }
  return nodes.front();
}

void lock_core::write_under_hold(lease_state& hold, const command_list& writes, bool release,
                                 std::function<void(call_result<std::vector<reply>>)>& done) {
  const auto g = hold.g;
  const auto node = guarded_node(g->kind, g->names->name, writes, "write");
  if (grants_.is_lost(*g)) {
    error lost(errc::lease_lost, "lease on '" + g->names->name + "' was lost: nothing was written");
    if (!release) throw lost;
    // Let go of it as any release of a lost lease does, and report what the script would have.
    release_async(hold, nullptr);
    report_on_io_thread<call_result<std::vector<reply>>>(io(), std::move(done), lost);
    return;
  }
  const guarded_call_args args(g->kind.redis_type(), g->owner, writes);
  const std::string_view key = g->names->name;
  // `self` is not an owner, for the reason given at lock_core::op: the topology answers every
  // call in flight before the core goes.
  auto on_reply = [self = this, g, release, done = std::move(done)](std::error_code ec, reply r) {
    call_result<std::vector<reply>> out;
    if (ec) {
      out.error = ec;
      out.message = r.is_error() ? r.str() : ec.message();
    } else {
      switch (read_write_answer(r, out.value)) {
        case write_answer::written:
          break;
        case write_answer::not_held:
          // Lost while held: signalled as every loss is, unless the caller is letting it go.
          if (!release) self->lose(g, lease_lost_reason::not_held);
          out.error = make_error_code(errc::lease_lost);
          out.message = "the lock on '" + g->names->name +
                        "' was no longer held by this lease: nothing was written";
          break;
        case write_answer::malformed:
          out.error = make_error_code(errc::unexpected_reply);
          out.message = "the write script answered with an unexpected reply";
          break;
      }
    }
    call_user(done, std::move(out));
  };
  net::write_batch one_send;
  topology_->eval(node, write_while_held(), std::span(&key, 1), args.views(),
                  steady::now() + options_.connection.command_timeout, durability::replicas,
                  std::move(on_reply));
  if (release) release_async(hold, nullptr);
}

}  // namespace dlock::detail
