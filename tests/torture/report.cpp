#include "report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

namespace dlock::torture {
namespace {

std::string join_counts(const std::map<std::string, std::uint64_t>& m) {
  std::string out;
  for (const auto& [k, v] : m) {
    if (!out.empty()) out += ", ";
    out += k;
    out += ' ';
    out += std::to_string(v);
  }
  return out.empty() ? "none" : out;
}

std::string fault_list(const std::vector<fault_kind>& kinds) {
  std::string out;
  for (const auto k : kinds) {
    if (!out.empty()) out += ',';
    out += fault_name(k);
  }
  return out.empty() ? "none" : out;
}

double median(const std::vector<double>& sorted) {
  return sorted.empty() ? 0 : sorted[sorted.size() / 2];
}

double per_second(std::uint64_t n, double seconds) {
  return seconds > 0 ? static_cast<double>(n) / seconds : 0;
}

}  // namespace

std::vector<std::string> verdict(const check_report& r, const run_info& info) {
  std::vector<std::string> out;
  if (r.stale_writes_accepted > 0) {
    out.push_back(std::to_string(r.stale_writes_accepted) + " stale writes accepted");
  }
  if (r.lost_updates > 0) {
    out.push_back(std::to_string(r.lost_updates) + " lost updates");
  }
  if (r.not_signalled > 0) {
    out.push_back(std::to_string(r.not_signalled) + " lost leases not signalled");
  }
  if (r.conflicts_unsignalled > 0) {
    out.push_back(std::to_string(r.conflicts_unsignalled) +
                  " conflicting holds whose older holder was never told");
  }
  if (r.conflicts > 0 && !info.may_grant_twice) {
    out.push_back(std::to_string(r.conflicts) + " conflicting holds (" + info.topology +
                  " promises none here)");
  }
  if (info.may_grant_twice && r.max_conflict_ms > info.conflict_bound_ms) {
    out.push_back("a conflict lasted " + std::to_string(std::lround(r.max_conflict_ms)) +
                  " ms, over the " + std::to_string(std::lround(info.conflict_bound_ms)) +
                  " ms in which its holder must be told");
  }
  if (r.multi_leftovers > 0) {
    out.push_back(std::to_string(r.multi_leftovers) +
                  " names left held by multi-lock waits that ended without the lock");
  }
  if (info.fair_handoff_bound_ms > 0 && r.max_fair_handoff_ms > info.fair_handoff_bound_ms) {
    out.push_back("a fair lock's hand-off took " +
                  std::to_string(std::lround(r.max_fair_handoff_ms)) + " ms, over " +
                  std::to_string(std::lround(info.fair_handoff_bound_ms)) + " ms");
  }
  if (r.latch.early_releases > 0) {
    out.push_back(std::to_string(r.latch.early_releases) +
                  " latch waiters released before the count reached 0");
  }
  if (r.latch.missed_releases > 0) {
    out.push_back(std::to_string(r.latch.missed_releases) +
                  " latch waiters not released though the count stayed at 0");
  }
  if (r.malformed_lines > 0) {
    out.push_back(std::to_string(r.malformed_lines) + " log lines the checker could not read");
  }
  if (r.grants < info.min_grants) {
    out.push_back(std::to_string(r.grants) + " grants, fewer than --min-grants " +
                  std::to_string(info.min_grants));
  }
  for (const auto& [kind, ms] : r.never_recovered) {
    if (ms > static_cast<double>(never_recovered_leases * info.lease_ms)) {
      out.push_back("no lock was granted in the " + std::to_string(std::lround(ms)) +
                    " ms between a '" + kind + "' fault's end and the run's");
    }
  }
  for (const auto k : info.faults) {
    const auto it = r.faults.find(std::string(fault_name(k)));
    if (it == r.faults.end() || it->second == 0) {
      out.push_back("fault '" + std::string(fault_name(k)) + "' never happened");
    }
  }
  return out;
}

std::string text_report(const check_report& r, const run_info& info,
                        const std::vector<std::string>& failures) {
  std::ostringstream o;
  char line[256];
  auto row = [&](std::string label, const std::string& value) {
    label.resize(std::max<std::size_t>(label.size(), 38), ' ');
    o << "  " << label << value << "\n";
  };
  auto n = [](std::uint64_t v) { return std::to_string(v); };
  auto ms = [](double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.0f ms", v);
    return std::string(b);
  };
  std::snprintf(line, sizeof line,
                "dlock torture: %.1f s, %d workers, %d names (%s), seed %llu, writes %s, "
                "faults: %s\n",
                r.seconds, info.workers, info.names, info.kinds.c_str(),
                static_cast<unsigned long long>(info.seed), info.writes.c_str(),
                fault_list(info.faults).c_str());
  o << line;
  o << "  on " << info.deployment << "\n";
  std::snprintf(line, sizeof line, "%llu (%.1f/s); waits that ended without the lock: %llu",
                static_cast<unsigned long long>(r.grants), per_second(r.grants, r.seconds),
                static_cast<unsigned long long>(r.not_acquired));
  row("grants", line);
  row("releases", join_counts(r.releases));
  row("faults", join_counts(r.faults));
  if (!r.faults_failed.empty()) row("faults that failed to inject", join_counts(r.faults_failed));
  row("critical sections overlapping",
      n(r.overlap_pairs) + " pairs, " + n(r.overlap_grants) + " grants involved");
  row(info.may_grant_twice ? "conflicting holds (allowed if told)"
                           : "CONFLICTING HOLDS (must be 0)",
      n(r.conflicts) + "; longest " + ms(r.max_conflict_ms) +
          (info.may_grant_twice ? " (bound " + ms(info.conflict_bound_ms) + ")" : ""));
  row("UNTOLD CONFLICTS (must be 0)", n(r.conflicts_unsignalled));
  if (!info.two_master_faults.empty()) {
    row("untold, two masters after a fault", n(r.conflicts_untold_two_masters) + " conflicts, " +
                                                 n(r.not_signalled_two_masters) +
                                                 " lost leases (allowed without acks)");
  }
  if (r.multi_leftovers > 0) row("MULTI-LOCK LEFTOVERS (must be 0)", n(r.multi_leftovers));
  if (r.fair_handoffs > 0) {
    row("fair hand-offs while others waited", n(r.fair_handoffs) + "; longest " +
                                                  ms(r.max_fair_handoff_ms) + " (bound " +
                                                  ms(info.fair_handoff_bound_ms) + ")");
  }
  if (r.latch.ops > 0) {
    const auto& l = r.latch;
    const auto& d = l.release_delay_ms;
    row("latch ops; count-downs to 0", n(l.ops) + "; " + n(l.zeros));
    row("latch waits released; ended first", n(l.waits_released) + " (" + n(l.releases_after_loss) +
                                                 " by a fault that lost the latch)" + "; " +
                                                 n(l.waits_ended));
    row("LATCH EARLY RELEASES (must be 0)", n(l.early_releases));
    row("LATCH MISSED RELEASES (must be 0)",
        n(l.missed_releases) + " of " + n(l.waits_checked) + " waits checked");
    row("latch 0 to release, p50 / max",
        ms(median(d)) + " / " + ms(d.empty() ? 0 : d.back()) + " (" + n(d.size()) + " waiters)");
  }
  row("resource ops", n(r.ops) + "; writes accepted " + n(r.writes_accepted));
  row("stale reads rejected", n(r.reads_rejected));
  row("stale writes rejected", n(r.writes_rejected));
  row("STALE WRITES ACCEPTED (must be 0)", n(r.stale_writes_accepted));
  row("LOST UPDATES (must be 0)", n(r.lost_updates));
  row("lost leases (lost in fact)", n(r.lost_in_fact));
  row("  signalled: on_lost before release", n(r.signalled_on_lost));
  row("  signalled: valid() false", n(r.signalled_valid));
  row("  signalled: only the release outcome", n(r.signalled_release));
  row("LOST LEASES NOT SIGNALLED (must be 0)", n(r.not_signalled));
  row("on_lost calls; valid() false", n(r.on_lost_calls) + "; " + n(r.valid_false));
  row("holders killed",
      n(r.holder_kills) + "; longest unavailability after: " + ms(r.max_unavailable_after_kill_ms));
  row("longest stretch without any grant", ms(r.max_no_grant_ms));
  row("stretches over 1 s without a grant", ms(r.no_grant_over_1s_ms) + " in all");
  std::string recovery;
  for (const auto& [kind, v] : r.max_recovery_ms) {
    if (!recovery.empty()) recovery += ", ";
    recovery += kind;
    recovery += ' ';
    recovery += ms(v);
  }
  row("fault end to next grant, longest", recovery.empty() ? "none" : recovery);
  std::string unavailable;
  for (const auto& [kind, v] : r.unavailable_ms) {
    if (!unavailable.empty()) unavailable += ", ";
    unavailable += kind + " " + ms(median(v)) + " / " + ms(v.empty() ? 0 : v.back());
  }
  row("no grant during a fault, p50 / max", unavailable.empty() ? "none" : unavailable);
  row("faults never followed by a grant", n(r.never_recovered.size()));
  row("workers", "started " + n(r.workers_started) + ", unexpected exits " +
                     std::to_string(info.unexpected_worker_exits));
  row("client stats (clean exits)",
      n(r.stats_workers) + " workers: born-dead grants " + n(r.stats_born_dead) + ", leases lost " +
          n(r.stats_leases_lost) + ", release failures " + n(r.stats_release_failures));
  row("worker errors", join_counts(r.errors));
  if (r.malformed_lines > 0) row("LOG LINES NOT READ", n(r.malformed_lines));
  row("proxy", "accepted " + n(info.proxy.accepted) + ", black holes " + n(info.proxy.black_holed) +
                   ", reset " + n(info.proxy.reset) + ", upstream refused " +
                   n(info.proxy.upstream_failures));
  for (const auto& e : r.stale_write_examples)
    o << "  stale write: " << e << "\n";
  for (const auto& e : r.unsignalled_examples)
    o << "  unsignalled loss: " << e << "\n";
  for (const auto& e : r.conflict_examples)
    o << "  conflict: " << e << "\n";
  for (const auto& e : r.latch.examples)
    o << "  latch: " << e << "\n";
  if (!failures.empty()) {
    for (const auto& e : r.excerpts)
      o << "  events " << e;
  }
  if (failures.empty()) {
    o << "PASS\n";
  } else {
    o << "FAIL:";
    for (const auto& f : failures)
      o << " " << f << ";";
    o << "\n";
  }
  if (!info.dir.empty()) o << "logs: " << info.dir << "\n";
  return o.str();
}

std::string json_report(const check_report& r, const run_info& info,
                        const std::vector<std::string>& failures) {
  nlohmann::json j;
  j["seconds"] = r.seconds;
  j["topology"] = info.topology;
  j["deployment"] = info.deployment;
  j["kinds"] = info.kinds;
  j["replicas"] = info.replicas;
  j["seed"] = info.seed;
  j["workers"] = info.workers;
  j["names"] = info.names;
  j["writes"] = info.writes;
  j["faults_enabled"] = fault_list(info.faults);
  j["grants"] = r.grants;
  j["grants_per_second"] = per_second(r.grants, r.seconds);
  j["not_acquired"] = r.not_acquired;
  j["releases"] = r.releases;
  j["faults"] = r.faults;
  j["faults_failed"] = r.faults_failed;
  j["overlaps"] = {{"pairs", r.overlap_pairs}, {"grants", r.overlap_grants}};
  j["conflicts"] = {{"count", r.conflicts},
                    {"unsignalled", r.conflicts_unsignalled},
                    {"untold_two_masters", r.conflicts_untold_two_masters},
                    {"longest_ms", r.max_conflict_ms},
                    {"allowed", info.may_grant_twice},
                    {"bound_ms", info.conflict_bound_ms}};
  j["multi_leftovers"] = r.multi_leftovers;
  j["fair_handoffs"] = {{"count", r.fair_handoffs},
                        {"longest_ms", r.max_fair_handoff_ms},
                        {"bound_ms", info.fair_handoff_bound_ms}};
  nlohmann::json unavailable = nlohmann::json::object();
  for (const auto& [kind, v] : r.unavailable_ms)
    unavailable[kind] = {{"p50_ms", median(v)}, {"max_ms", v.empty() ? 0 : v.back()}};
  j["unavailable_during_fault"] = unavailable;
  const auto& d = r.latch.release_delay_ms;
  j["latch"] = {{"ops", r.latch.ops},
                {"zeros", r.latch.zeros},
                {"waits_released", r.latch.waits_released},
                {"releases_after_loss", r.latch.releases_after_loss},
                {"waits_ended", r.latch.waits_ended},
                {"early_releases", r.latch.early_releases},
                {"waits_checked", r.latch.waits_checked},
                {"missed_releases", r.latch.missed_releases},
                {"release_delay_p50_ms", median(d)},
                {"release_delay_max_ms", d.empty() ? 0 : d.back()},
                {"examples", r.latch.examples}};
  j["resource_ops"] = r.ops;
  j["stale_reads_rejected"] = r.reads_rejected;
  j["stale_writes_rejected"] = r.writes_rejected;
  j["writes_accepted"] = r.writes_accepted;
  j["stale_writes_accepted"] = r.stale_writes_accepted;
  j["lost_updates"] = r.lost_updates;
  j["lost_leases"] = {{"lost_in_fact", r.lost_in_fact},
                      {"signalled",
                       {{"on_lost_before_release", r.signalled_on_lost},
                        {"valid_false", r.signalled_valid},
                        {"release_outcome_only", r.signalled_release}}},
                      {"not_signalled", r.not_signalled},
                      {"not_signalled_two_masters", r.not_signalled_two_masters}};
  j["on_lost_calls"] = r.on_lost_calls;
  j["valid_false"] = r.valid_false;
  j["holder_kills"] = r.holder_kills;
  j["max_unavailable_after_kill_ms"] = r.max_unavailable_after_kill_ms;
  j["max_no_grant_ms"] = r.max_no_grant_ms;
  j["no_grant_over_1s_ms"] = r.no_grant_over_1s_ms;
  j["max_recovery_ms"] = r.max_recovery_ms;
  j["never_recovered"] = r.never_recovered;
  j["workers_started"] = r.workers_started;
  j["unexpected_worker_exits"] = info.unexpected_worker_exits;
  j["client_stats"] = {{"workers", r.stats_workers},
                       {"grants_born_dead", r.stats_born_dead},
                       {"leases_lost", r.stats_leases_lost},
                       {"release_failures", r.stats_release_failures}};
  j["worker_errors"] = r.errors;
  j["malformed_lines"] = r.malformed_lines;
  j["proxy"] = {{"accepted", info.proxy.accepted},
                {"black_holed", info.proxy.black_holed},
                {"reset", info.proxy.reset},
                {"upstream_failures", info.proxy.upstream_failures},
                {"bytes_up", info.proxy.bytes_up},
                {"bytes_down", info.proxy.bytes_down},
                {"bytes_dropped", info.proxy.bytes_dropped}};
  j["stale_write_examples"] = r.stale_write_examples;
  j["unsignalled_examples"] = r.unsignalled_examples;
  j["conflict_examples"] = r.conflict_examples;
  j["excerpts"] = r.excerpts;
  j["failures"] = failures;
  j["pass"] = failures.empty();
  j["logs"] = info.dir;
  return j.dump(2) + "\n";
}

}  // namespace dlock::torture
