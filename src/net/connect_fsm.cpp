#include "net/connect_fsm.hpp"

#include <unistd.h>

#include "core/process_facts.hpp"
#include "dlock/error.hpp"
#include "dlock/version.hpp"
#include "wire/resp.hpp"

namespace dlock::net {
namespace {

// "dlock:HOST:PID", so that an operator reading CLIENT LIST knows whose connection it is; a
// connection name may hold no space, newline or byte outside printable ASCII. Read at every
// handshake: a forked child's reconnections carry its own pid.
std::string default_connection_name() {
  std::string name = "dlock:";
  for (const char c : detail::host_name()) {
    name += (c > ' ' && c <= '~') ? c : '_';
  }
  name += ':';
  name += std::to_string(::getpid());
  return name;
}

}  // namespace

std::error_code classify_error_reply(std::string_view text) {
  // Errors a script's redis.call raised reach us with the same code in front (Redis 7), and a
  // script's own errors follow the same convention.
  const auto code = text.substr(0, text.find(' '));
  if (code == "NOAUTH" || code == "WRONGPASS") return errc::auth_failed;
  if (code == "WRONGTYPE") return errc::wrong_type;
  if (code == "NOPERM") return errc::permission_denied;
  if (code == "UPGRADECONFLICT") return errc::upgrade_conflict;  // write_acquire.lua
  // An ACL refusal inside a script comes back as a plain ERR, worded by the server: "The user
  // executing the script can't ..." (Redis 7.0), "ACL failure in script: ..." (Valkey 8).
  if (code == "ERR" && (text.find("The user executing the script can't") != text.npos ||
                        text.starts_with("ERR ACL failure in script"))) {
    return errc::permission_denied;
  }
  if (code == "READONLY") return errc::read_only;
  if (code == "LOADING" || code == "BUSY" || code == "TRYAGAIN" || code == "MASTERDOWN" ||
      code == "CLUSTERDOWN") {
    return errc::server_busy;
  }
  return errc::server_error;
}

handshake::handshake(const connection_options& options, bool require_master) : options_(options) {
  auto add = [this](step what, std::span<const std::string_view> args) {
    wire::encode_command(request_, args);
    steps_.push_back(what);
  };
  if (!options.password.empty() || !options.user.empty()) {
    if (options.user.empty()) {
      const std::string_view args[] = {"AUTH", options.password};
      add(step::auth, args);
    } else {
      const std::string_view args[] = {"AUTH", options.user, options.password};
      add(step::auth, args);
    }
  }
  if (options.database != 0) {
    const std::string db = std::to_string(options.database);
    const std::string_view args[] = {"SELECT", db};
    add(step::select, args);
  }
  if (require_master) {
    const std::string_view args[] = {"ROLE"};
    add(step::role, args);
  }
  const std::string name =
      options.client_name.empty() ? default_connection_name() : options.client_name;
  const std::string_view args[] = {"CLIENT", "SETNAME", name};
  add(step::setname, args);
  // The library's name and version in CLIENT LIST / CLIENT INFO (Redis >= 7.2, Valkey >= 8).
  const std::string_view lib_name[] = {"CLIENT", "SETINFO", "lib-name", "dlock"};
  add(step::setinfo, lib_name);
  const std::string_view lib_ver[] = {"CLIENT", "SETINFO", "lib-ver", version};
  add(step::setinfo, lib_ver);
}

handshake::verdict handshake::on_reply(const reply& r) {
  if (seen_ >= steps_.size())
    return {status::failed, errc::protocol_error, "reply after handshake"};
  const step what = steps_[seen_++];
  const bool last = seen_ == steps_.size();
  bool ok = !r.is_error();
  // An older server does not know CLIENT SETINFO, and an ACL user may not be allowed it: the
  // announcement is for operators only, so any refusal is ignored.
  if (!ok && what == step::setinfo) ok = true;
  if (!ok && what == step::setname && options_.client_name.empty() &&
      r.str().starts_with("NOPERM")) {
    ok = true;
  }
  if (!ok) {
    const std::error_code ec =
        what == step::auth ? make_error_code(errc::auth_failed) : classify_error_reply(r.str());
    return {status::failed, ec,
            "connection handshake with " + options_.redacted_url() + " failed: " + r.str()};
  }
  if (what == step::role) {
    const std::string role =
        r.is_array() && !r.elements().empty() && r.at(0).is_string() ? r.at(0).str() : "?";
    if (role != "master") {
      // Sentinel named this server, but it is (no longer) the master: a failover under way or
      // an outdated answer. The caller asks the sentinels again.
      return {status::failed, errc::read_only,
              options_.redacted_url() + " is not the master (its ROLE is " + role + ")"};
    }
  }
  return {last ? status::ready : status::more, {}, {}};
}

std::chrono::milliseconds reconnect_backoff::next(std::uint64_t random) {
  const auto delay = step_;
  step_ = step_.count() == 0 ? min_ : std::min(step_ * 2, max_);
  if (delay.count() <= 0) return delay;
  const auto low = delay.count() / 2;
  return std::chrono::milliseconds(
      low +
      static_cast<std::int64_t>(random % static_cast<std::uint64_t>(delay.count() - low + 1)));
}

std::string connect_timeout_message(const connection_options& options, bool in_tls_handshake) {
  std::string what = "timed out after " + std::to_string(options.connect_timeout.count()) +
                     " ms connecting to " + options.redacted_url();
  if (in_tls_handshake) {
    what +=
        ": the server accepted the connection but never answered the TLS handshake (a "
        "plaintext Redis port? use redis:// there, or the server's tls-port)";
  }
  return what;
}

}  // namespace dlock::net
