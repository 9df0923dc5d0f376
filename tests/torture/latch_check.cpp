#include "latch_check.hpp"

#include <algorithm>
#include <unordered_map>

namespace dlock::torture {
namespace {

struct interval {
  std::int64_t from = 0, to = 0;
};

// Intervals sorted by start, with the latest end among each prefix: whether any of them meets
// [a, b] in O(log n).
class interval_index {
 public:
  explicit interval_index(std::vector<interval> v) : v_(std::move(v)) {
    std::sort(v_.begin(), v_.end(), [](auto& x, auto& y) { return x.from < y.from; });
    std::int64_t latest = INT64_MIN;
    for (const auto& i : v_) {
      latest = std::max(latest, i.to);
      latest_end_.push_back(latest);
    }
  }
  bool meets(std::int64_t a, std::int64_t b) const {
    const auto n = std::upper_bound(v_.begin(), v_.end(), b,
                                    [](std::int64_t t, const interval& i) { return t < i.from; }) -
                   v_.begin();
    return n > 0 && latest_end_[static_cast<std::size_t>(n - 1)] >= a;
  }

 private:
  std::vector<interval> v_;
  std::vector<std::int64_t> latest_end_;
};

std::string ms_text(std::int64_t ns) {
  return std::to_string(ns / 1'000'000) + " ms";
}

class one_latch {
 public:
  one_latch(std::vector<const latch_op*> ops, const std::vector<latch_fault>& faults,
            std::int64_t bound, latch_report& r)
      : ops_(std::move(ops)), faults_(faults), bound_(bound), r_(r) {
    for (const auto* o : ops_) {
      if (o->op == 's' && o->result == "1") armed_.push_back(o);
      if (o->op == 's' && o->result != "0") maybe_armed_.push_back(o);
    }
  }

  void run() {
    std::vector<interval> by_ops = {{INT64_MIN, armed_after(INT64_MIN)}};
    std::vector<interval> sure;
    for (const auto* o : ops_) {
      if (o->op != 'd') continue;
      const bool left_zero = o->result == "0";
      r_.zeros += left_zero;
      if (left_zero || o->result == "err" || o->result.empty()) {
        by_ops.push_back({o->t_call, armed_after(o->t_call)});
      }
      if (left_zero) sure.push_back({o->t_reply, surely_zero_until(o->t_reply)});
    }
    std::vector<interval> with_faults = by_ops;
    for (const auto& f : faults_) {
      if (f.may_lose_writes) with_faults.push_back({f.t_start, armed_after(f.t_end)});
    }
    const interval_index maybe_zero(std::move(by_ops)), maybe_zero_or_lost(std::move(with_faults));
    for (const auto* o : ops_) {
      if (o->op != 'w' || o->t_reply == latch_never) continue;
      if (o->result == "1") {
        ++r_.waits_released;
        if (!maybe_zero.meets(o->t_call, o->t_reply)) {
          if (maybe_zero_or_lost.meets(o->t_call, o->t_reply)) {
            ++r_.releases_after_loss;
          } else {
            ++r_.early_releases;
            fail(*o, "released while the latch was never at 0");
          }
        }
        release_delay(*o, sure);
      } else if (o->result == "0") {
        ++r_.waits_ended;
        missed(*o, sure);
      }
    }
  }

 private:
  // The reply of the first set that armed the latch, sent at `t` or later.
  std::int64_t armed_after(std::int64_t t) const {
    std::int64_t end = latch_never;
    for (const auto* s : armed_) {
      if (s->t_call >= t) end = std::min(end, s->t_reply);
    }
    return end;
  }

  // Until the first set that may have armed the latch after `t`, or a fault that may have
  // brought the count back.
  std::int64_t surely_zero_until(std::int64_t t) const {
    std::int64_t end = latch_never;
    for (const auto* s : maybe_armed_) {
      if (s->t_reply > t) end = std::min(end, std::max(s->t_call, t));
    }
    for (const auto& f : faults_) {
      if (f.may_lose_writes && f.t_end > t) end = std::min(end, std::max(f.t_start, t));
    }
    return end;
  }

  void release_delay(const latch_op& w, const std::vector<interval>& sure) {
    std::int64_t first = latch_never;
    for (const auto& z : sure) {
      if (z.from >= w.t_call && z.from <= w.t_reply) first = std::min(first, z.from);
    }
    if (first != latch_never) {
      r_.release_delay_ms.push_back(static_cast<double>(w.t_reply - first) / 1e6);
    }
  }

  void missed(const latch_op& w, const std::vector<interval>& sure) {
    for (const auto& f : faults_) {
      const bool touches = f.worker < 0 || f.worker == w.worker;
      if (touches && f.t_start <= w.t_reply && f.t_end >= w.t_call) return;  // it explains all
    }
    ++r_.waits_checked;
    for (const auto& z : sure) {
      const auto at_zero = std::min(z.to, w.t_reply) - std::max(z.from, w.t_call);
      if (at_zero > bound_) {
        ++r_.missed_releases;
        fail(w, "not released though the latch was at 0 for " + ms_text(at_zero) + " of its wait");
        return;
      }
    }
  }

  void fail(const latch_op& w, const std::string& what) {
    r_.failures_at.emplace_back(w.t_reply, w.name);
    if (r_.examples.size() < 5) {
      r_.examples.push_back("worker " + std::to_string(w.worker) + ": wait on " +
                            std::string(w.name) + " from " + std::to_string(w.t_call) + " to " +
                            std::to_string(w.t_reply) + " ns: " + what);
    }
  }

  std::vector<const latch_op*> ops_;
  const std::vector<latch_fault>& faults_;
  std::int64_t bound_;
  latch_report& r_;
  std::vector<const latch_op*> armed_, maybe_armed_;
};

}  // namespace

latch_report check_latches(std::vector<latch_op> ops, const std::vector<latch_fault>& faults,
                           std::int64_t release_bound_ns) {
  latch_report r;
  r.ops = ops.size();
  std::unordered_map<std::string_view, std::vector<const latch_op*>> by_name;
  for (const auto& o : ops)
    by_name[o.name].push_back(&o);
  for (auto& [name, members] : by_name)
    one_latch(std::move(members), faults, release_bound_ns, r).run();
  std::sort(r.release_delay_ms.begin(), r.release_delay_ms.end());
  return r;
}

}  // namespace dlock::torture
