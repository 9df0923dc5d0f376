// The marketplace benchmark of Redis in Action §6.2, following docs/market.md.
//
// The book publishes its algorithms but no driver. Everything the book leaves open is decided
// here once and reported in `report::choices`; the main points:
//
//  * Workers are threads. Each has its own redis_client (its own connection): WATCH state
//    belongs to a connection, and the book's simulation ran one connection per process.
//  * The work done under a lock is the same commands in book-lock, book-fine, dlock-coarse and
//    dlock-fine, the book's purchase_item_with_lock: plain commands, no WATCH, each group sent
//    as a transactional pipeline (MULTI ... EXEC in one round trip), as the book's
//    `conn.pipeline(True)` does. The dlock variants carry the first read with the acquisition
//    and end with the lease's write_and_release (the writes checked against the hold, the
//    release behind them), each group as atomic as MULTI makes it (docs/market.md).
//  * Listing takes the same lock as purchasing: the coarse variants lock the whole market (the
//    book: "the market only lists or sells one item at a time"); the fine variants lock the
//    item's market entry "<itemid>.<sellerid>". A lister is the only one who can touch that name
//    before the item is on the market, so its lock is uncontended unless a buyer, having just
//    seen the new entry in ZRANGE, asks for it before the lister lets go. That is why the book's
//    fine-grained table shows listers and buyers no longer slowing each other down.
//  * Every call is bounded by the book's limits (list 5 s, purchase 10 s, lock acquisition 10 s).
//    Workers start no call after the end of the run. A WATCH call still retrying then is
//    abandoned and counted nowhere (it could otherwise run 10 s past the end); a call waiting
//    for a lock finishes (lock queues drain in milliseconds) and counts. `seconds` is measured
//    to the last worker's stop, so rates stay honest.
//  * A buyer's ZRANGE (finding an item) is not part of its purchase call, as in the book, where
//    purchase_item receives the item and its listed price.
//  * dlock variants: one dlock::client shared by all workers, simple lock, fixed 10 s lease,
//    try_acquire_until(10 s) (event-driven waiting); the release leaves with the writes
//    (write_and_release) or, when the work wrote nothing, by lease::release_async(); the worker
//    never waits for a release's reply. One client per process is how a service runs dlock,
//    and the shared client costs the server the least per operation (its command connections,
//    two by default, batch the workers' lock scripts, and waiters on one item queue locally and
//    are woken by our own release without waiting for the PUBLISH echo). A client per worker
//    (--per-worker-client) costs the client less and ran 8-20 % faster when measured: a
//    thread per worker to read its replies, where the shared client's one I/O thread wakes
//    them all. Measured with the probe's other switches
//    (--one-connection, --reentrant, --watchdog, --try-first): lock kind, lease mode and a first
//    try_acquire() change nothing measurable, so the cheapest server-side layout (SET NX PX) and
//    no watchdog bookkeeping are kept. With --separate-reads/--separate-writes the work runs
//    on each worker's own connection instead: MULTI on the shared, multiplexed connection would
//    take in other workers' commands.
//  * no-lock runs the lock variants' work, command for command, with no lock at all: the rate
//    the work alone sustains, a ceiling for what any lock costs. It is not safe (two buyers can
//    buy one item); it counts how often that happened instead of failing.
//  * After each run, off the clock, an audit checks that the books balance (market size, items
//    in buyers' inventories, items in two of them, money moved): a lock that let two workers at
//    one item shows there. The tables and JSON are report.cpp's.
#include "market/market.hpp"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <utility>

#include <dlock/dlock.hpp>

#include "bench_support.hpp"
#include "embedded/redis_server.hpp"
#include "market/text.hpp"

namespace dlock::market {

namespace {

using detail::format_number;
using detail::grouped;
using detail::load_text;
using detail::ms_text;

using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;
using ms_double = std::chrono::duration<double, std::milli>;

// ---- the book's constants -----------------------------------------------------------------------

constexpr auto list_limit = 5s;       // list_item retries for up to 5 s
constexpr auto purchase_limit = 10s;  // purchase_item retries for up to 10 s
constexpr auto lock_limit = 10s;      // acquire_lock(acquire_timeout=10)
constexpr auto lock_poll = 1ms;       // acquire_lock sleeps .001 s between SETNX attempts
constexpr auto empty_backoff = 1ms;   // docs/market.md: an empty market costs a 1 ms back-off
constexpr std::int64_t buyer_funds = 1'000'000'000'000;  // 10^12: funds never bind
constexpr int min_price = 1;
constexpr int max_price = 100;
constexpr int cheapest = 10;  // a buyer picks among the 10 cheapest entries

const std::string market_key = "market:";

// ---- variants -----------------------------------------------------------------------------------

enum class variant_kind { watch, book_lock, book_fine, dlock_coarse, dlock_fine, no_lock, script };

struct variant_info {
  std::string_view name;
  variant_kind kind;
  std::string_view book;  // the matching row of the book's Table 6.3
};

constexpr variant_info variant_table[] = {
    {"watch", variant_kind::watch, "no lock"},
    {"book-lock", variant_kind::book_lock, "with lock"},
    {"book-fine", variant_kind::book_fine, "fine-grained lock"},
    {"dlock-coarse", variant_kind::dlock_coarse, "with lock"},
    {"dlock-fine", variant_kind::dlock_fine, "fine-grained lock"},
    {"no-lock", variant_kind::no_lock, ""},
    {"script", variant_kind::script, ""},
};

const variant_info& find_variant(std::string_view name) {
  for (const auto& v : variant_table) {
    if (v.name == name) return v;
  }
  std::string known;
  for (const auto& v : variant_table) {
    known += (known.empty() ? "" : ", ") + std::string(v.name);
  }
  throw std::invalid_argument("unknown market variant '" + std::string(name) +
                              "' (known: " + known + ")");
}

bool uses_dlock(variant_kind k) {
  return k == variant_kind::dlock_coarse || k == variant_kind::dlock_fine;
}

// The variants that take a lock around the work (they report lock timings).
bool uses_lock(variant_kind k) {
  return k != variant_kind::watch && k != variant_kind::no_lock && k != variant_kind::script;
}

// ---- Lua ----------------------------------------------------------------------------------------

// Fills an inventory with "<prefix><n>" for n in [first, last], server-side: no item ids cross
// the network, and the run's setup stays short even for millions of items.
const char* const fill_lua = R"lua(
local first, last = tonumber(ARGV[2]), tonumber(ARGV[3])
local batch = {}
for i = first, last do
  batch[#batch + 1] = ARGV[1] .. i
  if #batch == 1000 then
    redis.call('sadd', KEYS[1], unpack(batch))
    batch = {}
  end
end
if #batch > 0 then redis.call('sadd', KEYS[1], unpack(batch)) end
return last - first + 1
)lua";

// The `script` variant: list_item as one atomic step. No lock, no retry: the ceiling.
// KEYS[1] seller's inventory, KEYS[2] market:   ARGV[1] item id, ARGV[2] member, ARGV[3] price
const char* const list_lua = R"lua(
if redis.call('sismember', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('zadd', KEYS[2], ARGV[3], ARGV[2])
redis.call('srem', KEYS[1], ARGV[1])
return 1
)lua";

// The `script` variant: purchase_item as one atomic step, with the book's checks.
// KEYS[1] market:, KEYS[2] buyer, KEYS[3] seller, KEYS[4] buyer's inventory
// ARGV[1] member, ARGV[2] item id, ARGV[3] the price the buyer saw
// Returns 1 bought, 0 gone or repriced, -1 not enough funds.
const char* const purchase_lua = R"lua(
local price = redis.call('zscore', KEYS[1], ARGV[1])
if not price or tonumber(price) ~= tonumber(ARGV[3]) then return 0 end
local funds = tonumber(redis.call('hget', KEYS[2], 'funds'))
if not funds or funds < tonumber(price) then return -1 end
redis.call('hincrby', KEYS[3], 'funds', price)
redis.call('hincrby', KEYS[2], 'funds', -tonumber(price))
redis.call('sadd', KEYS[4], ARGV[2])
redis.call('zrem', KEYS[1], ARGV[1])
return 1
)lua";

// ---- small helpers ------------------------------------------------------------------------------

using command_list = std::initializer_list<std::initializer_list<std::string_view>>;

// Sends `commands` back to back on one connection (they leave in one write, or few), wrapped in
// MULTI ... EXEC when `transaction`, and waits for all replies: one round trip, as a redis-py
// pipeline. Throws dlock::error on any failure.
std::vector<reply> pipeline(redis_client& r, command_list commands, bool transaction = false) {
  struct state {
    std::mutex mutex;
    std::condition_variable cv;
    std::vector<reply> replies;
    std::size_t left = 0;
    std::error_code ec;
    std::string what;
  };
  auto s = std::make_shared<state>();
  s->left = commands.size() + (transaction ? 2 : 0);
  s->replies.resize(s->left);
  std::size_t i = 0;
  auto send = [&](std::initializer_list<std::string_view> c) {
    r.command_async(c, [s, i](std::error_code ec, reply rep) {
      std::lock_guard lock(s->mutex);
      if (ec && !s->ec) {
        s->ec = ec;
        s->what = rep.is_error() ? rep.str() : ec.message();
      }
      s->replies[i] = std::move(rep);
      if (--s->left == 0) s->cv.notify_one();
    });
    ++i;
  };
  if (transaction) send({"MULTI"});
  for (const auto& c : commands)
    send(c);
  if (transaction) send({"EXEC"});
  std::unique_lock lock(s->mutex);
  s->cv.wait(lock, [&] { return s->left == 0; });
  if (s->ec) throw dlock::error(s->ec, "pipeline: " + s->what);
  return std::move(s->replies);
}

std::int64_t to_int(const reply& r) {
  if (r.is_integer()) return r.integer();
  const auto& s = r.str();
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) {
    throw dlock::error(errc::unexpected_reply, "not an integer: " + r.to_string());
  }
  return v;
}

// The EXEC reply of a transactional pipeline that ran no WATCH: it cannot abort.
const reply& exec_result(const std::vector<reply>& replies) {
  const auto& r = replies.back();
  if (!r.is_array()) {
    throw dlock::error(errc::unexpected_reply, "EXEC without WATCH returned " + r.to_string());
  }
  return r;
}

template <class T>
double percentile(std::vector<T>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::clamp<std::size_t>(rank, 1, v.size()) - 1];
}

// A field of INFO (e.g. "used_cpu_user"), as a number; 0 if missing.
double info_number(redis_client& r, std::string_view section, std::string_view field) {
  const auto text = r.command({"INFO", section}).str();
  const std::string key = std::string(field) + ":";
  auto at = text.find(key);
  if (at == std::string::npos || (at > 0 && text[at - 1] != '\n')) return 0;
  return std::strtod(text.c_str() + at + key.size(), nullptr);
}

std::string info_text(redis_client& r, std::string_view section, std::string_view field) {
  const auto text = r.command({"INFO", section}).str();
  const std::string key = std::string(field) + ":";
  auto at = text.find(key);
  if (at == std::string::npos) return "?";
  at += key.size();
  return text.substr(at, text.find_first_of("\r\n", at) - at);
}

// Adds items "<user>-<first>" … "<user>-<last>" to the user's inventory, in chunks that bound
// how long one script call blocks the server.
void fill_inventory(redis_client& r, const script& fill, const std::string& user,
                    std::uint64_t first, std::uint64_t last) {
  constexpr std::uint64_t chunk = 100'000;
  for (auto from = first; from <= last; from += chunk) {
    const auto to = std::min(last, from + chunk - 1);
    r.eval(fill, {"inventory:" + user}, {user + "-", std::to_string(from), std::to_string(to)});
  }
}

// ---- one run's shared state ---------------------------------------------------------------------

enum class outcome { done, stale, refused, timed_out, abandoned };

// What one worker counted. Merged into a row after the threads are joined.
struct tally {
  std::uint64_t listed = 0, bought = 0, retries = 0, stale = 0, refused = 0;
  std::uint64_t list_timeouts = 0, purchase_timeouts = 0, abandoned = 0, list_stale = 0;
  std::uint64_t refills = 0, release_failures = 0, empty_market = 0;
  std::uint64_t double_sold = 0;  // purchases whose ZREM found the entry already gone
  std::uint64_t lock_waits = 0;   // acquisitions whose first attempt found the lock held
  double lock_wait_ms = 0, lock_wait_max_ms = 0;
  std::vector<float> acquire_us, release_us;  // per lock call (granted acquisitions only)
  double work_us = 0;                         // total time of the work under locks
  double purchase_ms = 0;  // every purchase call that ended (any outcome but abandoned)
  std::vector<double> ok_ms;
};

// A dlock variant's client: the server's URL, and the settings the run measures.
client_options lock_client_options(const std::string& url, const dlock_settings& dl) {
  auto o = client_options::from_url(url);
  o.busy_poll_under_load = dl.busy_poll_under_load;
  if (dl.busy_poll) o.busy_poll = *dl.busy_poll;
  o.fence_counter = dl.fence_counter;
  return o;
}

struct run_context {
  variant_kind kind;
  std::string url;
  dlock_settings dl;
  clock_type::time_point end;
  std::optional<dlock::client> shared_locks;  // dlock variants with a shared client
  script list_script{list_lua};
  script purchase_script{purchase_lua};
  script fill_script{fill_lua};
  std::atomic<bool> failed{false};
  std::mutex error_mutex;
  std::exception_ptr error;

  bool over() const { return failed.load(std::memory_order_relaxed) || clock_type::now() >= end; }
};

// ---- a trader: one user's connection and the book's operations ----------------------------------

class trader {
 public:
  trader(run_context& ctx, std::string user)
      : ctx_(ctx),
        user_(std::move(user)),
        hash_("users:" + user_),
        inventory_("inventory:" + user_),
        rng_(std::random_device{}()) {
    if (uses_dlock(ctx.kind)) {
      if (ctx.shared_locks) {
        locks_.emplace(*ctx.shared_locks);
      } else {
        locks_.emplace(lock_client_options(ctx.url, ctx.dl));
        // Locks and work on one connection, as the book variants have it.
        if (ctx.dl.work_on_lock_connection) redis_ = &locks_->redis();
      }
    }
    if (!redis_) {
      own_redis_ = std::make_unique<redis_client>(ctx.url);
      redis_ = own_redis_.get();
    }
  }

  const std::string& user() const { return user_; }

  // Socket writes and commands on this trader's connections (a private lock client included;
  // a shared one is counted once by the caller).
  std::pair<std::uint64_t, std::uint64_t> writes_and_commands() const {
    std::pair<std::uint64_t, std::uint64_t> sum{0, 0};
    auto add = [&](const redis_client& r) {
      const auto c = r.counters();
      sum.first += c.writes;
      sum.second += c.commands_sent;
    };
    if (own_redis_) add(*own_redis_);
    if (locks_ && !ctx_.shared_locks) add(locks_->redis());
    return sum;
  }
  redis_client& redis() { return *redis_; }
  std::mt19937_64& rng() { return rng_; }

  // Puts `itemid` (which must be in our inventory) on the market at `price`.
  outcome list(const std::string& itemid, std::string_view price, tally& t) {
    const std::string member = itemid + "." + user_;
    const auto limit = clock_type::now() + list_limit;
    switch (ctx_.kind) {
      case variant_kind::watch:
        return list_watch(itemid, member, price, limit);
      case variant_kind::script: {
        const auto r =
            redis_->eval(ctx_.list_script, {inventory_, market_key}, {itemid, member, price});
        return r.integer() == 1 ? outcome::done : outcome::stale;
      }
      case variant_kind::no_lock:
        return list_locked(itemid, member, price);
      default:
        return locked(lock_name(member), clock_type::now() + lock_limit, t,
                      {{"SISMEMBER", inventory_, itemid}},
                      [&](const std::vector<reply>* read, dlock::lease* held) {
                        return list_locked(itemid, member, price, read, held);
                      });
    }
  }

  // Buys `itemid` of `seller`, listed at `price`.
  outcome purchase(const std::string& itemid, const std::string& seller, std::string_view price,
                   tally& t) {
    const std::string member = itemid + "." + seller;
    const auto limit = clock_type::now() + purchase_limit;
    switch (ctx_.kind) {
      case variant_kind::watch:
        return purchase_watch(itemid, seller, member, price, limit, t);
      case variant_kind::script: {
        const auto r =
            redis_->eval(ctx_.purchase_script, {market_key, hash_, "users:" + seller, inventory_},
                         {member, itemid, price});
        const auto v = r.integer();
        return v == 1 ? outcome::done : v == 0 ? outcome::stale : outcome::refused;
      }
      case variant_kind::no_lock:
        return purchase_locked(itemid, seller, member, price, t);
      default:
        return locked(lock_name(member), clock_type::now() + lock_limit, t,
                      {{"ZSCORE", market_key, member}, {"HGET", hash_, "funds"}},
                      [&](const std::vector<reply>* read, dlock::lease* held) {
                        return purchase_locked(itemid, seller, member, price, t, read, held);
                      });
    }
  }

  // Adds items "<user>-<first>" … "<user>-<last>" to our inventory.
  void stock(std::uint64_t first, std::uint64_t last) {
    fill_inventory(*redis_, ctx_.fill_script, user_, first, last);
  }

 private:
  // Why the call must stop, if it must: the run is over (abandoned) or the book's limit passed.
  std::optional<outcome> out_of_time(clock_type::time_point limit) const {
    if (ctx_.over()) return outcome::abandoned;
    if (clock_type::now() >= limit) return outcome::timed_out;
    return std::nullopt;
  }

  // ---- watch: the book's list_item and purchase_item ----

  outcome list_watch(const std::string& itemid, const std::string& member, std::string_view price,
                     clock_type::time_point limit) {
    while (true) {
      if (auto stop = out_of_time(limit)) return *stop;
      redis_->command({"WATCH", inventory_});
      if (redis_->command({"SISMEMBER", inventory_, itemid}).integer() == 0) {
        redis_->command({"UNWATCH"});
        return outcome::stale;
      }
      const auto r = pipeline(
          *redis_,
          {{"MULTI"}, {"ZADD", market_key, price, member}, {"SREM", inventory_, itemid}, {"EXEC"}});
      if (!r.back().is_nil()) return outcome::done;
      // A failed EXEC while listing is not a purchase retry: docs/market.md counts only those.
    }
  }

  outcome purchase_watch(const std::string& itemid, const std::string& seller,
                         const std::string& member, std::string_view price,
                         clock_type::time_point limit, tally& t) {
    const std::string seller_hash = "users:" + seller;
    // Appended, not "-" + std::string: g++ 12 -O3 reports a false -Wrestrict (GCC bug 105329).
    const std::string minus = std::string("-").append(price);
    while (true) {
      if (auto stop = out_of_time(limit)) return *stop;
      redis_->command({"WATCH", market_key, hash_});
      const auto listed = redis_->command({"ZSCORE", market_key, member});
      const auto funds = redis_->command({"HGET", hash_, "funds"});
      if (listed.is_nil() || listed.str() != price) {
        redis_->command({"UNWATCH"});
        return outcome::stale;
      }
      if (to_int(funds) < to_int(listed)) {
        redis_->command({"UNWATCH"});
        return outcome::refused;
      }
      const auto r = pipeline(*redis_, {{"MULTI"},
                                        {"HINCRBY", seller_hash, "funds", price},
                                        {"HINCRBY", hash_, "funds", minus},
                                        {"SADD", inventory_, itemid},
                                        {"ZREM", market_key, member},
                                        {"EXEC"}});
      if (!r.back().is_nil()) return outcome::done;
      ++t.retries;  // someone changed the market or our funds since WATCH
    }
  }

  // ---- the work done under a lock (identical for every lock variant, and no-lock's) ----

  // `read`, when the acquisition brought it: the SISMEMBER's reply (no-lock and the book's
  // locks read here). `held`: see write().
  outcome list_locked(const std::string& itemid, const std::string& member, std::string_view price,
                      const std::vector<reply>* read = nullptr, dlock::lease* held = nullptr) {
    const auto in_inventory =
        read ? read->at(0) : redis_->command({"SISMEMBER", inventory_, itemid});
    if (in_inventory.integer() == 0) return outcome::stale;
    write({{"ZADD", market_key, price, member}, {"SREM", inventory_, itemid}}, held);
    return outcome::done;
  }

  outcome purchase_locked(const std::string& itemid, const std::string& seller,
                          const std::string& member, std::string_view price, tally& t,
                          const std::vector<reply>* read = nullptr, dlock::lease* held = nullptr) {
    // `read`, when the acquisition brought it: the ZSCORE's and HGET's replies, read together.
    std::vector<reply> own;
    if (!read) {
      own = exec_result(pipeline(*redis_, {{"MULTI"},
                                           {"ZSCORE", market_key, member},
                                           {"HGET", hash_, "funds"},
                                           {"EXEC"}}))
                .elements();
    }
    const auto& values = read ? *read : own;
    const auto& listed = values.at(0);
    if (listed.is_nil() || listed.str() != price) return outcome::stale;
    if (to_int(values.at(1)) < to_int(listed)) return outcome::refused;
    // Appended, not "-" + std::string: g++ 12 -O3 reports a false -Wrestrict (GCC bug 105329).
    const std::string minus = std::string("-").append(price);
    const auto written = write({{"HINCRBY", "users:" + seller, "funds", price},
                                {"HINCRBY", hash_, "funds", minus},
                                {"SADD", inventory_, itemid},
                                {"ZREM", market_key, member}},
                               held);
    // ZREM removed nothing: another buyer took the entry between our read and this write, and
    // both paid for it. A lock rules that out; only no-lock can count any.
    if (to_int(written.at(3)) == 0) ++t.double_sold;
    return outcome::done;
  }

  // The work's writes, as one transaction; their replies. With `held` (dlock variants with
  // dlock_settings::writes_with_release), the lease's write_and_release: the hold checked and
  // the writes run in one script, the lock released right behind them, one round trip on the
  // lock's connection (the lease is empty afterwards). Otherwise MULTI ... EXEC on our own
  // connection, as the book's pipeline(True).
  std::vector<reply> write(command_list commands, dlock::lease* held) {
    if (!held) return exec_result(pipeline(*redis_, commands, true)).elements();
    std::vector<std::vector<std::string>> writes;
    writes.reserve(commands.size());
    for (const auto& c : commands)
      writes.emplace_back(c.begin(), c.end());
    return held->write_and_release(writes);
  }

  // ---- locks ----

  // The lock a list or purchase of `member` takes: the market, or the item.
  std::string lock_name(const std::string& member) const {
    const bool coarse =
        ctx_.kind == variant_kind::book_lock || ctx_.kind == variant_kind::dlock_coarse;
    return "lock:" + (coarse ? market_key : member);
  }

  // Runs `work` under the variant's lock on `key`. `reads` are the work's first reads: with
  // dlock_settings::reads_with_acquisition they travel with the acquisition and `work` gets
  // their replies, otherwise nullptr and it reads them itself.
  template <class Work>
  outcome locked(const std::string& key, clock_type::time_point limit, tally& t,
                 const std::vector<std::vector<std::string>>& reads, Work&& work) {
    // Each phase is timed: the lock's own cost is what the lock variants differ in.
    bool waited = false;
    auto phase_us = [last = clock_type::now()]() mutable {
      const auto now = clock_type::now();
      return std::chrono::duration<double, std::micro>(now - std::exchange(last, now)).count();
    };
    auto acquired = [&](bool ok) {
      const double us = phase_us();
      if (waited) {
        ++t.lock_waits;
        t.lock_wait_ms += us / 1000;
        t.lock_wait_max_ms = std::max(t.lock_wait_max_ms, us / 1000);
      }
      if (ok) t.acquire_us.push_back(static_cast<float>(us));
    };
    auto worked = [&] { t.work_us += phase_us(); };
    auto released = [&] { t.release_us.push_back(static_cast<float>(phase_us())); };
    if (uses_dlock(ctx_.kind)) {
      auto [held, replies] = dlock_acquire(key, limit, waited, reads);
      acquired(static_cast<bool>(held));
      if (!held) return outcome::timed_out;
      const outcome o = work(ctx_.dl.reads_with_acquisition ? &replies : nullptr,
                             ctx_.dl.writes_with_release ? &held : nullptr);
      worked();
      // The release need not hold up the worker: it goes out at once and its answer arrives in
      // the background (failures show in the client's stats, lock_release_failures). Work
      // that wrote with write_and_release has released already.
      if (held) held.release_async();
      released();
      return o;
    }
    const auto id = book_acquire(key, limit, waited);
    acquired(id.has_value());
    if (!id) return ctx_.failed ? outcome::abandoned : outcome::timed_out;
    const outcome o = work(nullptr, nullptr);
    worked();
    if (!book_release(key, *id, t)) ++t.release_failures;
    released();
    return o;
  }

  // The book's acquire_lock: SETNX a random 128-bit id, polling every millisecond until the
  // limit (or until another worker failed).
  std::optional<std::string> book_acquire(const std::string& key, clock_type::time_point limit,
                                          bool& waited) {
    const std::string id = random_id();
    while (true) {
      if (redis_->command({"SETNX", key, id}).integer() == 1) return id;
      waited = true;
      if (clock_type::now() >= limit || ctx_.failed.load(std::memory_order_relaxed)) {
        return std::nullopt;
      }
      std::this_thread::sleep_for(lock_poll);
    }
  }

  // The book's release_lock: WATCH the key, GET it, and if it is still ours delete it in
  // MULTI/EXEC, retrying if the key changed in between. A failed EXEC here is inside a purchase
  // call, so for purchases it counts as a retry (it never happens: only the holder writes).
  bool book_release(const std::string& key, const std::string& id, tally& t) {
    while (true) {
      redis_->command({"WATCH", key});
      const auto current = redis_->command({"GET", key});
      if (!current.is_string() || current.str() != id) {
        redis_->command({"UNWATCH"});
        return false;
      }
      const auto r = pipeline(*redis_, {{"MULTI"}, {"DEL", key}, {"EXEC"}});
      if (!r.back().is_nil()) return true;
      ++t.retries;
    }
  }

  // The wait is bounded by the book's limit only, as book_acquire's is: a call waiting for a lock
  // finishes (lock queues drain in milliseconds) and counts.
  // `waited` says whether the first attempt found the lock held (known only with try_first).
  dlock::lease_and_reads dlock_acquire(const std::string& name, clock_type::time_point limit,
                                       bool& waited,
                                       const std::vector<std::vector<std::string>>& reads) {
    dlock::lease_options lo;
    if (ctx_.dl.fixed_lease) lo.lease_time = std::chrono::milliseconds(ctx_.dl.lease_ms);
    // Event-driven: waits for the unlock message. A wait <= 0 is one attempt.
    auto attempt = [&](auto& lock, clock_type::time_point until) -> dlock::lease_and_reads {
      if (ctx_.dl.reads_with_acquisition) {
        const auto wait = std::chrono::ceil<std::chrono::milliseconds>(until - clock_type::now());
        return lock.try_acquire_and_read(wait, reads, lo);
      }
      return {lock.try_acquire_until(until, lo), {}};
    };
    auto take = [&](auto lock) {
      if (ctx_.dl.try_first) {
        // One attempt first (it barges past local waiters, as try_lock does), so that a
        // contended acquisition can be told apart and timed.
        if (auto r = attempt(lock, clock_type::now()); r.held) return r;
        waited = true;
      }
      return attempt(lock, limit);
    };
    return ctx_.dl.simple ? take(locks_->simple(name)) : take(locks_->reentrant(name));
  }

  std::string random_id() {
    char text[40];
    const auto a = rng_();
    const auto b = rng_();
    std::snprintf(text, sizeof text, "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(a >> 32),
                  static_cast<unsigned>((a >> 16) & 0xffff), static_cast<unsigned>(a & 0xffff),
                  static_cast<unsigned>(b >> 48),
                  static_cast<unsigned long long>(b & 0xffffffffffffULL));
    return text;
  }

  run_context& ctx_;
  std::string user_;
  std::string hash_;
  std::string inventory_;
  std::optional<dlock::client> locks_;
  std::unique_ptr<redis_client> own_redis_;
  redis_client* redis_ = nullptr;  // the connection for the work: our own, or our lock client's
  std::mt19937_64 rng_;
};

// ---- the worker loops ---------------------------------------------------------------------------

void lister_loop(run_context& ctx, trader& me, std::uint64_t stocked, tally& t) {
  std::uniform_int_distribution<int> prices(min_price, max_price);
  std::uint64_t next = 0;
  while (!ctx.over()) {
    if (next == stocked) {
      // Out of pre-filled items: the trial under-estimated. Refill on the clock and say so.
      const auto more = std::max<std::uint64_t>(stocked, 1000);
      me.stock(stocked, stocked + more - 1);
      stocked += more;
      ++t.refills;
    }
    const std::string itemid = me.user() + "-" + std::to_string(next++);
    const std::string price = std::to_string(prices(me.rng()));
    switch (me.list(itemid, price, t)) {
      case outcome::done:
        ++t.listed;
        break;
      case outcome::timed_out:
        ++t.list_timeouts;
        break;
      case outcome::stale:
      case outcome::refused:
        ++t.list_stale;  // the item was not in our inventory: never expected
        break;
      case outcome::abandoned:
        ++t.abandoned;
        break;
    }
  }
}

void buyer_loop(run_context& ctx, trader& me, tally& t) {
  while (!ctx.over()) {
    const auto top =
        me.redis().command({"ZRANGE", market_key, "0", std::to_string(cheapest - 1), "WITHSCORES"});
    const auto& entries = top.elements();
    if (entries.size() < 2) {
      ++t.empty_market;
      std::this_thread::sleep_for(empty_backoff);
      continue;
    }
    std::uniform_int_distribution<std::size_t> pick(0, entries.size() / 2 - 1);
    const auto k = pick(me.rng());
    const std::string& member = entries[2 * k].str();
    const std::string& price = entries[2 * k + 1].str();
    const auto dot = member.find('.');
    const std::string itemid = member.substr(0, dot);
    const std::string seller = member.substr(dot + 1);

    const auto started = clock_type::now();
    const auto o = me.purchase(itemid, seller, price, t);
    const double took = ms_double(clock_type::now() - started).count();
    if (o != outcome::abandoned) t.purchase_ms += took;
    switch (o) {
      case outcome::done:
        ++t.bought;
        t.ok_ms.push_back(took);
        break;
      case outcome::stale:
        ++t.stale;
        break;
      case outcome::refused:
        ++t.refused;
        break;
      case outcome::timed_out:
        ++t.purchase_timeouts;
        break;
      case outcome::abandoned:
        ++t.abandoned;
        break;
    }
  }
}

// ---- a run --------------------------------------------------------------------------------------

std::string user_id(char role, int i) {
  return std::string(1, role) + std::to_string(i);
}

// Flushes the database and creates the users and the listers' inventories.
void prepare(redis_client& admin, run_context& ctx, const load& l, std::uint64_t stock) {
  admin.command({"FLUSHALL", "SYNC"});
  for (int i = 0; i < l.listers; ++i) {
    const auto id = user_id('L', i);
    admin.command({"HSET", "users:" + id, "name", id, "funds", "0"});
  }
  for (int j = 0; j < l.buyers; ++j) {
    const auto id = user_id('B', j);
    admin.command({"HSET", "users:" + id, "name", id, "funds", std::to_string(buyer_funds)});
  }
  for (int i = 0; i < l.listers; ++i) {
    if (stock > 0) fill_inventory(admin, ctx.fill_script, user_id('L', i), 0, stock - 1);
  }
}

// After a run, off the clock: the books must balance whatever the variant, or two workers
// touched one item at once. Every listing put one entry on the market and every purchase took
// one off, moved one item into a buyer's inventory and moved its price from buyer to seller.
// Also counts the items that sit in more than one buyer's inventory (extra copies: an item sold
// twice counts 1), which only a variant without a lock (no-lock) can produce.
struct audit_result {
  std::string problems;  // "" if all holds, else what does not
  std::int64_t extra_copies = 0;
};

audit_result audit(redis_client& admin, const load& l, std::uint64_t listed, std::uint64_t bought) {
  std::string problems;
  auto expect = [&](const std::string& what, std::int64_t got, std::int64_t want) {
    if (got != want) {
      problems += (problems.empty() ? "" : "; ") + what + " is " + std::to_string(got) +
                  ", expected " + std::to_string(want);
    }
  };
  const auto on_market = to_int(admin.command({"ZCARD", market_key}));
  expect("ZCARD market:", on_market,
         static_cast<std::int64_t>(listed) - static_cast<std::int64_t>(bought));
  std::int64_t in_inventories = 0, spent = 0, earned = 0;
  for (int j = 0; j < l.buyers; ++j) {
    const auto id = user_id('B', j);
    in_inventories += to_int(admin.command({"SCARD", "inventory:" + id}));
    spent += buyer_funds - to_int(admin.command({"HGET", "users:" + id, "funds"}));
  }
  for (int i = 0; i < l.listers; ++i) {
    earned += to_int(admin.command({"HGET", "users:" + user_id('L', i), "funds"}));
  }
  // Distinct items over all buyers' inventories, counted server-side (no item ids cross the
  // network); the scratch key is gone before the caller counts the keys left.
  const std::string scratch = "market-audit:union";
  std::vector<std::string> union_args{"SUNIONSTORE", scratch};
  for (int j = 0; j < l.buyers; ++j)
    union_args.push_back("inventory:" + user_id('B', j));
  const auto distinct = to_int(admin.command(union_args));
  admin.command({"DEL", scratch});
  const std::int64_t extra_copies = in_inventories - distinct;
  expect("items in buyers' inventories", in_inventories, static_cast<std::int64_t>(bought));
  expect("items in more than one buyer's inventory", extra_copies, 0);
  expect("funds earned by sellers", earned, spent);
  return {problems, extra_copies};
}

struct run_result {
  std::string audit;              // "" when the books balance
  std::int64_t extra_copies = 0;  // items in more than one buyer's inventory
  std::int64_t keys = 0;          // DBSIZE at the end: shows per-item keys a lock leaves behind
  row r;
  std::vector<double> lister_rates;  // items listed per second, per lister
  tally sum;
  client_stats lock_stats;  // dlock variants with a shared client
  double client_cpu = 0, server_cpu = 0, server_commands = 0;
  double client_writes = 0, client_commands = 0;  // not counting the pub/sub connections
};

run_result run_once(const std::string& url, redis_client& admin, const variant_info& v,
                    const load& l, double seconds, std::uint64_t stock, const dlock_settings& dl) {
  run_context ctx;
  ctx.kind = v.kind;
  ctx.url = url;
  ctx.dl = dl;
  prepare(admin, ctx, l, stock);
  if (uses_dlock(v.kind) && dl.shared_client)
    ctx.shared_locks.emplace(lock_client_options(url, dl));

  // Connections first, so the clock starts with every worker ready.
  std::vector<std::unique_ptr<trader>> listers, buyers;
  for (int i = 0; i < l.listers; ++i)
    listers.push_back(std::make_unique<trader>(ctx, user_id('L', i)));
  for (int j = 0; j < l.buyers; ++j)
    buyers.push_back(std::make_unique<trader>(ctx, user_id('B', j)));
  std::vector<tally> tallies(listers.size() + buyers.size());

  const double server_cpu0 =
      info_number(admin, "cpu", "used_cpu_user") + info_number(admin, "cpu", "used_cpu_sys");
  const double commands0 = info_number(admin, "stats", "total_commands_processed");
  const double cpu0 = bench::process_cpu_seconds();

  auto guarded = [&ctx](auto&& body) {
    return [&ctx, body = std::forward<decltype(body)>(body)]() mutable {
      try {
        body();
      } catch (...) {
        std::lock_guard lock(ctx.error_mutex);
        if (!ctx.error) ctx.error = std::current_exception();
        ctx.failed = true;
      }
    };
  };
  const auto start = clock_type::now();
  ctx.end = start + std::chrono::duration_cast<clock_type::duration>(
                        std::chrono::duration<double>(seconds));
  std::vector<std::thread> threads;
  try {
    for (std::size_t i = 0; i < listers.size(); ++i) {
      threads.emplace_back(guarded([&, i] { lister_loop(ctx, *listers[i], stock, tallies[i]); }));
    }
    for (std::size_t j = 0; j < buyers.size(); ++j) {
      threads.emplace_back(
          guarded([&, j] { buyer_loop(ctx, *buyers[j], tallies[listers.size() + j]); }));
    }
  } catch (...) {
    ctx.failed = true;  // could not start a thread: stop the others before unwinding
    for (auto& t : threads)
      t.join();
    throw;
  }
  for (auto& t : threads)
    t.join();
  const double elapsed = std::chrono::duration<double>(clock_type::now() - start).count();
  if (ctx.error) std::rethrow_exception(ctx.error);

  run_result out;
  out.client_cpu = bench::process_cpu_seconds() - cpu0;
  out.server_cpu = info_number(admin, "cpu", "used_cpu_user") +
                   info_number(admin, "cpu", "used_cpu_sys") - server_cpu0;
  out.server_commands = info_number(admin, "stats", "total_commands_processed") - commands0;
  if (ctx.shared_locks) out.lock_stats = ctx.shared_locks->stats();
  for (const auto* group : {&listers, &buyers}) {
    for (const auto& t : *group) {
      const auto [w, c] = t->writes_and_commands();
      out.client_writes += static_cast<double>(w);
      out.client_commands += static_cast<double>(c);
    }
  }
  if (ctx.shared_locks) {
    const auto c = ctx.shared_locks->redis().counters();
    out.client_writes += static_cast<double>(c.writes);
    out.client_commands += static_cast<double>(c.commands_sent);
  }

  auto& s = out.sum;
  for (std::size_t i = 0; i < tallies.size(); ++i) {
    auto& t = tallies[i];
    if (i < listers.size()) out.lister_rates.push_back(static_cast<double>(t.listed) / elapsed);
    s.listed += t.listed;
    s.bought += t.bought;
    s.retries += t.retries;
    s.stale += t.stale;
    s.refused += t.refused;
    s.list_timeouts += t.list_timeouts;
    s.purchase_timeouts += t.purchase_timeouts;
    s.abandoned += t.abandoned;
    s.list_stale += t.list_stale;
    s.refills += t.refills;
    s.release_failures += t.release_failures;
    s.empty_market += t.empty_market;
    s.double_sold += t.double_sold;
    s.lock_waits += t.lock_waits;
    s.lock_wait_ms += t.lock_wait_ms;
    s.lock_wait_max_ms = std::max(s.lock_wait_max_ms, t.lock_wait_max_ms);
    s.acquire_us.insert(s.acquire_us.end(), t.acquire_us.begin(), t.acquire_us.end());
    s.release_us.insert(s.release_us.end(), t.release_us.begin(), t.release_us.end());
    s.work_us += t.work_us;
    s.purchase_ms += t.purchase_ms;
    s.ok_ms.insert(s.ok_ms.end(), t.ok_ms.begin(), t.ok_ms.end());
  }
  row& r = out.r;
  r.variant = std::string(v.name);
  r.listers = l.listers;
  r.buyers = l.buyers;
  r.seconds = elapsed;
  r.listed = s.listed;
  r.bought = s.bought;
  r.retries = s.retries;
  r.stale = s.stale;
  r.timeouts = s.list_timeouts + s.purchase_timeouts;
  if (s.bought > 0) {
    double ok_total = 0;
    for (double x : s.ok_ms)
      ok_total += x;
    r.wait_ms_a = ok_total / static_cast<double>(s.bought);
    r.wait_ms_b = s.purchase_ms / static_cast<double>(s.bought);
  }
  r.p50_ms = percentile(s.ok_ms, 50);
  r.p99_ms = percentile(s.ok_ms, 99);
  auto checked = audit(admin, l, s.listed, s.bought);
  out.audit = std::move(checked.problems);
  out.extra_copies = checked.extra_copies;
  out.keys = to_int(admin.command({"DBSIZE"}));
  return out;
}

}  // namespace

namespace detail {

std::string_view book_variant(std::string_view variant) {
  for (const auto& v : variant_table) {
    if (v.name == variant) return v.book;
  }
  return {};
}

bool unsafe_by_design(std::string_view variant) {
  for (const auto& v : variant_table) {
    if (v.name == variant) return v.kind == variant_kind::no_lock;
  }
  return false;
}

}  // namespace detail

const std::vector<std::string>& all_variants() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& x : variant_table)
      v.emplace_back(x.name);
    return v;
  }();
  return names;
}

report run(const options& o) {
  if (!(o.seconds > 0)) throw std::invalid_argument("seconds must be positive");
  if (o.loads.empty()) throw std::invalid_argument("no loads");
  for (const auto& l : o.loads) {
    if (l.listers < 1 || l.buyers < 1) {
      throw std::invalid_argument("a load needs at least one lister and one buyer");
    }
  }
  if (!o.url.empty() && !o.allow_flush) {
    throw std::invalid_argument(
        "every run begins with FLUSHALL, which would erase the server at " +
        connection_options::from_url(o.url).redacted_url() +
        "; allow it explicitly (dlock market --flush) or run without --url to use a private "
        "redis-server");
  }
  const auto& names = o.variants.empty() ? all_variants() : o.variants;
  std::vector<const variant_info*> variants;
  for (const auto& n : names)
    variants.push_back(&find_variant(n));
  auto say = [&](const std::string& line) {
    if (o.progress) o.progress(line);
  };

  // The embedded server lives for this call only; its destructor stops it on every path.
  std::optional<embedded::redis_server> server;
  std::string url = o.url;
  if (url.empty()) {
    say("starting a private redis-server");
    server.emplace();
    url = server->url();
  }
  redis_client admin(url);

  // Inventories are sized from a short trial of the same variant and load (docs/market.md's first
  // option): a refill during the run would write to the lister's WATCHed inventory and to a
  // server already saturated, changing what is measured.
  const double trial_seconds = std::clamp(o.seconds * 0.05, 0.25, 1.0);
  constexpr double safety = 2.0;
  constexpr std::uint64_t trial_stock = 20'000;

  report rep;
  nlohmann::json runs = nlohmann::json::array();
  for (const auto& l : o.loads) {
    for (const auto* v : variants) {
      const std::string label = std::string(v->name) + " " + load_text(l.listers, l.buyers);
      say(label + ": trial run (" + format_number(trial_seconds, 2) + " s) to size inventories");
      const auto trial = run_once(url, admin, *v, l, trial_seconds, trial_stock, o.dlock);
      const double rate = *std::max_element(trial.lister_rates.begin(), trial.lister_rates.end());
      const auto stock = static_cast<std::uint64_t>(std::ceil(rate * o.seconds * safety)) + 1000;
      say(label + ": " + grouped(stock) + " items per lister; running " +
          format_number(o.seconds, 1) + " s");
      auto res = run_once(url, admin, *v, l, o.seconds, stock, o.dlock);
      const auto& r = res.r;
      say(label + ": listed " + grouped(r.listed) + ", bought " + grouped(r.bought) + ", retries " +
          grouped(r.retries) + ", stale " + grouped(r.stale) + ", timeouts " + grouped(r.timeouts) +
          ", " + format_number(r.per_second(), 0) + " listed+bought/s, purchase p99 " +
          ms_text(r.p99_ms) + " ms");
      const bool unsafe = v->kind == variant_kind::no_lock;
      if (!res.audit.empty()) {
        say(label +
            (unsafe ? ": books do not balance (no lock: expected, not a failure): "
                    : ": AUDIT FAILED: ") +
            res.audit);
      }

      const auto ops = static_cast<double>(std::max<std::uint64_t>(1, r.listed + r.bought));
      nlohmann::json detail = {
          {"variant", r.variant},
          {"listers", r.listers},
          {"buyers", r.buyers},
          {"audit", res.audit.empty() ? std::string("ok")
                    : unsafe          ? "unsafe by design (no lock): " + res.audit
                                      : res.audit},
          {"unsafe_by_design", unsafe},
          {"double_sold", res.sum.double_sold},
          {"items_in_several_inventories", res.extra_copies},
          {"keys_at_end", res.keys},
          {"inventory_per_lister", stock},
          {"trial_lister_rate_per_s", std::round(rate)},
          {"refills", res.sum.refills},
          {"list_timeouts", res.sum.list_timeouts},
          {"purchase_timeouts", res.sum.purchase_timeouts},
          {"refused_purchases", res.sum.refused},
          {"list_not_in_inventory", res.sum.list_stale},
          {"abandoned_at_end", res.sum.abandoned},
          {"empty_market_backoffs", res.sum.empty_market},
          {"lock_release_failures", res.sum.release_failures},

          {"server_commands_per_op", std::round(res.server_commands / ops * 100) / 100},
          {"client_commands_per_op", std::round(res.client_commands / ops * 100) / 100},
          {"client_writes_per_op", std::round(res.client_writes / ops * 100) / 100},
          {"cpu_us_per_op", std::round((res.client_cpu + res.server_cpu) / ops * 1e6)},
          {"server_cpu_s", std::round(res.server_cpu * 100) / 100},
          {"client_cpu_s", std::round(res.client_cpu * 100) / 100},
      };
      if (uses_lock(v->kind)) {
        auto& sum = res.sum;
        const bool known = !uses_dlock(v->kind) || o.dlock.try_first;
        const auto calls = static_cast<double>(std::max<std::size_t>(1, sum.release_us.size()));
        // Waits are known when the first attempt is separate (book locks; dlock with try_first).
        const auto unknown = nlohmann::json();
        const double mean_wait = sum.lock_waits ? sum.lock_wait_ms / sum.lock_waits : 0.0;
        detail["lock_timing"] = {
            {"acquire_us_p50", std::round(percentile(sum.acquire_us, 50))},
            {"release_us_p50", std::round(percentile(sum.release_us, 50))},
            {"work_us_mean", std::round(sum.work_us / calls)},
            {"waits", known ? nlohmann::json(sum.lock_waits) : unknown},
            {"wait_ms_mean", known ? nlohmann::json(std::round(mean_wait * 1000) / 1000) : unknown},
            {"wait_ms_max",
             known ? nlohmann::json(std::round(sum.lock_wait_max_ms * 1000) / 1000) : unknown}};
      }
      if (uses_dlock(v->kind) && o.dlock.shared_client) {
        const auto& st = res.lock_stats;
        detail["dlock_client"] = {{"grants", st.grants},
                                  {"attempts", st.attempts},
                                  {"releases", st.releases},
                                  {"release_failures", st.release_failures},
                                  {"unlock_messages", st.unlock_messages}};
      }
      runs.push_back(std::move(detail));
      rep.rows.push_back(r);
    }
  }
  admin.command({"FLUSHALL", "SYNC"});  // leave a --url server as empty as we were allowed to
  const std::string version = info_text(admin, "server", "redis_version");

  const auto& dl = o.dlock;
  nlohmann::json loads = nlohmann::json::array();
  for (const auto& l : o.loads)
    loads.push_back(load_text(l.listers, l.buyers));
  rep.choices = {
      {"source", "Redis in Action §6.2, Table 6.3; driver fixed by docs/market.md"},
      {"server",
       {{"url", server ? std::string("embedded redis-server (private, loopback TCP)")
                       : connection_options::from_url(url).redacted_url()},
        {"redis_version", version}}},
      {"seconds_per_run", o.seconds},
      {"loads", loads},
      {"variants", names},
      {"users",
       "listers L0..L{n-1} and buyers B0..B{m-1} are distinct users: users:<id> = {name, funds}"},
      {"buyer_funds", buyer_funds},
      {"seller_funds", 0},
      {"inventory",
       {{"item_ids", "<listerid>-<n>, n = 0, 1, 2, ... (unique; listed in that order)"},
        {"sizing",
         "pre-filled before each run from a trial of the same variant and load: "
         "ceil(fastest lister's rate x seconds x 2) + 1000 items per lister; a lister "
         "that runs out anyway refills on the clock (counted as refills)"},
        {"trial_seconds", trial_seconds},
        {"safety_factor", safety}}},
      {"prices", "uniform random integers 1..100"},
      {"buyer_pick",
       "ZRANGE market: 0 9 WITHSCORES, one entry uniformly at random; an empty market costs a "
       "1 ms back-off, not counted; the ZRANGE is not part of the purchase call"},
      {"workers",
       "one thread per lister and buyer, flat out; each with its own redis_client (one "
       "connection: WATCH state belongs to a connection)"},
      {"flush", "FLUSHALL SYNC before every run and trial, and once at the end"},
      {"limits",
       {{"list_ms", 5000},
        {"purchase_ms", 10000},
        {"lock_acquire_ms", 10000},
        {"book_lock_poll_ms", 1},
        {"run_end",
         "no call starts after the end of the run; WATCH calls still retrying "
         "then are abandoned and counted nowhere; calls waiting for a lock finish "
         "and count; seconds is measured to the last worker's stop"}}},
      {"work_under_lock",
       "as the book's purchase_item_with_lock, identical in all four lock variants and in "
       "no-lock (which runs it without any lock): no WATCH; "
       "MULTI ZSCORE HGET EXEC, check price and funds, then MULTI HINCRBY seller, HINCRBY "
       "buyer, SADD inventory, ZREM market EXEC (each a transactional pipeline: one round "
       "trip). Listing: SISMEMBER, then MULTI ZADD SREM EXEC"},
      {"what_listing_locks",
       "coarse variants: the whole market (lock:market:), for listing and buying alike - the "
       "book's 'only one item listed or sold at a time'. Fine variants: the item's market entry "
       "lock:<itemid>.<sellerid>, for listing and buying alike; nobody else can want that name "
       "before the item is on the market, so listing contends only with a buyer who saw the "
       "entry before the lister released"},
      {"book_lock",
       "SETNX lock:<name> <random 128-bit id, UUID text> polled every 1 ms up to 10 s; release "
       "WATCH, GET, compare, MULTI DEL EXEC (retried if the EXEC fails); no expiry, as the "
       "book's basic lock"},
      {"dlock",
       {{"client", dl.shared_client
                       ? "one dlock::client shared by all workers (its lock commands pipelined "
                         "on one connection; waiters on one name queued locally); the work "
                         "under the lock runs on each worker's own connection as in the book "
                         "variants"
                       : "one dlock::client per worker (like separate processes); the work "
                         "under the lock runs on a second, plain connection per worker"},
        {"lock_kind", dl.simple ? "simple (SET NX PX layout, no re-entry needed)"
                                : "reentrant (Redisson hash layout)"},
        {"lease", dl.fixed_lease ? "fixed " + std::to_string(dl.lease_ms) +
                                       " ms (no watchdog bookkeeping for short holds)"
                                 : std::string("watchdog")},
        {"acquire", dl.try_first ? "try_acquire() once, then try_acquire_until(now + 10 s): "
                                   "event-driven waiting on the unlock message"
                                 : "try_acquire_until(now + 10 s): event-driven waiting on the "
                                   "unlock message"},
        {"first_read",
         dl.reads_with_acquisition
             ? "carried by the acquisition (try_acquire_and_read): a lister's SISMEMBER, a "
               "buyer's ZSCORE + HGET run in one no-writes script on the lock's connection "
               "once the lock is held, right behind the acquire script when the lock is free "
               "(one round trip for both)"
             : "on the worker's own connection after the acquisition, as in the book variants"},
        {"writes",
         dl.writes_with_release
             ? "lease::write_and_release: one script checks the hold and runs the writes "
               "(as atomic as MULTI makes them, and only while the lock is held), the release "
               "right behind it in the same send, on the lock's connection (one round trip)"
             : "MULTI ... EXEC on the worker's own connection, as in the book variants"},
        {"release",
         dl.writes_with_release
             ? "with the writes; lease::release_async() when the work wrote nothing (a stale "
               "entry, too few funds): sent at once, its reply handled in the background"
             : "lease::release_async(): the compare-and-delete script (+ PUBLISH) is sent at "
               "once and its reply handled in the background; the worker does not wait"},
        {"lock_names", "coarse lock:market:, fine lock:<itemid>.<sellerid> (the book's keys)"},
        {"fencing_keys",
         dl.fence_counter.empty()
             ? "every grant INCRs the lock's fencing counter (dlock/keys.hpp), which is never "
               "deleted: dlock-fine leaves one counter key per item listed"
             : "every grant INCRs the one counter " + dl.fence_counter +
                   " (client_options::fence_counter): no key per item"}}},
      {"no_lock",
       "the lock variants' work (the same commands, each worker on its own connection) with no "
       "lock at all: what the work alone sustains, a ceiling for what locking costs. NOT safe: "
       "two buyers can buy one item (both pay, the seller is paid twice; counted as double_sold "
       "and items_in_several_inventories, and bought counts every purchase whose EXEC ran); "
       "its audit reports what it found and never fails the run"},
      {"script", "list and purchase each as one Lua script (EVALSHA): the no-lock ceiling"},
      {"counters",
       {{"retries",
         "failed EXECs inside purchase calls (lock polling and list retries are "
         "not counted)"},
        {"stale", "purchase calls that found the item gone or repriced"},
        {"double_sold",
         "(runs) purchases whose ZREM found the market entry already gone: another buyer had "
         "bought the item between this one's read and write; 0 under any lock"},
        {"items_in_several_inventories",
         "(runs) audit: sum of the buyers' inventory sizes minus the size of their union"},
        {"timeouts", "list and purchase calls that hit the book's limit (5 s, 10 s, 10 s lock)"},
        {"wait_ms_a", "mean wall time of successful purchase calls"},
        {"wait_ms_b", "all buyer time inside purchase calls (any outcome) / items bought"},
        {"p50_ms_p99_ms", "purchase call latency, successful calls only"},
        {"seconds", "measured run length (start to last worker stopping)"}}},
      {"runs", runs},
  };
  return rep;
}

}  // namespace dlock::market
