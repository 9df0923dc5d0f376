// Acquiring a lock and reading under it in one round trip. The reads go out as one no-writes
// script right behind the first attempt, on the same connection (calls whose first key is the
// lock's share a route, so they run in the order sent). The script checks the hold before it
// reads and reports the fencing counter, so its replies count only if they ran under the grant
// the caller got; when they did not (the lock was held, the first attempt waited behind local
// waiters, a grant was undone and made again, a reconnect or redirect came between), the reads
// run once more after the grant. Correctness rests on that check, not on the order.
#include "core/one_shot.hpp"
#include "dlock/error.hpp"
#include "dlock/lock.hpp"
#include "dlock_lua_scripts.hpp"
#include "locks/lock_core.hpp"

namespace dlock::detail {
namespace {

const script& read_while_held() {
  static const script s{std::string(lua::read_while_held)};
  return s;
}

// The script's arguments: the lock's layout, the caller's owner field or token, then each read
// as its argument count followed by its arguments. `counts` keeps the count strings alive.
std::vector<std::string_view> script_args(std::string_view layout, std::string_view owner,
                                          const std::vector<std::vector<std::string>>& reads,
                                          std::vector<std::string>& counts) {
  counts.reserve(reads.size());
  std::vector<std::string_view> args{layout, owner};
  for (const auto& read : reads) {
    counts.push_back(std::to_string(read.size()));
    args.push_back(counts.back());
    args.insert(args.end(), read.begin(), read.end());
  }
  return args;
}

// The reads' replies if the script found the caller's hold and, when `fence` is given, the
// counter at that grant's token; nothing otherwise.
std::optional<std::vector<reply>> replies_if_held(const reply& r,
                                                  std::optional<std::uint64_t> fence) {
  if (r.is_array() && r.elements().size() == 1 && r.at(0).is_integer() && r.at(0).integer() == 0) {
    return std::nullopt;
  }
  if (r.is_array() && r.elements().size() == 3 && r.at(0).is_integer() && r.at(0).integer() == 1 &&
      r.at(1).is_string() && r.at(2).is_array()) {
    if (fence && r.at(1).str() != std::to_string(*fence)) return std::nullopt;
    return r.at(2).elements();
  }
  throw error(errc::unexpected_reply, "the read script answered with an unexpected reply");
}

}  // namespace

lease_and_reads lock_core::acquire_and_read(const lock_handle& h, const lease_options& o,
                                            steady::time_point deadline,
                                            const std::vector<std::vector<std::string>>& reads) {
  forbid_io_thread("acquiring a lock synchronously");
  for (const auto& read : reads) {
    if (read.empty() || read.front().empty()) {
      throw error(errc::invalid_argument, "every read must name a command");
    }
  }
  if (h.kind->counts_permits()) {
    throw error(errc::invalid_argument,
                "a semaphore's permits have no holder on the server to check reads against");
  }
  const auto nodes = topology_->nodes_for(h.names->name);
  if (nodes.size() != 1) {
    throw error(errc::invalid_argument,
                "reads under a lock need the lock's one server; a RedLock lock has several");
  }
  acquire_limits limits;
  limits.deadline = deadline;
  limits.single_attempt = deadline <= steady::now();
  one_shot<acquire_result> result;
  auto request =
      make_request(h, o, limits, [&result](acquire_result r) { result.put(std::move(r)); });
  const std::string owner = request.owner;  // the request moves on; the arguments view this
  std::vector<std::string> counts;
  const auto args = script_args(h.kind->redis_type(), owner, reads, counts);
  const std::string_view keys[] = {h.names->name, h.names->fence_key};
  // Shared: the acquisition may end (not acquired, an error) before this reply comes, and
  // nobody then waits for it.
  auto early = std::make_shared<one_shot<std::pair<std::error_code, reply>>>();
  {
    // When the first attempt leaves from this thread, the reads go in the same send.
    net::write_batch one_send;
    acquire(std::move(request));
    topology_->eval(nodes.front(), read_while_held(), keys, args,
                    steady::now() + options_.connection.command_timeout, durability::master,
                    [early](std::error_code ec, reply r) {
                      early->put({ec, std::move(r)});
                    });
  }
  auto acquired = result.take();
  if (acquired.error) throw error(acquired.error, acquired.message);
  if (!acquired.held) return {};
  lease_and_reads out{std::move(acquired.held), {}};
  if (auto [ec, r] = early->take(); !ec) {
    if (auto replies = replies_if_held(r, out.held.fence())) {
      out.reads = std::move(*replies);
      return out;
    }
  }
  // Held now: read again, and only the hold matters (another lock's grant may have moved a
  // shared fencing counter since). Throwing from here releases the lease with `out`.
  auto replies = replies_if_held(call(read_while_held(), h.names->name, keys, args), std::nullopt);
  if (!replies) {
    throw error(errc::lease_lost, "the lock was lost before the reads could run under it");
  }
  out.reads = std::move(*replies);
  return out;
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
