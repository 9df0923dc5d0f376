// URL and duration parsing. Error messages name the part that is wrong but never echo text
// that could hold a password: a mistyped URL can put the password where a port belongs.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

#include "dlock/error.hpp"
#include "dlock/redis/connection_options.hpp"

namespace dlock {
namespace {

[[noreturn]] void bad_url(const std::string& what) {
  throw error(errc::invalid_url, "invalid URL: " + what);
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decode(std::string_view text, const char* part) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    const bool complete = i + 2 < text.size();
    const int hi = complete ? hex_value(text[i + 1]) : -1;
    const int lo = complete ? hex_value(text[i + 2]) : -1;
    if (hi < 0 || lo < 0) bad_url(std::string("malformed percent-escape in the ") + part);
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

bool parse_uint(std::string_view text, std::uint64_t max, std::uint64_t& value) {
  if (text.empty()) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && ptr == text.data() + text.size() && value <= max;
}

int parse_database(std::string_view text) {
  std::uint64_t db = 0;
  if (!parse_uint(text, std::numeric_limits<int>::max(), db)) {
    bad_url("the database must be a non-negative integer");
  }
  return static_cast<int>(db);
}

void apply_query(connection_options& o, std::string_view query) {
  while (!query.empty()) {
    const auto amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (pair.empty()) continue;
    const auto eq = pair.find('=');
    if (eq == std::string_view::npos) bad_url("query option without a value");
    const std::string key(pair.substr(0, eq));
    const std::string value = percent_decode(pair.substr(eq + 1), "query");
    auto duration = [&]() {
      try {
        return parse_duration(value);
      } catch (const error&) {
        bad_url("query option '" + key + "' is not a duration such as 500ms or 2s");
      }
    };
    if (key == "ca") {
      o.tls.ca_file = value;
    } else if (key == "cert") {
      o.tls.cert_file = value;
    } else if (key == "key") {
      o.tls.key_file = value;
    } else if (key == "verify") {
      if (value == "peer") {
        o.tls.verify_peer = true;
      } else if (value == "none") {
        o.tls.verify_peer = false;
      } else {
        bad_url("query option 'verify' must be 'peer' or 'none'");
      }
    } else if (key == "sni") {
      o.tls.server_name = value;
    } else if (key == "name") {
      o.client_name = value;
    } else if (key == "db") {
      o.database = parse_database(value);
    } else if (key == "connect_timeout") {
      o.connect_timeout = duration();
    } else if (key == "command_timeout") {
      o.command_timeout = duration();
    } else {
      bad_url("unknown query option '" + key + "'");
    }
  }
  if (!o.tls.key_file.empty() && o.tls.cert_file.empty()) {
    bad_url("query option 'key' needs 'cert' (the client certificate the key belongs to)");
  }
}

void parse_userinfo(connection_options& o, std::string_view userinfo) {
  const auto colon = userinfo.find(':');
  if (colon == std::string_view::npos) {
    o.user = percent_decode(userinfo, "user name");
  } else {
    o.user = percent_decode(userinfo.substr(0, colon), "user name");
    o.password = percent_decode(userinfo.substr(colon + 1), "password");
  }
}

void parse_host_port(connection_options& o, std::string_view hostport) {
  std::string_view port_text;
  if (!hostport.empty() && hostport.front() == '[') {
    const auto close = hostport.find(']');
    if (close == std::string_view::npos) bad_url("unterminated '[' in an IPv6 host");
    o.host = std::string(hostport.substr(1, close - 1));
    std::string_view rest = hostport.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') bad_url("unexpected text after the IPv6 host");
      port_text = rest.substr(1);
      if (port_text.empty()) bad_url("empty port");
    }
  } else {
    const auto colon = hostport.find(':');
    o.host = std::string(hostport.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = hostport.substr(colon + 1);
      if (port_text.empty()) bad_url("empty port");
    }
  }
  if (o.host.empty()) bad_url("missing host");
  if (!port_text.empty()) {
    std::uint64_t port = 0;
    if (!parse_uint(port_text, 65535, port) || port == 0) {
      bad_url("the port must be a number from 1 to 65535");
    }
    o.port = static_cast<std::uint16_t>(port);
  }
}

}  // namespace

connection_options connection_options::from_url(std::string_view url) {
  const auto sep = url.find("://");
  std::string scheme(url.substr(0, sep == std::string_view::npos ? 0 : sep));
  const bool scheme_like = !scheme.empty() && std::all_of(scheme.begin(), scheme.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.';
  });
  // Text that is not a scheme may be anything, a password included: never echo it.
  if (sep == std::string_view::npos || !scheme_like) {
    bad_url("expected redis://, rediss://, valkey://, valkeys:// or unix:// at the start");
  }
  std::transform(scheme.begin(), scheme.end(), scheme.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::string_view rest = url.substr(sep + 3);
  connection_options o;

  std::string_view query;
  if (const auto q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }

  if (scheme == "unix") {
    // unix://[user[:password]@]/path: credentials, if any, end before the path's first '/'.
    if (const auto at = rest.substr(0, rest.find('/')).rfind('@'); at != std::string_view::npos) {
      parse_userinfo(o, rest.substr(0, at));
      rest = rest.substr(at + 1);
    }
    if (rest.empty() || rest.front() != '/') bad_url("unix:// needs an absolute socket path");
    o.unix_path = percent_decode(rest, "socket path");
    apply_query(o, query);
    return o;
  }
  // Valkey speaks the same protocol: its schemes are the same two.
  if (scheme != "redis" && scheme != "rediss" && scheme != "valkey" && scheme != "valkeys") {
    // A word of scheme characters before "://" cannot be a password: safe to echo.
    bad_url("unsupported scheme '" + scheme +
            "' (expected redis://, rediss://, valkey://, valkeys:// or unix://)");
  }
  o.tls.enabled = scheme == "rediss" || scheme == "valkeys";

  std::string_view authority = rest;
  std::string_view path;
  if (const auto slash = rest.find('/'); slash != std::string_view::npos) {
    authority = rest.substr(0, slash);
    path = rest.substr(slash + 1);
  }
  if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
    parse_userinfo(o, authority.substr(0, at));
    authority = authority.substr(at + 1);
  }
  parse_host_port(o, authority);
  if (!path.empty()) o.database = parse_database(path);
  apply_query(o, query);
  return o;
}

std::string connection_options::redacted_url() const {
  std::string url = unix_path.empty() ? (tls.enabled ? "rediss://" : "redis://") : "unix://";
  if (!user.empty() || !password.empty()) {
    url += user;
    if (!password.empty()) url += ":***";
    url += '@';
  }
  if (!unix_path.empty()) {
    url += unix_path;
    if (database != 0) url += "?db=" + std::to_string(database);
    return url;
  }
  url += host.find(':') != std::string::npos ? '[' + host + ']' : host;
  url += ':' + std::to_string(port);
  if (database != 0) url += '/' + std::to_string(database);
  return url;
}

std::chrono::milliseconds parse_duration(std::string_view text) {
  auto bad = [&]() -> std::chrono::milliseconds {
    throw error(errc::invalid_argument,
                "invalid duration '" + std::string(text) + "' (expected e.g. 500ms, 10s, 2m)");
  };
  std::size_t digits_end = 0;
  while (digits_end < text.size() &&
         ((text[digits_end] >= '0' && text[digits_end] <= '9') || text[digits_end] == '.')) {
    ++digits_end;
  }
  const std::string_view number = text.substr(0, digits_end);
  const std::string_view unit = text.substr(digits_end);
  if (number.empty() || number.front() == '.' || number.back() == '.') return bad();
  double value = 0;
  auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (ec != std::errc() || ptr != number.data() + number.size()) return bad();
  double scale = 0;
  if (unit.empty() || unit == "s") {
    scale = 1000;
  } else if (unit == "ms") {
    scale = 1;
  } else if (unit == "m") {
    scale = 60'000;
  } else if (unit == "h") {
    scale = 3'600'000;
  } else {
    return bad();
  }
  const double ms = std::round(value * scale);
  // Far beyond any sane lease or wait, and well inside the range of every clock we add it to.
  if (!(ms >= 0) || ms > 1e12) return bad();
  return std::chrono::milliseconds(static_cast<std::int64_t>(ms));
}

}  // namespace dlock
