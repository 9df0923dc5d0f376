#include <algorithm>
#include <atomic>
#include <future>

#include "core/one_shot.hpp"
#include "dlock/error.hpp"
#include "net/redis_client_impl.hpp"

namespace dlock {
namespace {

[[noreturn]] void throw_failure(std::error_code ec, const reply& r, std::string_view command) {
  if (r.is_error()) throw error(ec, r.str());
  throw error(ec, std::string(command) + ": " + ec.message());
}

// A caller thread parked on one command.
class sync_call {
 public:
  reply_callback callback() {
    return [this](std::error_code ec, reply r) { result_.put({ec, std::move(r)}); };
  }
  reply wait(std::string_view command) {
    auto [ec, r] = result_.take();
    if (ec) throw_failure(ec, r, command);
    return std::move(r);
  }

 private:
  detail::one_shot<std::pair<std::error_code, reply>> result_;
};

void forbid_io_thread(const redis_client::impl& impl) {
  impl.io.refuse_blocking("a synchronous Redis command", "make it from another thread");
}

std::string_view command_name(std::span<const std::string_view> args) {
  return args.empty() ? std::string_view("(empty command)") : args.front();
}

}  // namespace

redis_client::impl::impl(connection_options o)
    : io_holder(std::make_shared<net::io_thread>()),
      io(*io_holder),
      owns_io(true),
      options(std::move(o)) {
  connect();
}

redis_client::impl::impl(connection_options o, std::shared_ptr<net::io_thread> shared_io,
                         connect_settings s)
    : io_holder(std::move(shared_io)),
      io(*io_holder),
      owns_io(false),
      settings(s),
      options(std::move(o)) {
  connect();
}

void redis_client::impl::connect() {
  if (options.tls.enabled) tls = net::make_tls_context(options.tls);
  commands = std::make_unique<net::connection>(io, options, tls, net::connection::mode::commands);
  for (std::size_t i = 1; i < std::max<std::size_t>(settings.lanes, 1); ++i) {
    more_lanes.push_back(
        std::make_unique<net::connection>(io, options, tls, net::connection::mode::commands));
  }
  if (settings.require_master) {
    for (std::size_t i = 0; i < lanes(); ++i)
      lane(i).require_master();
  }
  if (settings.background) {
    // Failed attempts are retried in the background; commands wait for the connection up to
    // their own deadlines. The first lane's first attempt is the one reported.
    io.run([&] {
      commands->start(
          [report = settings.on_first_attempt](std::error_code ec, const std::string& detail) {
            if (report) report(ec, detail);
          });
      for (auto& c : more_lanes)
        c->start([](std::error_code, const std::string&) {});
    });
    return;
  }
  std::promise<std::pair<std::error_code, std::string>> first;
  io.post([&] {
    commands->start([&first](std::error_code ec, const std::string& detail) {
      first.set_value({ec, detail});
    });
  });
  auto [ec, detail] = first.get_future().get();
  if (ec) {
    // The other lanes never started: nothing of theirs is pending on the I/O thread.
    if (owns_io) {
      io.run([&] { close_lanes(errc::client_closed); });
      io.stop();
    } else {
      // The shared thread goes on: let the handlers the close cancelled run first, then let the
      // connections go on that thread, where nothing can be touching them any more.
      io.close_then_release([&] { close_lanes(errc::client_closed); },
                            [&] {
                              commands.reset();
                              more_lanes.clear();
                            });
    }
    throw error(ec, detail);
  }
  // The first lane reached the server: the others start now (so that a failed first lane leaves
  // none of theirs mid-handshake when they are let go), and construction waits for their first
  // attempts too. One that failed retries in the background, as after a lost connection; its
  // commands wait for it up to their own deadlines.
  if (!more_lanes.empty()) {
    std::vector<std::promise<void>> attempted(more_lanes.size());
    io.post([&] {
      for (std::size_t i = 0; i < more_lanes.size(); ++i) {
        more_lanes[i]->start(
            [&done = attempted[i]](std::error_code, const std::string&) { done.set_value(); });
      }
    });
    for (auto& done : attempted)
      done.get_future().wait();
  }
}

void redis_client::impl::close_lanes(std::error_code reason) {
  for (std::size_t i = 0; i < lanes(); ++i)
    lane(i).close(reason);
}

redis_client::impl::~impl() {
  auto close = [&] {
    if (subscriber_) subscriber_->close();
    close_lanes(errc::client_closed);
  };
  if (owns_io) {
    io.run(close);
    io.stop();
  } else {
    close();  // the owner stopped the shared thread already: nothing else touches these now
  }
}

net::subscriber& redis_client::impl::subscriber() {
  if (!subscriber_) {
    subscriber_ = std::make_unique<net::subscriber>(io, options, tls, settings.require_master);
    if (attempt_failed_) subscriber_->set_attempt_failed_handler(attempt_failed_);
  }
  return *subscriber_;
}

void redis_client::impl::retarget(const std::string& host, std::uint16_t port) {
  options.host = host;
  options.port = port;
  options.unix_path.clear();
  for (std::size_t i = 0; i < lanes(); ++i)
    lane(i).retarget(host, port);
  if (subscriber_) subscriber_->retarget(host, port);
}

void redis_client::impl::set_attempt_failed_handler(std::function<void(std::error_code)> handler) {
  attempt_failed_ = handler;
  for (std::size_t i = 0; i < lanes(); ++i)
    lane(i).set_attempt_failed_handler(handler);
  if (subscriber_) subscriber_->set_attempt_failed_handler(attempt_failed_);
}

void redis_client::impl::unsubscribe(std::uint64_t id) noexcept {
  try {
    io.run([&] {
      if (subscriber_) subscriber_->remove(id);
    });
  } catch (...) {
    // Only allocation can fail here; the handler then stays until the client closes.
  }
}

// ---- subscription ----

subscription::subscription(subscription&& other) noexcept
    : owner_(std::move(other.owner_)), id_(std::exchange(other.id_, 0)) {}

subscription& subscription::operator=(subscription&& other) noexcept {
  if (this != &other) {
    reset();
    owner_ = std::move(other.owner_);
    id_ = std::exchange(other.id_, 0);
  }
  return *this;
}

subscription::~subscription() {
  reset();
}

void subscription::reset() noexcept {
  if (id_ == 0) return;
  if (auto o = owner_.lock()) o->unsubscribe(id_);
  owner_.reset();
  id_ = 0;
}

// ---- redis_client ----

redis_client::redis_client(connection_options options)
    : impl_(std::make_shared<impl>(std::move(options))) {}

redis_client::redis_client(std::string_view url)
    : redis_client(connection_options::from_url(url)) {}

redis_client::~redis_client() = default;

namespace {
net::clock::time_point deadline_for(const connection_options& o, std::chrono::milliseconds t) {
  return net::clock::now() + (t.count() > 0 ? t : o.command_timeout);
}
}  // namespace

reply redis_client::command(std::span<const std::string_view> args,
                            std::chrono::milliseconds timeout) {
  forbid_io_thread(*impl_);
  sync_call call;
  impl_->commands->submit(args, deadline_for(impl_->options, timeout), call.callback());
  return call.wait(command_name(args));
}

reply redis_client::command(const std::vector<std::string>& args,
                            std::chrono::milliseconds timeout) {
  std::vector<std::string_view> views(args.begin(), args.end());
  return command(std::span<const std::string_view>(views), timeout);
}

void redis_client::command_async(std::span<const std::string_view> args, reply_callback done,
                                 std::chrono::milliseconds timeout) {
  impl_->commands->submit(args, deadline_for(impl_->options, timeout), std::move(done));
}

std::future<reply> redis_client::command_future(std::span<const std::string_view> args,
                                                std::chrono::milliseconds timeout) {
  auto promise = std::make_shared<std::promise<reply>>();
  auto future = promise->get_future();
  std::string name(command_name(args));
  impl_->commands->submit(args, deadline_for(impl_->options, timeout),
                          [promise, name = std::move(name)](std::error_code ec, reply r) {
                            if (!ec) {
                              promise->set_value(std::move(r));
                              return;
                            }
                            try {
                              throw_failure(ec, r, name);
                            } catch (...) {
                              promise->set_exception(std::current_exception());
                            }
                          });
  return future;
}

reply redis_client::eval(const script& s, std::span<const std::string_view> keys,
                         std::span<const std::string_view> args,
                         std::chrono::milliseconds timeout) {
  forbid_io_thread(*impl_);
  sync_call call;
  impl_->commands->submit_eval(s, keys, args, deadline_for(impl_->options, timeout),
                               call.callback());
  return call.wait("EVALSHA");
}

void redis_client::eval_async(const script& s, std::span<const std::string_view> keys,
                              std::span<const std::string_view> args, reply_callback done,
                              std::chrono::milliseconds timeout) {
  impl_->commands->submit_eval(s, keys, args, deadline_for(impl_->options, timeout),
                               std::move(done));
}

namespace {

subscription subscribe_to(redis_client& client, net::subscriber::kind kind, std::string name,
                          message_handler on_message) {
  auto impl = detail::redis_client_access::shared(client);
  forbid_io_thread(*impl);
  const char* verb = kind == net::subscriber::kind::channel ? "SUBSCRIBE" : "PSUBSCRIBE";
  if (name.empty()) {
    throw error(errc::invalid_argument, std::string(verb) + ": empty channel or pattern");
  }
  auto confirmed = std::make_shared<std::promise<void>>();
  auto future = confirmed->get_future();
  const auto id = impl->io.run([&] {
    return impl->subscriber().add(kind, name, std::move(on_message),
                                  [confirmed, fired = false]() mutable {
                                    if (!std::exchange(fired, true)) confirmed->set_value();
                                  });
  });
  auto sub = detail::redis_client_access::make_subscription(impl, id);
  if (future.wait_for(impl->options.command_timeout) != std::future_status::ready) {
    throw error(errc::timeout, std::string(verb) + " was not confirmed within " +
                                   std::to_string(impl->options.command_timeout.count()) + " ms");
  }
  return sub;
}

}  // namespace

subscription redis_client::subscribe(std::string channel, message_handler on_message) {
  return subscribe_to(*this, net::subscriber::kind::channel, std::move(channel),
                      std::move(on_message));
}

subscription redis_client::psubscribe(std::string pattern, message_handler on_message) {
  return subscribe_to(*this, net::subscriber::kind::pattern, std::move(pattern),
                      std::move(on_message));
}

client_counters redis_client::counters() const noexcept {
  auto get = [](const std::atomic<std::uint64_t>& v) { return v.load(std::memory_order_relaxed); };
  client_counters sum{};
  for (std::size_t i = 0; i < impl_->lanes(); ++i) {
    const auto& c = impl_->lane(i).counters();
    sum.commands_sent += get(c.commands_sent);
    sum.writes += get(c.writes);
    sum.replies += get(c.replies);
    sum.reconnects += get(c.reconnects);
    sum.connection_losses += get(c.connection_losses);
    sum.timeouts += get(c.timeouts);
    sum.noscript_retries += get(c.noscript_retries);
  }
  return sum;
}

const connection_options& redis_client::options() const noexcept {
  return impl_->options;
}

bool redis_client::connected() const noexcept {
  return impl_->commands->up();
}

}  // namespace dlock
