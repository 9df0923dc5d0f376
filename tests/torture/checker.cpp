#include "checker.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <deque>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include "event_log.hpp"

namespace dlock::torture {
namespace {

constexpr auto never = std::numeric_limits<std::int64_t>::max();

std::int64_t number(std::string_view s) {
  std::int64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

struct op_rec {
  char kind = 'r';
  std::int64_t seq = 0;
  bool accepted = false;
  std::string_view a{}, b{};
};

struct grant_rec {
  std::int64_t worker = 0, gid = 0;
  std::string_view name{}, fence{}, kind{};
  std::int64_t t_call = 0, t_grant = 0;
  std::int64_t t_lost = never;
  std::optional<bool> valid{};
  std::int64_t t_invalid = never;  // when valid() said false
  std::int64_t rel_start = never, rel_end = never;
  std::int64_t valid_until = never;
  std::string_view outcome{};
  std::vector<op_rec> ops{};
  std::int64_t last_event = 0;
  std::int64_t min_seq = never;

  bool released_at_all() const { return rel_start != never; }
  std::int64_t end() const { return released_at_all() ? rel_start : last_event; }
  std::int64_t believed_until() const { return std::min({end(), valid_until, t_lost, t_invalid}); }
  bool told() const {
    return t_lost != never || valid == false || (released_at_all() && outcome != "released");
  }
  bool shares_with_readers() const { return kind == "read"; }
  bool semaphore() const { return kind == "semaphore" || kind == "leased-semaphore"; }
  bool shares() const { return shares_with_readers() || semaphore(); }
};

struct attempt_rec {
  std::int64_t t_call = 0, t_end = 0;
};

struct fault_rec {
  std::string kind;
  std::int64_t t_start = 0, t_end = 0;
  std::int64_t worker = -1;  ///< kill and stop: the worker
};

// The line's own time (event_log.hpp), for excerpts.
std::int64_t line_time(const std::vector<std::string_view>& f) {
  const auto at = [&](std::size_t i) { return i < f.size() ? number(f[i]) : 0; };
  switch (f[0][0]) {
    case 'G':
      return at(6);
    case 'N':
    case 'M':
      return at(4);
    case 'O':
      return at(11);
    case 'F':
    case 'T':
      return at(2);
    case 'c':
      return at(4);
    case 'C':
      return at(5);
    default:  // S V L R E
      return at(3);
  }
}

std::uint64_t key_of(std::int64_t worker, std::int64_t gid) {
  return (static_cast<std::uint64_t>(worker) << 40) ^ static_cast<std::uint64_t>(gid);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

template <class F>
void for_each_line(const std::string& text, F f) {
  std::string_view rest(text);
  while (!rest.empty()) {
    const auto nl = rest.find('\n');
    const auto line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
    const auto fields = split_fields(line);
    if (!fields.empty()) f(fields);
  }
}

// A name's grants with what "later than" needs: ordered by t_call, and for every position the
// smallest opseq and the earliest t_grant among the grants from there on.
struct name_index {
  std::vector<std::size_t> by_call;
  std::vector<std::int64_t> calls, min_seq_from, min_grant_from;

  name_index(const std::vector<grant_rec>& all, std::vector<std::size_t> members)
      : by_call(std::move(members)) {
    std::sort(by_call.begin(), by_call.end(),
              [&](auto x, auto y) { return all[x].t_call < all[y].t_call; });
    const auto n = by_call.size();
    calls.resize(n);
    min_seq_from.assign(n + 1, never);
    min_grant_from.assign(n + 1, never);
    for (std::size_t i = n; i-- > 0;) {
      const auto& g = all[by_call[i]];
      calls[i] = g.t_call;
      min_seq_from[i] = std::min(min_seq_from[i + 1], g.min_seq);
      min_grant_from[i] = std::min(min_grant_from[i + 1], g.t_grant);
    }
  }
  /// The first grant later than one granted at `t_grant`.
  std::size_t later_than(std::int64_t t_grant) const {
    return static_cast<std::size_t>(std::upper_bound(calls.begin(), calls.end(), t_grant) -
                                    calls.begin());
  }
};

class checker {
 public:
  explicit checker(const check_input& in) : in_(in) {}

  check_report run() {
    r_.seconds = static_cast<double>(in_.t_end - in_.t_start) / 1e9;
    for (const auto& path : in_.worker_logs)
      load_worker_log(path);
    attach_events();
    load_nemesis_log();
    std::unordered_map<std::string_view, std::vector<std::size_t>> by_name;
    for (std::size_t i = 0; i < grants_.size(); ++i)
      by_name[grants_[i].name].push_back(i);
    for (auto& [name, members] : by_name) {
      overlaps(members);
      const name_index idx(grants_, members);
      for (const auto i : members)
        judge(grants_[i], idx);
    }
    for (auto& [name, members] : by_name)
      conflicts(members);
    fair_handoffs(by_name);
    unavailability(by_name);
    liveness();
    latches();
    excerpts();
    return std::move(r_);
  }

 private:
  void load_worker_log(const std::string& path) {
    texts_.push_back(read_file(path));
    for_each_line(texts_.back(), [&](const std::vector<std::string_view>& f) {
      switch (f[0][0]) {
        case 'S':
          ++r_.workers_started;
          break;
        case 'G':
          if (f.size() < 7) return bad();
          index_[key_of(number(f[1]), number(f[2]))] = grants_.size();
          grants_.push_back({.worker = number(f[1]),
                             .gid = number(f[2]),
                             .name = f[3],
                             .fence = f[4],
                             .kind = f.size() > 7 ? f[7] : std::string_view("reentrant"),
                             .t_call = number(f[5]),
                             .t_grant = number(f[6]),
                             .last_event = number(f[6])});
          break;
        case 'N':
          if (f.size() < 5) return bad();
          ++r_.not_acquired;
          refused_[f[2]].push_back({number(f[3]), number(f[4])});
          break;
        case 'M':
          if (f.size() < 5) return bad();
          ++r_.multi_leftovers;
          failures_at_.emplace_back(number(f[4]), f[2]);
          break;
        case 'E':
          if (f.size() < 6) return bad();
          ++r_.errors[std::string(f[4]) + " " + std::string(f[5])];
          break;
        case 'T':
          if (f.size() < 8) return bad();
          ++r_.stats_workers;
          r_.stats_born_dead += static_cast<std::uint64_t>(number(f[5]));
          r_.stats_leases_lost += static_cast<std::uint64_t>(number(f[6]));
          r_.stats_release_failures += static_cast<std::uint64_t>(number(f[7]));
          break;
        case 'c':
          if (f.size() < 5) return bad();
          latch_index_[{number(f[1]), number(f[4])}] = latch_ops_.size();
          latch_ops_.push_back({.worker = number(f[1]),
                                .name = f[2],
                                .op = f[3][0],
                                .t_call = number(f[4]),
                                .t_reply = latch_never,
                                .result = {}});
          break;
        case 'C': {
          const auto it = latch_index_.find({number(f[1]), f.size() > 4 ? number(f[4]) : 0});
          if (f.size() < 7 || it == latch_index_.end()) return bad();
          latch_ops_[it->second].t_reply = number(f[5]);
          latch_ops_[it->second].result = f[6];
          break;
        }
        case 'O':
        case 'V':
        case 'L':
        case 'R':
          // These refer to a grant whose G line may come later (an on_lost can run before the
          // worker logs its grant).
          later_.push_back(f);
          break;
        default:
          bad();
      }
    });
  }

  // A line the checker cannot read makes its verdict worthless: it is counted and fails the run.
  void bad() { ++r_.malformed_lines; }

  void attach_events() {
    for (const auto& f : later_) {
      const std::size_t needs = f[0][0] == 'O' ? 12 : f[0][0] == 'R' ? 6 : 5;
      const auto it = index_.find(key_of(number(f[1]), number(f[2])));
      if (f.size() < needs || it == index_.end()) {
        bad();
        continue;
      }
      auto& g = grants_[it->second];
      switch (f[0][0]) {
        case 'O': {
          // "-": an op that never reached the resource (a held write refused), in no order.
          const op_rec op{.kind = f[5][0],
                          .seq = f[6] == "-" ? never : number(f[6]),
                          .accepted = f[7] == "1",
                          .a = f[8],
                          .b = f[9]};
          ++r_.ops;
          if (!op.accepted) ++(op.kind == 'r' ? r_.reads_rejected : r_.writes_rejected);
          if (op.accepted && op.kind == 'w') {
            ++r_.writes_accepted;
            if (op.a != op.b) ++r_.lost_updates;
          }
          g.min_seq = std::min(g.min_seq, op.seq);
          g.ops.push_back(op);
          g.last_event = std::max(g.last_event, number(f[11]));
          break;
        }
        case 'V':
          g.valid = f[4] == "1";
          if (!*g.valid) {
            ++r_.valid_false;
            g.t_invalid = number(f[3]);
          }
          g.last_event = std::max(g.last_event, number(f[3]));
          break;
        case 'L':
          ++r_.on_lost_calls;
          g.t_lost = std::min(g.t_lost, number(f[3]));
          break;
        case 'R':
          g.rel_start = number(f[3]);
          g.rel_end = number(f[4]);
          g.outcome = f[5];
          if (f.size() > 6) g.valid_until = number(f[6]);
          ++r_.releases[std::string(f[5])];
          break;
      }
    }
    r_.grants = grants_.size();
  }

  void load_nemesis_log() {
    texts_.push_back(read_file(in_.nemesis_log));
    for_each_line(texts_.back(), [&](const std::vector<std::string_view>& f) {
      if (f[0] != "F" || f.size() < 4) return;
      const std::string kind(f[1]);
      if (f.size() > 4 && f[4] == "failed") {
        ++r_.faults_failed[kind];
        return;
      }
      ++r_.faults[kind];
      const bool of_worker = (kind == "kill" || kind == "stop") && f.size() > 4;
      faults_.push_back({kind, number(f[2]), number(f[3]), of_worker ? number(f[4]) : -1});
      if (kind == "kill" && of_worker) kills_.push_back({number(f[4]), number(f[3])});
    });
  }

  void overlaps(const std::vector<std::size_t>& members) {
    std::vector<std::size_t> by_start = members;
    std::sort(by_start.begin(), by_start.end(),
              [&](auto x, auto y) { return grants_[x].t_grant < grants_[y].t_grant; });
    std::multiset<std::pair<std::int64_t, std::size_t>> active;  // (end, grant)
    std::set<std::size_t> involved;
    for (const auto i : by_start) {
      const auto start = grants_[i].t_grant;
      while (!active.empty() && active.begin()->first <= start)
        active.erase(active.begin());
      r_.overlap_pairs += active.size();
      if (!active.empty()) {
        involved.insert(i);
        for (const auto& a : active)
          involved.insert(a.second);
      }
      active.insert({grants_[i].end(), i});
    }
    r_.overlap_grants += involved.size();
  }

  void judge(const grant_rec& a, const name_index& idx) {
    const auto from = idx.later_than(a.t_grant);
    for (const auto& op : a.ops) {
      if (op.kind != 'w' || !op.accepted || idx.min_seq_from[from] >= op.seq) continue;
      ++r_.stale_writes_accepted;
      failures_at_.emplace_back(op_time(a), a.name);
      if (r_.stale_write_examples.size() < 5) {
        r_.stale_write_examples.push_back(describe(a) + ": write seq " + std::to_string(op.seq) +
                                          " accepted, but a later grant's op had seq " +
                                          std::to_string(idx.min_seq_from[from]));
      }
    }
    if (!a.released_at_all()) return;  // killed, or cut off by the end of the run
    // A later grant of a shared hold (a reader's, a semaphore's) says nothing of this one's: the
    // conflict sweep judges those.
    const bool later_grant_excludes = !a.shares() && idx.min_grant_from[from] < a.rel_start;
    const bool lost = later_grant_excludes || a.outcome == "not_held";
    if (!lost) return;
    ++r_.lost_in_fact;
    if (a.t_lost < a.rel_start) {
      ++r_.signalled_on_lost;
    } else if (a.valid == false) {
      ++r_.signalled_valid;
    } else if (a.outcome != "released") {
      ++r_.signalled_release;
    } else if (two_masters_at(a.t_grant)) {
      ++r_.not_signalled_two_masters;
    } else {
      ++r_.not_signalled;
      failures_at_.emplace_back(a.rel_start, a.name);
      if (r_.unsignalled_examples.size() < 5) {
        r_.unsignalled_examples.push_back(
            describe(a) + ": a later grant came " + ms_text(idx.min_grant_from[from] - a.t_grant) +
            " after it, its release started " + ms_text(a.rel_start - a.t_grant) +
            " after it and said 'released'");
      }
    }
  }

  void unavailability(
      const std::unordered_map<std::string_view, std::vector<std::size_t>>& by_name) {
    // The grant each worker was last inside of: a worker holds one grant at a time.
    std::unordered_map<std::int64_t, std::size_t> last_of;
    for (std::size_t i = 0; i < grants_.size(); ++i) {
      const auto it = last_of.find(grants_[i].worker);
      if (it == last_of.end() || grants_[it->second].gid < grants_[i].gid) {
        last_of[grants_[i].worker] = i;
      }
    }
    for (const auto& [worker, t_kill] : kills_) {
      const auto it = last_of.find(worker);
      if (it == last_of.end()) continue;
      const auto& held = grants_[it->second];
      if (held.released_at_all() || held.t_grant > t_kill) continue;
      // After its V line a worker writes and releases: its release may have reached the server
      // before the kill, so the lock was not necessarily held when it died.
      if (held.valid.has_value()) continue;
      ++r_.holder_kills;
      std::int64_t next = in_.t_end;
      for (const auto i : by_name.at(held.name)) {
        if (grants_[i].t_grant > t_kill) next = std::min(next, grants_[i].t_grant);
      }
      r_.max_unavailable_after_kill_ms =
          std::max(r_.max_unavailable_after_kill_ms, static_cast<double>(next - t_kill) / 1e6);
    }
  }

  bool two_masters_at(std::int64_t t) const {
    const auto& kinds = in_.two_master_faults;
    return std::any_of(faults_.begin(), faults_.end(), [&](const fault_rec& f) {
      return f.t_start <= t && t <= f.t_end + in_.two_master_ns &&
             std::find(kinds.begin(), kinds.end(), f.kind) != kinds.end();
    });
  }

  // A latch operation that completed counts as a grant here: the service answered.
  void liveness() {
    std::vector<std::int64_t> grant_times;
    for (const auto& g : grants_)
      grant_times.push_back(g.t_grant);
    for (const auto& o : latch_ops_) {
      if (o.t_reply != latch_never && o.result != "err") grant_times.push_back(o.t_reply);
    }
    std::sort(grant_times.begin(), grant_times.end());
    std::int64_t previous = in_.t_start;
    for (const auto t : grant_times) {
      no_grant_between(previous, t);
      previous = t;
    }
    no_grant_between(previous, in_.t_end);
    for (const auto& [kind, t_start, t_end, worker] : faults_) {
      // The longest stretch without a grant that overlaps the fault's window.
      auto first = std::lower_bound(grant_times.begin(), grant_times.end(), t_start);
      std::int64_t from = first == grant_times.begin() ? in_.t_start : *std::prev(first);
      std::int64_t longest = 0;
      for (auto it = first;; ++it) {
        const auto to = it == grant_times.end() ? in_.t_end : *it;
        longest = std::max(longest, to - from);
        if (it == grant_times.end() || *it > t_end) break;
        from = *it;
      }
      r_.unavailable_ms[kind].push_back(static_cast<double>(longest) / 1e6);
      const auto next = std::upper_bound(grant_times.begin(), grant_times.end(), t_end);
      const bool recovered = next != grant_times.end();
      const double ms =
          static_cast<double>(std::max<std::int64_t>(0, (recovered ? *next : in_.t_end) - t_end)) /
          1e6;
      r_.max_recovery_ms[kind] = std::max(r_.max_recovery_ms[kind], ms);
      if (!recovered) r_.never_recovered.emplace_back(kind, ms);
    }
    for (auto& [kind, v] : r_.unavailable_ms)
      std::sort(v.begin(), v.end());
  }

  // Sweeps a name's holds in grant order, each believed until believed_until(), and counts
  // every grant that came while the holds still believed left no room for it.
  void conflicts(const std::vector<std::size_t>& members) {
    std::vector<std::size_t> by_start = members;
    std::sort(by_start.begin(), by_start.end(),
              [&](auto x, auto y) { return grants_[x].t_grant < grants_[y].t_grant; });
    std::multiset<std::pair<std::int64_t, std::size_t>> active;  // (believed until, grant)
    for (const auto i : by_start) {
      const auto& b = grants_[i];
      while (!active.empty() && active.begin()->first <= b.t_grant)
        active.erase(active.begin());
      // The older holds it conflicts with, and until when the conflict lasts: until the newer
      // hold ends, or enough older ones do (all of them for a lock; for a semaphore, as many as
      // the holds over its permits).
      std::vector<std::size_t> with;
      std::int64_t conflict_end = 0;
      if (b.semaphore()) {
        const auto over = static_cast<std::int64_t>(active.size()) + 1 - in_.permits;
        if (over > 0) {
          for (const auto& a : active)
            with.push_back(a.second);
          conflict_end = std::next(active.begin(), over - 1)->first;
        }
      } else {
        for (const auto& a : active) {
          if (b.shares_with_readers() && grants_[a.second].shares_with_readers()) continue;
          with.push_back(a.second);
          conflict_end = std::max(conflict_end, a.first);
        }
      }
      if (!with.empty()) {
        const auto ns = std::min(conflict_end, b.believed_until()) - b.t_grant;
        // Either side may be the one that lost (a stale master's late grant is the newer one):
        // the conflict is signalled if the newer holder was told, or every older one was.
        const bool told = b.told() || std::all_of(with.begin(), with.end(),
                                                  [&](std::size_t a) { return grants_[a].told(); });
        ++r_.conflicts;
        r_.max_conflict_ms = std::max(r_.max_conflict_ms, static_cast<double>(ns) / 1e6);
        const bool two_masters = !told && two_masters_at(b.t_grant);
        if (!told) ++(two_masters ? r_.conflicts_untold_two_masters : r_.conflicts_unsignalled);
        if (r_.conflict_examples.size() < 5 && !two_masters) {
          const auto& a = grants_[with.front()];
          r_.conflict_examples.push_back(
              describe(b) + " while " + std::to_string(with.size()) + " hold(s) were believed, " +
              describe(a) + " among them, for " + ms_text(ns) + " more; " +
              (told ? "their holders were told" : "SOME HOLDER WAS NEVER TOLD"));
          failures_at_.emplace_back(b.t_grant, b.name);
        }
      }
      if (b.believed_until() > b.t_grant) active.insert({b.believed_until(), i});
    }
  }

  void fair_handoffs(
      const std::unordered_map<std::string_view, std::vector<std::size_t>>& by_name) {
    std::vector<std::pair<std::int64_t, std::int64_t>> server_faults;
    for (const auto& f : faults_) {
      if (f.kind != "kill" && f.kind != "stop") server_faults.emplace_back(f.t_start, f.t_end);
    }
    for (const auto& [name, members] : by_name) {
      if (grants_[members.front()].kind != "fair") continue;
      std::vector<std::int64_t> grant_times;
      for (const auto i : members)
        grant_times.push_back(grants_[i].t_grant);
      std::sort(grant_times.begin(), grant_times.end());
      const auto refused = refused_.find(name);
      for (const auto i : members) {
        const auto& g = grants_[i];
        if (g.outcome != "released") continue;
        const auto from = g.rel_end;
        const auto next_it = std::upper_bound(grant_times.begin(), grant_times.end(), from);
        const auto next = next_it == grant_times.end() ? in_.t_end : *next_it;
        // Somebody was waiting for it when it came free: until the next grant, or until every
        // such waiter gave up.
        bool waited = false;
        for (const auto j : members) {
          waited = waited || (grants_[j].t_call < from && grants_[j].t_grant > from);
        }
        std::int64_t gave_up = 0;
        if (refused != refused_.end()) {
          for (const auto& a : refused->second) {
            if (a.t_call < from && a.t_end > from) gave_up = std::max(gave_up, a.t_end);
          }
        }
        if (!waited && gave_up == 0) continue;
        const auto end = waited ? next : std::min(next, gave_up);
        const bool faulted =
            std::any_of(server_faults.begin(), server_faults.end(),
                        [&](const auto& w) { return w.first < end && w.second > from; });
        if (faulted) continue;
        ++r_.fair_handoffs;
        r_.max_fair_handoff_ms =
            std::max(r_.max_fair_handoff_ms, static_cast<double>(end - from) / 1e6);
      }
    }
  }

  void latches() {
    std::vector<latch_fault> faults;
    for (const auto& f : faults_) {
      const auto& losing = in_.write_losing_faults;
      faults.push_back(
          {.t_start = f.t_start,
           .t_end = f.t_end,
           .may_lose_writes = std::find(losing.begin(), losing.end(), f.kind) != losing.end(),
           .worker = f.worker});
    }
    r_.latch = check_latches(std::move(latch_ops_), faults, in_.latch_release_bound_ns);
    failures_at_.insert(failures_at_.end(), r_.latch.failures_at.begin(),
                        r_.latch.failures_at.end());
  }

  // The lines of every log around the first failures, in time order.
  void excerpts() {
    std::sort(failures_at_.begin(), failures_at_.end());
    if (failures_at_.size() > 3) failures_at_.resize(3);
    for (const auto& [t, name] : failures_at_) {
      // The name's own lines, the faults, and what the workers that touched the name were told
      // (their L, R and E lines, which do not carry the name).
      struct candidate {
        std::int64_t when;
        std::string_view worker;
        bool kept;
        std::string line;
      };
      std::vector<candidate> candidates;
      std::set<std::string_view> workers;
      for (const auto& text : texts_) {
        for_each_line(text, [&](const std::vector<std::string_view>& f) {
          const auto when = line_time(f);
          if (when < t - in_.excerpt_ns || when > t + in_.excerpt_ns / 2) return;
          const bool named = std::find(f.begin(), f.end(), name) != f.end();
          const bool told = f[0] == "L" || f[0] == "R" || f[0] == "E";
          if (!named && !told && f[0] != "F") return;
          if (named) workers.insert(f[1]);
          std::string line;
          for (const auto field : f) {
            if (!line.empty()) line.push_back(' ');
            line.append(field);
          }
          candidates.push_back(
              {when, f.size() > 1 ? f[1] : std::string_view{}, !told || named, std::move(line)});
        });
      }
      std::vector<std::pair<std::int64_t, std::string>> lines;
      for (auto& c : candidates) {
        if (c.kept || workers.count(c.worker) > 0) lines.emplace_back(c.when, std::move(c.line));
      }
      std::sort(lines.begin(), lines.end());
      std::string out = "around +" + ms_text(t - in_.t_start) + " (" + std::string(name) +
                        "), times in ms from the run's start:\n";
      std::size_t shown = 0;
      for (const auto& [when, line] : lines) {
        if (++shown > 80) {
          out.append("    ... ").append(std::to_string(lines.size() - 80)).append(" more\n");
          break;
        }
        char stamp[32];
        std::snprintf(stamp, sizeof stamp, "%10.1f  ",
                      static_cast<double>(when - in_.t_start) / 1e6);
        out.append("    ").append(stamp).append(line).push_back('\n');
      }
      r_.excerpts.push_back(std::move(out));
    }
  }

  void no_grant_between(std::int64_t from, std::int64_t to) {
    const double gap = static_cast<double>(to - from) / 1e6;
    r_.max_no_grant_ms = std::max(r_.max_no_grant_ms, gap);
    if (gap > 1000) r_.no_grant_over_1s_ms += gap;
  }

  std::string ms_text(std::int64_t ns) const {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f ms", static_cast<double>(ns) / 1e6);
    return buf;
  }

  static std::int64_t op_time(const grant_rec& g) { return g.last_event; }

  std::string describe(const grant_rec& g) const {
    return std::string(g.name) + " " + std::string(g.kind) + " grant w" + std::to_string(g.worker) +
           "/" + std::to_string(g.gid) + " (fence " + std::string(g.fence) + ", granted at +" +
           ms_text(g.t_grant - in_.t_start) + ")";
  }

  const check_input& in_;
  check_report r_;
  std::deque<std::string> texts_;  // the logs' text: the records below point into it
  std::vector<grant_rec> grants_;
  std::unordered_map<std::uint64_t, std::size_t> index_;
  std::vector<std::vector<std::string_view>> later_;
  std::vector<std::pair<std::int64_t, std::int64_t>> kills_;  // (worker, t_kill)
  std::vector<fault_rec> faults_;
  std::vector<latch_op> latch_ops_;
  std::map<std::pair<std::int64_t, std::int64_t>, std::size_t> latch_index_;  // (worker, t_call)
  std::unordered_map<std::string_view, std::vector<attempt_rec>> refused_;    // N lines, by name
  std::vector<std::pair<std::int64_t, std::string_view>> failures_at_;        // (when, name)
};

}  // namespace

check_report check(const check_input& in) {
  return checker(in).run();
}

}  // namespace dlock::torture
