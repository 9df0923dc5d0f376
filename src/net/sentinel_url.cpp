#include "net/sentinel_url.hpp"

#include <string>

#include "dlock/error.hpp"

namespace dlock::detail {
namespace {

[[noreturn]] void bad_url(const std::string& what) {
  throw error(errc::invalid_url, "invalid URL: " + what);
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decoded(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const int hi = text[i] == '%' && i + 2 < text.size() ? hex_digit(text[i + 1]) : -1;
    const int lo = hi >= 0 ? hex_digit(text[i + 2]) : -1;
    if (text[i] == '%' && (hi < 0 || lo < 0))
      bad_url("malformed percent-escape in the master name");
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

}  // namespace

bool is_sentinel_url(std::string_view url) {
  return url.starts_with("redis-sentinel://") || url.starts_with("valkey-sentinel://");
}

sentinel_url parse_sentinel_url(std::string_view url) {
  if (!is_sentinel_url(url)) {
    bad_url("a Sentinel URL starts with redis-sentinel:// or valkey-sentinel://");
  }
  url.remove_prefix(url.find("://") + 3);
  sentinel_url out;

  const auto hash = url.find('#');
  if (hash == std::string_view::npos || hash + 1 == url.size()) {
    bad_url("a Sentinel URL names the master after '#' (redis-sentinel://host:26379#mymaster)");
  }
  out.sentinel.master_name = percent_decoded(url.substr(hash + 1));
  url = url.substr(0, hash);

  // The userinfo ends at the last '@' before the query (a sentinel_password may hold one).
  const auto at = url.substr(0, url.find('?')).rfind('@');
  const std::string_view userinfo =
      at == std::string_view::npos ? std::string_view() : url.substr(0, at);
  const auto hosts_begin = at == std::string_view::npos ? 0 : at + 1;
  const auto hosts_end = url.find_first_of("/?", hosts_begin);
  const std::string_view hosts = url.substr(hosts_begin, hosts_end - hosts_begin);
  const std::string_view tail =
      hosts_end == std::string_view::npos ? std::string_view() : url.substr(hosts_end);
  if (hosts.empty()) bad_url("a Sentinel URL needs at least one sentinel host");

  // Split the query: sentinel_user / sentinel_password are the sentinels'; the rest is shared.
  std::string path(tail.substr(0, tail.find('?')));
  std::string shared_query;
  std::string sentinel_user;
  std::string sentinel_password;
  if (const auto q = tail.find('?'); q != std::string_view::npos) {
    std::string_view query = tail.substr(q + 1);
    while (!query.empty()) {
      const auto amp = query.find('&');
      const auto item = query.substr(0, amp);
      if (item.starts_with("sentinel_user=")) {
        sentinel_user = std::string(item.substr(14));
      } else if (item.starts_with("sentinel_password=")) {
        sentinel_password = std::string(item.substr(18));
      } else if (!item.empty()) {
        shared_query += shared_query.empty() ? '?' : '&';
        shared_query += item;
      }
      if (amp == std::string_view::npos) break;
      query.remove_prefix(amp + 1);
    }
  }

  std::string sentinel_userinfo;
  if (!sentinel_user.empty() || !sentinel_password.empty()) {
    sentinel_userinfo = sentinel_user;
    if (!sentinel_password.empty()) sentinel_userinfo.append(":").append(sentinel_password);
    sentinel_userinfo += '@';
  }
  std::string_view rest = hosts;
  std::string first_host;
  while (true) {
    const auto comma = rest.find(',');
    std::string host(rest.substr(0, comma));
    if (host.empty()) bad_url("an empty sentinel host in the list");
    const auto bracket = host.rfind(']');
    const auto colon = host.rfind(':');
    if (colon == std::string::npos || (bracket != std::string::npos && colon < bracket)) {
      host += ":26379";
    }
    if (first_host.empty()) first_host = host;
    std::string sentinel = "redis://";
    sentinel.append(sentinel_userinfo).append(host).append(shared_query);
    out.sentinel.sentinels.push_back(connection_options::from_url(sentinel));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  std::string master = "redis://";
  if (!userinfo.empty()) master.append(userinfo).append("@");
  master.append(first_host).append(path).append(shared_query);
  out.master = connection_options::from_url(master);
  out.master.port = 6379;  // the sentinels say where the master is; this only keeps it tidy
  return out;
}

}  // namespace dlock::detail
