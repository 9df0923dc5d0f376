// Acquiring a lock and reading under it in one round trip. The reads go out as one no-writes
// script right behind the first attempt, on the same connection (calls whose first key is the
// lock's share a route, so they run in the order sent). The script checks the hold before it
// reads and reports the fencing counter, so its replies count only if they ran under the grant
// the caller got; when they did not (the lock was held, the first attempt waited behind local
// waiters, a grant was undone and made again, a reconnect or redirect came between), the reads
// run once more after the grant. Correctness rests on that check, not on the order.
//
// The acquisition's outcome and the early reads' reply arrive separately, in either order (the
// reply follows the attempt's on the wire, but a waiter's grant comes long after it); a join
// decides once both are in. Both arrive on the I/O thread, so the caller's completion runs there.
#include <array>
#include <mutex>

#include "core/one_shot.hpp"
#include "core/user_callback.hpp"
#include "dlock/error.hpp"
#include "dlock/lock.hpp"
#include "dlock_lua_scripts.hpp"
#include "locks/sansio/guarded_calls.hpp"
#include "locks/runtime/lock_core.hpp"

namespace dlock::detail {
namespace {

const script& read_while_held() {
  static const script s{std::string(lua::read_while_held)};
  return s;
}

// What the read script answered: the reads ran under the caller's hold (and, when `fence` is
// given, with the counter at that grant's token), did not, or the reply is not the script's.
enum class answer { held, not_held, malformed };

answer read_answer(const reply& r, std::optional<std::uint64_t> fence,
                   std::vector<reply>& replies) {
  if (r.is_array() && r.elements().size() == 1 && r.at(0).is_integer() && r.at(0).integer() == 0) {
    return answer::not_held;
  }
  if (r.is_array() && r.elements().size() == 3 && r.at(0).is_integer() && r.at(0).integer() == 1 &&
      r.at(1).is_string() && r.at(2).is_array()) {
    if (fence && r.at(1).str() != std::to_string(*fence)) return answer::not_held;
    replies = r.at(2).elements();
    return answer::held;
  }
  return answer::malformed;
}

acquire_and_read_result failure(std::error_code ec, std::string message) {
  return {{}, {}, ec, std::move(message)};
}

acquire_and_read_result unexpected() {
  return failure(make_error_code(errc::unexpected_reply),
                 "the read script answered with an unexpected reply");
}

// One acquisition that carries reads, from its start to the caller's completion. Shared by the
// acquisition's completion and the early reads' reply; the script's arguments view its strings,
// so it never moves.
class read_join : public std::enable_shared_from_this<read_join> {
 public:
  read_join(const lock_handle& h, node_id node, std::string owner, command_list reads,
            acquire_and_read_callback done)
      : node_(node),
        owner_(std::move(owner)),
        reads_(std::move(reads)),
        done_(std::move(done)),
        keys_{h.names->name, h.names->fence_key},
        args_(h.kind->redis_type(), owner_, reads_) {}
  read_join(const read_join&) = delete;
  read_join& operator=(const read_join&) = delete;

  /// Sends the early reads. From here the caller's completion may run at any moment, on the I/O
  /// thread.
  void send_reads(topology& t, steady::time_point deadline) {
    t.eval(node_, read_while_held(), keys_views(), args_.views(), deadline, durability::master,
           [self = shared_from_this()](std::error_code ec, reply r) {
             self->arrived(std::nullopt, std::pair{ec, std::move(r)});
           });
  }
  void acquired(acquire_result r) { arrived(std::move(r), std::nullopt); }

 private:
  std::array<std::string_view, 2> keys_views() const { return {keys_[0], keys_[1]}; }

  void arrived(std::optional<acquire_result> a,
               std::optional<std::pair<std::error_code, reply>> e) {
    {
      std::lock_guard lock(mutex_);
      if (a) acquisition_ = std::move(a);
      if (e) early_ = std::move(e);
      if (!acquisition_ || !early_) return;
    }
    decide();  // both are in: nothing touches them any more but this
  }

  void decide() {
    auto& a = *acquisition_;
    if (a.error) return finish(failure(a.error, std::move(a.message)));
    if (!a.held) return finish({});
    acquire_and_read_result out{std::move(a.held), {}, {}, {}};
    if (auto& [ec, r] = *early_; !ec) {
      switch (read_answer(r, out.held.fence(), out.reads)) {
        case answer::held:
          return finish(std::move(out));
        case answer::malformed:
          return finish(unexpected());  // drops, so releases, the lease
        case answer::not_held:
          break;
      }
    }
    // Held now: read again, and only the hold matters (another lock's grant may have moved a
    // shared fencing counter since). The lease keeps its client open until then.
    auto& core = *lease_state::of(out.held)->core;
    held_ = std::move(out.held);
    core.topo().eval(
        node_, read_while_held(), keys_views(), args_.views(),
        steady::now() + core.options().connection.command_timeout, durability::master,
        [self = shared_from_this()](std::error_code ec, reply r) { self->read_again(ec, r); });
  }

  void read_again(std::error_code ec, const reply& r) {
    // Every failure from here drops the lease, which releases it.
    if (ec) return finish(failure(ec, r.is_error() ? std::string(r.str()) : ec.message()));
    acquire_and_read_result out{std::move(held_), {}, {}, {}};
    switch (read_answer(r, std::nullopt, out.reads)) {
      case answer::held:
        return finish(std::move(out));
      case answer::malformed:
        return finish(unexpected());
      case answer::not_held:
        return finish(failure(make_error_code(errc::lease_lost),
                              "the lock was lost before the reads could run under it"));
    }
  }

  void finish(acquire_and_read_result result) {
    held_ = {};
    auto done = std::move(done_);
    call_user(done, std::move(result));
  }

  const node_id node_;
  const std::string owner_;
  const command_list reads_;
  acquire_and_read_callback done_;
  const std::array<std::string, 2> keys_;
  const guarded_call_args args_;

  std::mutex mutex_;
  std::optional<acquire_result> acquisition_;
  std::optional<std::pair<std::error_code, reply>> early_;
  lease held_;  // while the reads run again
};

}  // namespace

acquire_handle lock_core::acquire_and_read_async(const lock_handle& h, const lease_options& o,
                                                 acquire_limits limits,
                                                 std::vector<std::vector<std::string>> reads,
                                                 acquire_and_read_callback&& done) {
  const auto node = guarded_node(*h.kind, h.names->name, reads, "read");
  auto request = make_request(h, o, limits, {});
  auto join =
      std::make_shared<read_join>(h, node, request.owner, std::move(reads), std::move(done));
  request.done = [join](acquire_result r) { join->acquired(std::move(r)); };
  const auto deadline = steady::now() + options_.connection.command_timeout;
  if (io().in_io_thread()) {
    // acquire() starts the acquisition by a post from here; the reads follow it in order.
    auto handle = acquire(std::move(request));
    io().post([this, join, deadline] { join->send_reads(*topology_, deadline); });
    return handle;
  }
  // When the first attempt leaves from this thread, the reads go in the same send.
  net::write_batch one_send;
  auto handle = acquire(std::move(request));
  join->send_reads(*topology_, deadline);
  return handle;
}

lease_and_reads lock_core::acquire_and_read(const lock_handle& h, const lease_options& o,
                                            steady::time_point deadline,
                                            const std::vector<std::vector<std::string>>& reads) {
  forbid_io_thread("acquiring a lock synchronously");
  one_shot<acquire_and_read_result> result;
  acquire_and_read_async(h, o, limits_until(deadline), reads,
                         [&result](acquire_and_read_result r) { result.put(std::move(r)); });
  auto r = result.take();
  if (r.error) throw error(r.error, r.message);
  return {std::move(r.held), std::move(r.reads)};
}

}  // namespace dlock::detail

namespace dlock {

lease_and_reads basic_lock::try_acquire_and_read(std::chrono::milliseconds wait,
                                                 const std::vector<std::vector<std::string>>& reads,
                                                 const lease_options& options) {
  return handle_->core->acquire_and_read(
      *handle_, options, detail::saturating_add(detail::steady::now(), wait), reads);
}

}  // namespace dlock
