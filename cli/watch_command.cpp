// dlock watch [PATTERN]: a live view of the locks, refreshed by what the servers announce
// (unlock messages, keyspace notifications) and by a bounded re-scan every --interval.
#include <fnmatch.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <climits>
#include <iostream>
#include <memory>
#include <set>

#include "cli.hpp"
#include "display.hpp"
#include "dlock/redis/client.hpp"
#include "lock_view.hpp"
#include "watch_model.hpp"
#include "watch_screen.hpp"

namespace dlock::cli {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

constexpr milliseconds dirty_period{100};   // dirty names are re-read at most this often
constexpr milliseconds plain_period{500};   // plain mode prints at most this often
constexpr milliseconds screen_period{250};  // the TTL countdown and the clock

enum class output_mode { terminal, plain, json };

struct watch_settings {
  std::string pattern = "*";
  bool all = false;
  output_mode mode = output_mode::plain;
  milliseconds interval{2000};
  std::int64_t count = 0;  // 0: until stopped
};

class watcher {
 public:
  watcher(const client_options& target, watch_settings s)
      : settings_(std::move(s)),
        target_(target),
        client_(connect_to(target)),
        masters_(client_.masters()),
        model_(settings_.all) {}

  int run();

 private:
  void subscribe();
  void refresh(std::vector<std::string> names, bool baseline);
  std::vector<std::string> scan();
  void take_messages();
  void emit(const std::vector<watch_event>& events);
  void show(steady::time_point now, bool force);
  std::vector<std::string> frame(steady::time_point now);
  std::string header(wall_time wall) const;
  std::string signature() const;
  bool wanted(const std::string& name) const {
    return ::fnmatch(settings_.pattern.c_str(), name.c_str(), 0) == 0;
  }
  bool done() const {
    if (settings_.count <= 0) return false;
    return (settings_.mode == output_mode::json ? events_ : refreshes_) >= settings_.count;
  }
  bool loop_once();

  watch_settings settings_;
  client_options target_;
  inbox inbox_;  // before the client and the subscriptions, whose handlers push into it
  dlock::client client_;
  std::vector<redis_client*> masters_;
  std::vector<subscription> subscriptions_;
  watch_model model_;
  std::set<std::string> dirty_;
  std::string notifications_ = "unknown";
  std::string error_;
  std::int64_t refreshes_ = 0, events_ = 0;
  steady::time_point last_flush_{}, next_scan_{}, last_print_{};
  std::string printed_;  // plain mode: the state the last table showed
  std::unique_ptr<signal_pipe> signals_;
  std::unique_ptr<terminal> screen_;  // after signals_: the terminal is restored first
  key_reader keys_;
  bool keyboard_ = ::isatty(STDIN_FILENO) != 0;  // keys are read while stdin is a terminal
  watch_sort sort_ = watch_sort::name;
};

// Unlock messages of every kind on every master, and keyspace notifications where the server
// sends them. Cluster releases go out with SPUBLISH, which no PSUBSCRIBE sees: there the
// keyspace notifications of each master and the re-scan find them.
void watcher::subscribe() {
  static const char* const unlock_patterns[] = {"redisson_lock__channel:*", "redisson_rwlock:*",
                                                "redisson_sc:*",
                                                "redisson_countdownlatch__channel__*"};
  const bool redlock = !target_.redlock.masters.empty();
  std::string state;
  for (auto* m : masters_) {
    const auto handler = [this](std::string_view channel, std::string_view message) {
      inbox_.push(channel, message);
    };
    try {
      for (const char* p : unlock_patterns)
        subscriptions_.push_back(m->psubscribe(p, handler));
      const auto db = std::to_string(m->options().database);
      subscriptions_.push_back(
          m->psubscribe(std::string("__keyspace@").append(db).append("__:*"), handler));
    } catch (const dlock::error&) {
      if (!redlock) throw;  // RedLock's other masters still tell; the re-scan covers the rest
      continue;
    }
    // Reading the setting may be forbidden (ACL, a renamed CONFIG): then a first notification
    // tells. It is never changed: that is the operator's choice.
    std::string here = "unknown";
    try {
      const auto r = m->command({"CONFIG", "GET", "notify-keyspace-events"});
      if (r.elements().size() >= 2) {
        const auto flags = r.elements()[1].str();
        here = flags.find('K') != std::string::npos && flags.size() > 1 ? "on" : "off";
      }
    } catch (const dlock::error&) {
    }
    if (state.empty() || state == here) {
      state = here;
    } else {
      state = "partly on";
    }
  }
  notifications_ = state.empty() ? "unknown" : state;
  model_.hear_releases(target_.cluster_seeds.empty() || notifications_ == "on");
}

// Lock names on every master, as `ls` finds them; RedLock tolerates masters that are down.
std::vector<std::string> watcher::scan() {
  const bool redlock = !target_.redlock.masters.empty();
  std::vector<std::string> names;
  std::optional<dlock::error> unreachable;
  std::size_t scanned = 0;
  masters_ = client_.masters();  // a cluster's masters change with its slots
  for (auto* m : masters_) {
    try {
      auto more = scan_lock_names(client_, *m);
      names.insert(names.end(), more.begin(), more.end());
      ++scanned;
    } catch (const dlock::error& e) {
      if (!redlock) throw;
      if (!unreachable) unreachable = e;
    }
  }
  if (scanned == 0 && unreachable) throw *unreachable;
  return names;
}

void watcher::take_messages() {
  const auto now = steady::now();
  for (const auto& [channel, message] : inbox_.take()) {
    std::vector<std::string> names;
    if (channel.starts_with("__keyspace@")) {
      if (notifications_ != "on" && notifications_ != "partly on") {
        notifications_ = "on";
        model_.hear_releases(true);
      }
      const auto at = channel.find("__:");
      const auto key = channel.substr(at == std::string::npos ? channel.size() : at + 3);
      names = names_of_key(key);
      if (names.empty() && model_.known(key)) {
        names.push_back(key);
        if (message == "expired") model_.note_expiry(key, now);
        // A release deletes the key: on a cluster, where its message is sharded, that says it.
        if (message == "del") model_.note_unlock(key, now);
      }
    } else {
      names = names_of_channel(channel);
      for (const auto& n : names)
        model_.note_unlock(n, now);
    }
    for (auto& n : names) {
      if (wanted(n)) dirty_.insert(std::move(n));
    }
  }
}

// Reads each name, then takes the messages that came meanwhile (so that a release is known as
// one when its snapshot is diffed), then diffs.
void watcher::refresh(std::vector<std::string> names, bool baseline) {
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  // A message that arrives while they are read marks them dirty again: it may be news.
  for (const auto& name : names)
    dirty_.erase(name);
  std::vector<std::pair<shown, steady::time_point>> read;
  read.reserve(names.size());
  for (const auto& name : names) {
    const auto at = steady::now();
    read.emplace_back(inspect(client_, name), at);
  }
  take_messages();
  const auto wall = std::chrono::system_clock::now();
  for (std::size_t i = 0; i < names.size(); ++i) {
    emit(model_.update(names[i], std::move(read[i].first), read[i].second, wall, baseline));
  }
  ++refreshes_;
  error_.clear();
}

void watcher::emit(const std::vector<watch_event>& events) {
  if (settings_.mode != output_mode::json) return;
  for (const auto& e : events) {
    if (done()) return;
    std::cout << event_json(e).dump() << "\n";
    ++events_;
  }
  std::cout.flush();
}

// The keys come before the settings, so that a narrow window still shows them.
std::string watcher::header(wall_time wall) const {
  std::string h = "dlock watch  ";
  h.append(server_text(target_, masters_))
      .append("  ")
      .append(std::to_string(model_.shown_count()))
      .append(" names  ")
      .append(clock_text(wall))
      .append("   q quit  s sort  / filter   notifications ")
      .append(notifications_)
      .append("  sort ")
      .append(sort_label(sort_));
  if (!keys_.filter().empty()) h.append("  filter ").append(escaped(keys_.filter()));
  return h;
}

std::vector<std::string> watcher::frame(steady::time_point now) {
  const auto wall = std::chrono::system_clock::now();
  std::vector<std::string> lines{header(wall)};
  if (keys_.editing()) {
    lines.push_back(std::string("filter (glob, Enter applies, Esc cancels): ")
                        .append(escaped(keys_.typed()))
                        .append("_"));
  } else if (!error_.empty()) {
    lines.push_back(std::string("error: ").append(escaped(error_)).append(" (retrying)"));
  } else if (notifications_ != "on") {
    lines.push_back("keyspace notifications off: acquisitions show at the next re-scan");
  } else {
    lines.emplace_back();
  }
  auto table = table_lines(model_.rows(keys_.filter(), sort_, now, wall));
  lines.insert(lines.end(), std::make_move_iterator(table.begin()),
               std::make_move_iterator(table.end()));
  return lines;
}

// What plain mode reprints on: the rows' holders, waiters and fences, not the clock.
std::string watcher::signature() const {
  std::string sig;
  const auto now = steady::now();
  for (const auto& r : model_.rows("", watch_sort::name, now, std::chrono::system_clock::now())) {
    sig.append(r.name).append("|").append(r.kind).append("|").append(r.holder).append("|");
    sig.append(r.waiters).append("|").append(r.fence).append("\n");
  }
  return sig;
}

void watcher::show(steady::time_point now, bool force) {
  if (settings_.mode == output_mode::terminal) {
    screen_->draw(frame(now));
    return;
  }
  if (settings_.mode != output_mode::plain) return;
  auto sig = signature();
  const bool first = last_print_ == steady::time_point{};
  if (!first && sig == printed_) return;
  if (!first && !force && now - last_print_ < plain_period) return;
  if (!first) std::cout << "\n";
  const auto wall = std::chrono::system_clock::now();
  for (const auto& line : table_lines(model_.rows("", sort_, now, wall)))
    std::cout << line << "\n";
  std::cout.flush();
  printed_ = std::move(sig);
  last_print_ = now;
}

// One turn: wait for a signal, a key, a message or the next deadline, then refresh what is due.
bool watcher::loop_once() {
  auto now = steady::now();
  auto wake = next_scan_;
  if (!dirty_.empty()) wake = std::min(wake, std::max(now, last_flush_ + dirty_period));
  if (settings_.mode == output_mode::terminal) wake = std::min(wake, now + screen_period);
  if (settings_.mode == output_mode::plain) wake = std::min(wake, now + plain_period);
  const auto wait = std::chrono::ceil<milliseconds>(std::max(wake - now, steady::duration(0)));
  pollfd fds[3] = {{signals_->fd(), POLLIN, 0}, {inbox_.fd(), POLLIN, 0}, {-1, POLLIN, 0}};
  if (screen_ && keyboard_) fds[2].fd = STDIN_FILENO;
  if (::poll(fds, 3, static_cast<int>(std::min<milliseconds::rep>(wait.count(), INT_MAX))) < 0 &&
      errno != EINTR) {
    throw failure(exit_software, "poll failed");
  }
  for (const int sig : signals_->take()) {
    if (sig != SIGWINCH) return false;
    if (screen_) screen_->resize();
  }
  if (fds[2].fd >= 0 && (fds[2].revents & (POLLIN | POLLHUP | POLLERR))) {
    char buf[64];
    const auto n = ::read(STDIN_FILENO, buf, sizeof buf);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) keyboard_ = false;
    for (const auto action :
         keys_.feed(std::string_view(buf, n > 0 ? static_cast<std::size_t>(n) : 0))) {
      if (action == key_action::quit) return false;
      if (action == key_action::sort)
        sort_ = static_cast<watch_sort>((static_cast<int>(sort_) + 1) % 3);
    }
  }
  take_messages();
  now = steady::now();
  try {
    if (now >= next_scan_) {
      auto names = scan();
      std::erase_if(names, [&](const std::string& n) { return !wanted(n); });
      const auto known = model_.names();
      names.insert(names.end(), known.begin(), known.end());
      next_scan_ = now + settings_.interval;
      last_flush_ = now;
      refresh(std::move(names), false);
    } else if (!dirty_.empty() && now >= last_flush_ + dirty_period) {
      last_flush_ = now;
      refresh(std::vector<std::string>(dirty_.begin(), dirty_.end()), false);
    }
  } catch (const dlock::error& e) {
    // The client reconnects by itself: say so, and try again at the next re-scan.
    if (settings_.mode != output_mode::terminal && error_ != message_of(e))
      std::cerr << "dlock: watch: " << escaped(message_of(e)) << " (retrying)\n";
    error_ = message_of(e);
    dirty_.clear();  // the next re-scan reads them all
  }
  show(steady::now(), false);
  return true;
}

int watcher::run() {
  subscribe();
  auto names = scan();
  std::erase_if(names, [&](const std::string& n) { return !wanted(n); });
  refresh(std::move(names), true);
  // Until the first scan worked, a signal ends watch the default way, and a connection error
  // leaves the terminal untouched.
  signals_ = std::make_unique<signal_pipe>();
  if (settings_.mode == output_mode::terminal) screen_ = std::make_unique<terminal>();
  const auto now = steady::now();
  next_scan_ = now + settings_.interval;
  last_flush_ = now;
  show(now, true);
  while (!done() && loop_once()) {
  }
  show(steady::now(), true);
  screen_.reset();
  return exit_ok;
}

class watch_command final : public subcommand {
 public:
  explicit watch_command(CLI::App& app)
      : subcommand(app.add_subcommand(
            "watch", "A live view of the locks, as they change (a top for distributed locks)")) {
    app_->add_option("pattern", pattern_, "Glob on lock names (default *)");
    app_->add_flag("--all", all_, "Also show free names");
    app_->add_flag("--json", json_,
                   "Print one JSON object per line per change (events: docs/cli.md)");
    app_->add_option("--interval", interval_text_,
                     "Re-scan every name this often (default 2s); changes the servers announce "
                     "show sooner")
        ->type_name("DUR");
    app_->add_option("--count", count_, "Stop after N refreshes (with --json: after N events)")
        ->type_name("N")
        ->check(CLI::PositiveNumber);
    app_->footer(
        "\nKeys: q quit, s sort (name, held, waiters), / filter (a glob; Enter applies, Esc "
        "cancels).\nWithout a terminal: a table after each change; --json: one event per "
        "line.\n\nExamples:\n  dlock watch\n  dlock watch 'deploy:*'\n  dlock watch --json "
        ">> locks.log");
  }
  int run(const invocation& in) override {
    watch_settings s;
    s.pattern = pattern_;
    s.all = all_;
    s.count = count_;
    s.interval = duration_flag("--interval", interval_text_);
    if (s.interval < 100ms) throw failure(exit_usage, "watch: --interval must be at least 100ms");
    s.mode = json_                     ? output_mode::json
             : ::isatty(STDOUT_FILENO) ? output_mode::terminal
                                       : output_mode::plain;
    watcher w(resolve_target(in.target), std::move(s));
    return w.run();
  }

 private:
  std::string pattern_ = "*";
  std::string interval_text_ = "2s";
  std::int64_t count_ = 0;
  bool all_ = false;
  bool json_ = false;
};

}  // namespace

std::unique_ptr<subcommand> add_watch_command(CLI::App& app) {
  return std::make_unique<watch_command>(app);
}

}  // namespace dlock::cli
