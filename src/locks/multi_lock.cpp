// dlock::multi_lock and multi_lease: several reentrant locks taken all or nothing, without
// deadlock. Each name is an ordinary reentrant lock (Redisson's RLock layout, its own fencing
// counter), and each hold an ordinary lease. Two paths:
//
//  - One script call (multi_acquire.lua) when every key of every name lives on one node in one
//    slot (a standalone server, a Sentinel master, names sharing a hash tag on a cluster): it
//    takes every name or none, and each grant becomes a lease through lock_core::adopt_grant.
//  - The ordered path otherwise, and for the rest of a wait that the one call could not satisfy
//    at once: the names one by one in sorted order, each through the reentrant lock's own
//    acquisition (event-driven waiting, local FIFO) within one common deadline; what was taken is
//    released, last first, if a name is not acquired by then.
//
// Why no deadlock: while it waits for a name, an acquisition holds only names that sort before
// it (the one-call path holds nothing while it waits: it took nothing). So in any cycle of
// waiters, each would hold a name sorting before the one it waits for, all the way round:
// impossible. Multi-locks over overlapping names, given in any order, cannot wait for each other
// in a cycle.
#include "dlock/multi_lock.hpp"

#include <algorithm>
#include <charconv>

#include "core/one_shot.hpp"
#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock_lua_scripts.hpp"
#include "locks/lock_core.hpp"

namespace dlock {

using detail::lock_core;
using detail::steady;

namespace {

using handles = std::vector<std::unique_ptr<detail::lock_handle>>;

// The handles a reentrant_lock of each name would have: the same kind, keys and fence counter.
handles handles_for(const std::shared_ptr<lock_core>& core, const std::vector<std::string>& names) {
  handles out;
  out.reserve(names.size());
  for (const auto& name : names) {
    auto h = std::make_unique<detail::lock_handle>();
    h->core = core;
    h->kind = &detail::reentrant_kind();
    h->names = h->kind->names_of(name, core->options().fence_counter);
    out.push_back(std::move(h));
  }
  return out;
}

void release_all(std::vector<lease>& holds) noexcept {
  // Last taken, first released: the order the names were taken in, unwound.
  while (!holds.empty()) {
    holds.back().release();
    holds.pop_back();
  }
}

// ---- the ordered path ----

multi_lease acquire_in_order(lock_core& core, const handles& hs, const lease_options& o,
                             steady::time_point deadline) {
  std::vector<lease> holds;
  holds.reserve(hs.size());
  try {
    for (const auto& h : hs) {
      auto l = core.acquire_until(*h, o, deadline);
      if (!l) {
        release_all(holds);  // the wait ended: no partial hold is kept
        return {};
      }
      holds.push_back(std::move(l));
    }
  } catch (...) {
    release_all(holds);
    throw;
  }
  return multi_lease(std::move(holds));
}

// ---- the one-call path ----

const script& multi_acquire_script() {
  static const script s{std::string(lua::multi_acquire)};
  return s;
}

// True if one script call can reach every key of every name: one node, one slot. Never for
// RedLock, whose grants need a majority of masters, which the ordered path's kind provides.
bool one_call_reaches(lock_core& core, const handles& hs) {
  if (!core.options().redlock.masters.empty()) return false;
  auto& t = core.topo();
  const auto first = t.nodes_for(hs.front()->names->name);
  if (first.size() != 1) return false;
  const auto node = first.front();
  const auto route = t.route_of(node, hs.front()->names->name);
  for (const auto& h : hs) {
    for (const std::string_view key : {h->names->name, h->names->fence_key}) {
      const auto nodes = t.nodes_for(key);
      if (nodes.size() != 1 || nodes.front() != node ||
          !detail::one_script_reaches(t.route_of(node, key), route)) {
        return false;
      }
    }
  }
  return true;
}

// How the one call went.
struct call_result {
  enum class end {
    granted,  // `holds` has every name
    busy,     // a name is held elsewhere; nothing was taken
    retry,    // nothing is kept (born dead, not replicated, no reply): worth another try
    failed,   // `ec` and `message` say why; waiting cannot fix it
  } what = end::failed;
  std::vector<lease> holds;  // granted: all; retry: re-entries to give back
  std::error_code ec;
  std::string message;
};

std::string names_phrase(const handles& hs) {
  std::string out;
  for (const auto& h : hs) {
    if (!out.empty()) out += ", ";
    out += "'" + h->names->name + "'";
  }
  return out;
}

// Per name: 1 granted, 2 re-entered, with its fence; empty if the reply is not a grant of all.
std::vector<std::pair<std::int64_t, std::uint64_t>> decode_grants(const reply& r, std::size_t n) {
  std::vector<std::pair<std::int64_t, std::uint64_t>> out;
  if (!r.is_array() || r.elements().size() != 1 + 2 * n) return out;
  const auto& e = r.elements();
  if (!e[0].is_integer() || e[0].integer() != 1) return out;
  for (std::size_t i = 0; i < n; ++i) {
    const auto& status = e[1 + 2 * i];
    const auto& fence = e[2 + 2 * i];
    if (!status.is_integer() || !fence.is_integer() ||
        (status.integer() != 1 && status.integer() != 2)) {
      return {};
    }
    out.emplace_back(status.integer(), static_cast<std::uint64_t>(fence.integer()));
  }
  return out;
}

// "WRONGTYPE name I holds X, not a lock" names the culprit by position: the key itself may hold
// bytes an error reply cannot carry. The message names the lock, as a single lock's does.
std::string wrong_type_message(const handles& hs, const reply& r) {
  constexpr std::string_view prefix = "WRONGTYPE name ";
  const std::string& text = r.str();
  std::size_t i = 0;
  if (text.starts_with(prefix)) {
    const char* begin = text.data() + prefix.size();
    const char* end = text.data() + text.size();
    const auto [p, ec] = std::from_chars(begin, end, i);
    if (ec == std::errc() && i >= 1 && i <= hs.size() && p != end) {
      return "lock '" + hs[i - 1]->names->name + "'" + std::string(p, end);
    }
  }
  return "acquiring locks " + names_phrase(hs) + ": " + text;
}

const script& multi_drop_script() {
  static const script s{std::string(lua::multi_drop)};
  return s;
}

// After a call whose reply never came: removes what it may have granted, in one call that
// takes the acquisition's connection (its first key) and so runs after it; an owner's holds from
// before the call stay.
void drop_uncertain(lock_core& core, const handles& hs, const std::string& owner) {
  const auto& kind = detail::reentrant_kind();
  std::vector<std::string_view> keys;
  std::vector<std::string_view> args{owner, detail::unlock_message, core.topo().publish_command()};
  for (const auto& h : hs) {
    keys.push_back(h->names->name);
    keys.push_back(h->names->channel);
    args.push_back(core.grants().find_live(kind, h->names->name, owner) ? "0" : "1");
  }
  auto& topo = core.topo();
  topo.eval(topo.nodes_for(hs.front()->names->name).front(), multi_drop_script(), keys, args,
            steady::now() + core.options().connection.command_timeout, detail::durability::master,
            [](std::error_code, reply) {});
}

// Builds the outcome from the script's reply, on the I/O thread (adopt_grant may run on_lost
// callbacks, which belong there).
call_result on_call_reply(lock_core& core, const handles& hs, const std::string& owner,
                          const lease_options& o, std::chrono::milliseconds lease_time,
                          std::error_code ec, const reply& r, steady::time_point sent_at) {
  call_result out;
  const auto& kind = detail::reentrant_kind();
  auto call_on = [&](const detail::lock_handle& h) {
    const auto node = core.topo().nodes_for(h.names->name).front();
    const auto deadline = steady::now() + core.options().connection.command_timeout;
    return detail::lock_call{core.topo(), node, *h.names, owner, lease_time, deadline};
  };
  if (ec == errc::not_replicated) {
    // The master granted, too few replicas have it: a failover could hand the names to someone
    // else. Undone, not handed out: each re-entry gives back its count, each new grant goes.
    const auto grants = decode_grants(r, hs.size());
    if (grants.empty()) {
      out.what = call_result::end::busy;  // nothing was written; the WAIT was moot
      return out;
    }
    for (std::size_t i = 0; i < grants.size(); ++i) {
      if (grants[i].first == 2) {
        kind.release(call_on(*hs[i]), [](std::error_code, reply) {});
      } else {
        kind.drop(call_on(*hs[i]), [](std::error_code, reply) {});
      }
    }
    out.what = call_result::end::retry;
    out.ec = errc::not_replicated;
    out.message = "locks " + names_phrase(hs) + " were granted, but fewer than " +
                  std::to_string(core.options().min_replica_acks) +
                  " replicas acknowledged it in time; it was undone";
    return out;
  }
  if (ec) {
    // Without a reply the script may or may not have run: undo what it may have granted,
    // except an owner's existing holds (as the driver's discard_uncertain_grant does).
    if (ec == errc::timeout || ec == errc::connection_lost) drop_uncertain(core, hs, owner);
    const bool transient =
        ec == errc::timeout || ec == errc::connection_lost || ec == errc::server_busy;
    out.what = transient ? call_result::end::retry : call_result::end::failed;
    out.ec = ec;
    if (ec == errc::wrong_type && r.is_error()) {
      out.message = wrong_type_message(hs, r);
    } else {
      out.message =
          "acquiring locks " + names_phrase(hs) + ": " + (r.is_error() ? r.str() : ec.message());
    }
    return out;
  }
  if (r.is_array() && r.elements().size() == 3 && r.elements()[0].is_integer() &&
      r.elements()[0].integer() == 0) {
    out.what = call_result::end::busy;
    return out;
  }
  const auto grants = decode_grants(r, hs.size());
  if (grants.empty()) {
    out.ec = errc::unexpected_reply;
    out.message = "acquiring locks " + names_phrase(hs) + ": unexpected reply";
    return out;
  }
  bool born_dead = false;
  for (std::size_t i = 0; i < grants.size(); ++i) {
    auto l = core.adopt_grant(*hs[i], owner, o, grants[i].second, grants[i].first == 2, sent_at);
    if (l) {
      out.holds.push_back(std::move(l));
    } else {
      born_dead = true;  // undone by adopt_grant; the others are given back by the caller
    }
  }
  out.what = born_dead ? call_result::end::retry : call_result::end::granted;
  return out;
}

call_result acquire_in_one_call(lock_core& core, const handles& hs, const lease_options& o,
                                const detail::acquire_request& checked, bool single_attempt,
                                steady::time_point deadline) {
  // The reply must come within one command timeout, and by the deadline when there is one.
  const auto now = steady::now();
  auto until = detail::saturating_add(now, core.options().connection.command_timeout);
  if (!single_attempt) until = std::min(until, std::max(deadline, now));
  std::vector<std::string_view> keys;
  keys.reserve(2 * hs.size());
  for (const auto& h : hs) {
    keys.push_back(h->names->name);
    keys.push_back(h->names->fence_key);
  }
  const std::string lease_ms = std::to_string(checked.lease_time.count());
  const std::string_view args[] = {lease_ms, checked.owner};
  detail::one_shot<call_result> result;
  core.counters.attempts.fetch_add(1, std::memory_order_relaxed);
  const auto sent_at = steady::now();
  auto& topo = core.topo();
  topo.eval(topo.nodes_for(hs.front()->names->name).front(), multi_acquire_script(), keys, args,
            until, detail::durability::replicas,
            [&core, &hs, &o, &checked, &result, sent_at](std::error_code ec, reply r) {
              // This thread must always hand over a result: the caller waits for it.
              call_result out;
              try {
                out = on_call_reply(core, hs, checked.owner, o, checked.lease_time, ec, r, sent_at);
              } catch (const error& e) {
                out = {};
                out.ec = e.code();
                out.message = e.what();
              } catch (...) {
                out = {};
                out.ec = errc::unexpected_reply;
                out.message = "acquiring locks " + names_phrase(hs) + ": internal failure";
              }
              result.put(std::move(out));
            });
  return result.take();
}

// ---- both ----

multi_lease acquire_until(const std::shared_ptr<lock_core>& core,
                          const std::vector<std::string>& names, const lease_options& o,
                          steady::time_point deadline) {
  if (core->io().in_io_thread()) {
    throw error(errc::invalid_argument,
                "acquiring a multi-lock blocks, so it cannot run on the client's I/O thread "
                "(inside a callback)");
  }
  const auto hs = handles_for(core, names);
  const bool single_attempt = deadline <= steady::now();
  // Checks the options (throws errc::invalid_argument) and settles the owner, computed here on
  // the caller's thread, and the lease time, for the one call.
  const auto checked = core->make_request(*hs.front(), o, {}, [](acquire_result) {});
  if (one_call_reaches(*core, hs)) {
    auto r = acquire_in_one_call(*core, hs, o, checked, single_attempt, deadline);
    using end = call_result::end;
    if (r.what == end::granted) return multi_lease(std::move(r.holds));
    release_all(r.holds);
    if (r.what == end::failed) throw error(r.ec, r.message);
    if (single_attempt || steady::now() >= deadline) {
      // As a single lock's attempt: a transient failure of a single attempt is thrown, and so
      // is a grant too few replicas acknowledged; a held name or a born-dead grant is just
      // "not acquired".
      if (r.ec && (single_attempt || r.ec == errc::not_replicated)) throw error(r.ec, r.message);
      return {};
    }
    // Held elsewhere, or worth another try: the ordered path waits for the names, event-driven,
    // for the rest of the wait. The one call took nothing, so the ordering invariant holds.
  }
  return acquire_in_order(*core, hs, o, deadline);
}

}  // namespace

// ---- multi_lease ----

bool multi_lease::valid() const noexcept {
  return !holds_.empty() &&
         std::all_of(holds_.begin(), holds_.end(), [](const lease& l) { return l.valid(); });
}

std::uint64_t multi_lease::fence(const std::string& name) const noexcept {
  for (const auto& l : holds_) {
    if (l.name() == name) return l.fence();
  }
  return 0;
}

bool multi_lease::release() noexcept {
  bool all = !holds_.empty();
  while (!holds_.empty()) {
    all = holds_.back().release() && all;
    holds_.pop_back();
  }
  return all;
}

// ---- multi_lock ----

multi_lock::multi_lock(std::shared_ptr<detail::lock_core> core, std::vector<std::string> names)
    : core_(std::move(core)), names_(std::move(names)) {}

multi_lease multi_lock::try_acquire(const lease_options& options) {
  return acquire_until(core_, names_, options, steady::time_point::min());
}

multi_lease multi_lock::try_acquire_for(std::chrono::milliseconds wait,
                                        const lease_options& options) {
  if (wait.count() <= 0) return try_acquire(options);
  return acquire_until(core_, names_, options, detail::saturating_add(steady::now(), wait));
}

multi_lease multi_lock::acquire(const lease_options& options) {
  return acquire_until(core_, names_, options, steady::time_point::max());
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

}  // namespace dlock
