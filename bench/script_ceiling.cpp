#include "script_ceiling.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <exception>
#include <span>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <utility>

#include <dlock/dlock.hpp>

#include "bench_support.hpp"
#include "dlock_lua_scripts.hpp"
#include "rb_keys.hpp"

namespace dlock::bench {

namespace {

constexpr std::string_view probe_prefix = "dlock-bench:rb:t:";
constexpr std::string_view tag_placeholder = "{tag}";
constexpr std::int64_t acquire_keyspace = 2'000'000'000;  // fresh keys: repeats are rare

// `text` with every "{tag}" replaced by `tag`.
std::string with_tag(std::string text, const std::string& tag) {
  for (auto at = text.find(tag_placeholder); at != std::string::npos;
       at = text.find(tag_placeholder, at + tag.size())) {
    text.replace(at, tag_placeholder.size(), tag);
  }
  return text;
}

std::uint64_t error_replies(redis_client& r) {
  const auto info = r.command({"INFO", "stats"}).str();
  const std::string_view field = "total_error_replies:";
  const auto at = info.find(field);
  if (at == std::string::npos) return 0;  // before Redis 6.2
  return std::strtoull(info.c_str() + at + field.size(), nullptr, 10);
}

std::string address_of(const connection_options& co) {
  return co.host + ":" + std::to_string(co.port);
}

}  // namespace

double script_rates::pairs() const {
  if (acquire_rps <= 0 || release_rps <= 0) return 0;
  return 1.0 / (1.0 / acquire_rps + 1.0 / release_rps);
}

struct script_ceiling::impl {
  // A master, and the hash tag redis-benchmark writes in its keys on a cluster ("" otherwise).
  struct master {
    connection_options options;
    std::unique_ptr<redis_client> control;
    std::string tag;
  };
  // One redis-benchmark per measurement run: its server flags and the masters it reaches.
  struct target {
    std::vector<std::string> flags;
    std::vector<std::size_t> masters;
  };

  std::string program;
  bool cluster = false;
  std::string lease_ms;
  std::string acquire_sha, release_sha;
  std::vector<master> masters;
  std::vector<target> targets;
  script populate{std::string(rb::populate_range)};
  script unpopulate{std::string(rb::delete_range)};

  // The keys and channel as redis-benchmark is given them: "{tag}" on a cluster, replaced per
  // connection by its master's tag, so that the lock key, its fencing counter and its channel
  // share a slot (as dlock's keys of one name do). Independent masters use the standalone
  // ceiling's names.
  std::string key_tag() const { return cluster ? std::string(tag_placeholder) : std::string(); }
  std::string fence_key() const {
    return keys_of_lock(cluster ? "dlock-bench:rb:{tag}" : "dlock-bench:rb").fence_counter;
  }
  std::string channel() const {
    return keys_of_lock(cluster ? "dlock-bench:rb:{tag}" : "dlock-bench:rb").unlock_channel;
  }
  const char* publish() const { return cluster ? "spublish" : "publish"; }

  std::vector<std::string> acquire_command() const {
    return {"evalsha",   acquire_sha,
            "2",         std::string(rb::acquire_prefix) + key_tag() + "__rand_int__",
            fence_key(), std::string(rb::token),
            lease_ms};
  }
  std::vector<std::string> release_command() const {
    return {"evalsha", release_sha,
            "2",       std::string(rb::release_prefix) + key_tag() + "__rand_int__",
            channel(), std::string(rb::token),
            "0",       publish()};
  }

  void connect(const std::vector<connection_options>& options) {
    for (const auto& co : options)
      masters.push_back({co, std::make_unique<redis_client>(co), ""});
    const script acquire{std::string(lua::simple_acquire)};
    const script release{std::string(lua::simple_release)};
    acquire_sha = acquire.sha1();
    release_sha = release.sha1();
    // Loaded up front on every master so that redis-benchmark runs pure EVALSHA.
    for (auto& m : masters) {
      const bool ok =
          m.control->command({"SCRIPT", "LOAD", lua::simple_acquire}).str() == acquire_sha &&
          m.control->command({"SCRIPT", "LOAD", lua::simple_release}).str() == release_sha;
      if (!ok) throw std::runtime_error("SCRIPT LOAD returned an unexpected SHA1");
    }
  }

  redis_benchmark_run base_run(const target& t, int clients, int pipeline, double seconds) const {
    redis_benchmark_run run;
    run.program = program;
    run.server = t.flags;
    run.clients = clients;
    run.pipeline = pipeline;
    run.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::duration<double>(60 + seconds * 20));
    return run;
  }

  // Runs one redis-benchmark per target at once and returns their requests/s. A server's error
  // reply fails the measurement: in cluster mode redis-benchmark goes on after one (MOVED, ASK,
  // but also NOSCRIPT or CROSSSLOT) and counts it as a request.
  std::vector<double> run_all(const std::vector<redis_benchmark_run>& runs, const char* what) {
    std::vector<std::uint64_t> before;
    for (auto& m : masters)
      before.push_back(error_replies(*m.control));
    std::vector<double> rps(runs.size());
    if (runs.size() == 1) {
      rps[0] = run_redis_benchmark(runs[0]);
    } else {
      std::vector<std::exception_ptr> failed(runs.size());
      std::vector<std::thread> threads;
      try {
        for (std::size_t i = 0; i < runs.size(); ++i) {
          threads.emplace_back([&, i] {
            try {
              rps[i] = run_redis_benchmark(runs[i]);
            } catch (...) {
              failed[i] = std::current_exception();
            }
          });
        }
      } catch (...) {
        for (auto& t : threads)
          t.join();
        throw;
      }
      for (auto& t : threads)
        t.join();
      for (const auto& e : failed) {
        if (e) std::rethrow_exception(e);
      }
    }
    for (std::size_t i = 0; i < masters.size(); ++i) {
      const auto errors = error_replies(*masters[i].control) - before[i];
      if (errors > 0) {
        throw std::runtime_error(format(
            "the ceiling's %s run got %llu error replies from %s (they would count as requests): "
            "%s",
            what, static_cast<unsigned long long>(errors), address_of(masters[i].options).c_str(),
            masters[i].control->command({"INFO", "errorstats"}).str().c_str()));
      }
    }
    return rps;
  }

  // Which tag redis-benchmark --cluster writes on each master: one short SET run, then each
  // master's probe key. redis-benchmark takes the first slot each master serves, for every
  // connection and request, as long as the slot map does not change.
  void probe_tags() {
    const auto n = static_cast<int>(masters.size());
    auto run = base_run(targets.front(), 2 * n, 1, 1);
    run.requests = 200 * n;
    run.command = {"set", std::string(probe_prefix) + std::string(tag_placeholder), "1"};
    run_all({run}, "tag probe");
    for (auto& m : masters) {
      std::vector<std::string> keys;
      std::string cursor = "0";
      do {
        const auto page = m.control->command(
            {"SCAN", cursor, "MATCH", std::string(probe_prefix) + "*", "COUNT", "1000"});
        cursor = page.at(0).str();
        for (const auto& k : page.at(1).elements())
          keys.push_back(k.str());
      } while (cursor != "0");
      if (keys.size() != 1) {
        throw std::runtime_error(
            format("redis-benchmark --cluster wrote %zu probe keys on master %s (expected 1: the "
                   "ceiling needs one hash tag per master)",
                   keys.size(), address_of(m.options).c_str()));
      }
      m.tag = keys.front().substr(probe_prefix.size());
      m.control->command({"DEL", keys.front()});
    }
  }

  void set_release_keys(master& m, std::int64_t keys) {
    const std::string prefix = std::string(rb::release_prefix) + m.tag;
    for (std::int64_t from = 0; from < keys; from += rb::populate_chunk) {
      const std::string a = std::to_string(from);
      const std::string b = std::to_string(std::min(keys, from + rb::populate_chunk));
      const std::array<std::string_view, 5> args{a, b, prefix, rb::token, "600000"};
      m.control->eval(populate, std::span<const std::string_view>(), args);
    }
  }

  // Deletes what set_release_keys set; returns how many were still there.
  std::int64_t delete_release_keys(master& m, std::int64_t keys) {
    const std::string prefix = std::string(rb::release_prefix) + m.tag;
    std::int64_t left = 0;
    for (std::int64_t from = 0; from < keys; from += rb::populate_chunk) {
      const std::string a = std::to_string(from);
      const std::string b = std::to_string(std::min(keys, from + rb::populate_chunk));
      const std::array<std::string_view, 3> args{a, b, prefix};
      left += m.control->eval(unpopulate, std::span<const std::string_view>(), args).integer();
    }
    return left;
  }
};

script_ceiling::script_ceiling(std::unique_ptr<impl> i) : impl_(std::move(i)) {}
script_ceiling::script_ceiling(script_ceiling&&) noexcept = default;
script_ceiling& script_ceiling::operator=(script_ceiling&&) noexcept = default;
script_ceiling::~script_ceiling() = default;

script_ceiling script_ceiling::cluster(std::string program,
                                       const std::vector<connection_options>& masters,
                                       std::chrono::milliseconds lease) {
  if (masters.size() < 2) throw std::invalid_argument("script_ceiling: a cluster of one master");
  auto i = std::make_unique<impl>();
  i->program = std::move(program);
  i->cluster = true;
  i->lease_ms = std::to_string(lease.count());
  i->connect(masters);
  impl::target t;
  // One redis-benchmark thread, as the standalone ceiling runs (its cluster-mode default is one
  // per master, which measured lower on a 2-core machine: the threads compete with the masters,
  // and short runs pay for starting them).
  t.flags = server_flags(masters.front());
  t.flags.insert(t.flags.end(), {"--cluster", "--threads", "1"});
  for (std::size_t m = 0; m < masters.size(); ++m)
    t.masters.push_back(m);
  i->targets.push_back(std::move(t));
  i->probe_tags();
  return script_ceiling(std::move(i));
}

script_ceiling script_ceiling::redlock(std::string program,
                                       const std::vector<connection_options>& masters,
                                       std::chrono::milliseconds lease) {
  if (masters.empty()) throw std::invalid_argument("script_ceiling: no masters");
  auto i = std::make_unique<impl>();
  i->program = std::move(program);
  i->lease_ms = std::to_string(lease.count());
  i->connect(masters);
  for (std::size_t m = 0; m < masters.size(); ++m)
    i->targets.push_back({server_flags(masters[m]), {m}});
  return script_ceiling(std::move(i));
}

std::vector<script_rates> script_ceiling::measure(int clients, int pipeline, double seconds,
                                                  double& estimate) {
  auto& d = *impl_;
  const std::size_t n = d.targets.size();
  const double runs = 2;
  std::vector<script_rates> out(n);

  // Acquire: fresh keys, so the script takes its grant path (SET NX PX + INCR of the counter).
  std::vector<redis_benchmark_run> batch;
  for (const auto& t : d.targets) {
    auto run = d.base_run(t, clients, pipeline, seconds);
    run.requests = requests_for(estimate, seconds / runs, clients, pipeline);
    run.keyspace = acquire_keyspace;
    run.command = d.acquire_command();
    batch.push_back(std::move(run));
  }
  auto rps = d.run_all(batch, "acquire");
  for (std::size_t k = 0; k < n; ++k)
    out[k].acquire_rps = rps[k];
  for (auto& m : d.masters)
    delete_matching(*m.control, {std::string(rb::acquire_prefix) + "*"});

  // Release: keys set beforehand to the token it sends, so that most calls take the real
  // release path (TYPE, GET, DEL, [S]PUBLISH) rather than the cheap "not held" one. A cluster's
  // requests split evenly over its masters, each of which gets its share of the keys.
  std::vector<std::int64_t> keys_per_master(n);
  for (std::size_t k = 0; k < n; ++k) {
    const auto& t = d.targets[k];
    batch[k].requests = requests_for(out[k].acquire_rps, seconds / runs, clients, pipeline);
    const auto share = static_cast<std::int64_t>(t.masters.size());
    keys_per_master[k] =
        std::min<std::int64_t>(3 * batch[k].requests / share + 1, acquire_keyspace);
    for (const auto m : t.masters)
      d.set_release_keys(d.masters[m], keys_per_master[k]);
    batch[k].keyspace = keys_per_master[k];
    batch[k].command = d.release_command();
  }
  rps = d.run_all(batch, "release");
  double mean_pairs = 0;
  for (std::size_t k = 0; k < n; ++k) {
    out[k].release_rps = rps[k];
    std::int64_t hits = 0;
    for (const auto m : d.targets[k].masters)
      hits += keys_per_master[k] - d.delete_release_keys(d.masters[m], keys_per_master[k]);
    out[k].release_hit_fraction = static_cast<double>(hits) /
                                  static_cast<double>(std::max<std::int64_t>(1, batch[k].requests));
    mean_pairs += out[k].pairs() / static_cast<double>(n);
  }
  estimate = runs * mean_pairs;
  return out;
}

std::string script_ceiling::describe(int clients, int pipeline) const {
  const auto& d = *impl_;
  // Appended piece by piece: g++ 12 -O3 reports a false -Wrestrict on "x" + std::string
  // (GCC bug 105329).
  std::string out;
  const auto line = [&](const std::vector<std::string>& command, std::string_view keyspace) {
    out.append("redis-benchmark").append(d.cluster ? " --cluster --threads 1" : "");
    out.append(" -c ").append(std::to_string(clients));
    out.append(" -P ").append(std::to_string(pipeline));
    out.append(" -r ").append(keyspace);
    for (const auto& arg : command)
      out.append(" ").append(arg);
  };
  line(d.acquire_command(), "2000000000");
  out.append("; ");
  line(d.release_command(), "<3 x requests, keys pre-set to the token>");
  if (d.cluster) {
    out.append("; tags:");
    for (const auto& m : d.masters)
      out.append(" ").append(address_of(m.options)).append("=").append(m.tag);
  }
  return out;
}

void script_ceiling::cleanup() {
  auto& d = *impl_;
  for (auto& m : d.masters) {
    delete_matching(*m.control, {"dlock-bench:rb:*"});
    m.control->command({"DEL", with_tag(d.fence_key(), m.tag)});
  }
}

}  // namespace dlock::bench
