// A multi-lock's one script call: its keys, its reply decoded into leases, and the undo of a call
// whose reply never came.
#include "locks/runtime/multi_one_call.hpp"

#include <charconv>

#include "dlock/error.hpp"
#include "dlock_lua_scripts.hpp"
#include "locks/runtime/lock_core.hpp"

namespace dlock::detail {

multi_handles multi_handles_for(const lock_core& core, const std::vector<std::string>& names) {
  multi_handles out;
  out.reserve(names.size());
  for (const auto& name : names) {
    auto h = std::make_unique<lock_handle>();
    h->kind = &reentrant_kind();
    h->names = h->kind->names_of(name, core.options().fence_counter);
    out.push_back(std::move(h));
  }
  return out;
}

std::string names_phrase(const multi_handles& hs) {
  std::string out;
  for (const auto& h : hs) {
    if (!out.empty()) out += ", ";
    out += "'" + h->names->name + "'";
  }
  return out;
}

namespace {

const script& multi_acquire_script() {
  static const script s{std::string(lua::multi_acquire)};
  return s;
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
std::string wrong_type_message(const multi_handles& hs, const reply& r) {
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
void drop_uncertain(lock_core& core, const multi_handles& hs, const std::string& owner) {
  const auto& kind = reentrant_kind();
  std::vector<std::string_view> keys;
  std::vector<std::string_view> args{owner, unlock_message, core.topo().publish_command()};
  for (const auto& h : hs) {
    keys.push_back(h->names->name);
    keys.push_back(h->names->channel);
    if (const auto* record = core.record_key_of(*h->names)) keys.push_back(*record);
    args.push_back(core.grants().find_live(kind, h->names->name, owner) ? "0" : "1");
  }
  auto& topo = core.topo();
  topo.eval(topo.nodes_for(hs.front()->names->name).front(), multi_drop_script(), keys, args,
            steady::now() + core.options().connection.command_timeout, durability::master,
            [](std::error_code, reply) {});
}

// Builds the outcome from the script's reply, on the I/O thread (adopt_grant may run on_lost
// callbacks, which belong there).
one_call_result on_call_reply(lock_core& core, const multi_handles& hs, const std::string& owner,
                              const lease_options& o, std::chrono::milliseconds lease_time,
                              std::error_code ec, const reply& r, steady::time_point sent_at) {
  one_call_result out;
  const auto& kind = reentrant_kind();
  auto call_on = [&](const lock_handle& h) {
    const auto node = core.topo().nodes_for(h.names->name).front();
    const auto deadline = steady::now() + core.options().connection.command_timeout;
    lock_call call{core.topo(), node, *h.names, owner, lease_time, deadline};
    call.identity = core.holder_record();
    return call;
  };
  if (ec == errc::not_replicated) {
    // The master granted, too few replicas have it: a failover could hand the names to someone
    // else. Undone, not handed out: each re-entry gives back its count, each new grant goes.
    const auto grants = decode_grants(r, hs.size());
    if (grants.empty()) {
      out.what = one_call_result::end::busy;  // nothing was written; the WAIT was moot
      return out;
    }
    for (std::size_t i = 0; i < grants.size(); ++i) {
      if (grants[i].first == 2) {
        kind.release(call_on(*hs[i]), [](std::error_code, reply) {});
      } else {
        kind.drop(call_on(*hs[i]), [](std::error_code, reply) {});
      }
    }
    out.what = one_call_result::end::retry;
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
    out.what = transient ? one_call_result::end::retry : one_call_result::end::failed;
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
    out.what = one_call_result::end::busy;
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
  out.what = born_dead ? one_call_result::end::retry : one_call_result::end::granted;
  return out;
}

}  // namespace

bool one_call_reaches(lock_core& core, const multi_handles& hs) {
  if (!core.options().redlock.masters.empty()) return false;
  auto& t = core.topo();
  const auto first = t.nodes_for(hs.front()->names->name);
  if (first.size() != 1) return false;
  const auto node = first.front();
  const auto route = t.route_of(node, hs.front()->names->name);
  for (const auto& h : hs) {
    for (const std::string_view key : {h->names->name, h->names->fence_key, h->names->holder_key}) {
      const auto nodes = t.nodes_for(key);
      if (nodes.size() != 1 || nodes.front() != node ||
          !one_script_reaches(t.route_of(node, key), route)) {
        return false;
      }
    }
  }
  return true;
}

void send_one_call(lock_core& core, const multi_handles& hs, const lease_options& o,
                   const std::string& owner, std::chrono::milliseconds lease_time,
                   steady::time_point until, std::function<void(one_call_result)> done) {
  std::vector<std::string_view> keys;
  keys.reserve(3 * hs.size());
  for (const auto& h : hs) {
    keys.push_back(h->names->name);
    keys.push_back(h->names->fence_key);
    if (const auto* record = core.record_key_of(*h->names)) keys.push_back(*record);
  }
  const std::string lease_ms = std::to_string(lease_time.count());
  const std::string_view args[] = {lease_ms, owner, core.holder_record()};
  core.counters.attempts.fetch_add(1, std::memory_order_relaxed);
  const auto sent_at = steady::now();
  auto& topo = core.topo();
  topo.eval(topo.nodes_for(hs.front()->names->name).front(), multi_acquire_script(), keys, args,
            until, durability::replicas,
            [&core, &hs, &o, &owner, lease_time, sent_at, done = std::move(done)](
                std::error_code ec, reply r) {
              // A result must always be handed over: an acquisition waits for it.
              one_call_result out;
              try {
                out = on_call_reply(core, hs, owner, o, lease_time, ec, r, sent_at);
              } catch (const error& e) {
                out = {};
                out.ec = e.code();
                out.message = e.what();
              } catch (...) {
                out = {};
                out.ec = errc::unexpected_reply;
                out.message = "acquiring locks " + names_phrase(hs) + ": internal failure";
              }
              done(std::move(out));
            });
}

}  // namespace dlock::detail
