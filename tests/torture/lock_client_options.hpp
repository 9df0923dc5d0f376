// The client options a torture worker (and the controller, for its repairs) uses for a
// deployment's lock_url (deployment.hpp): the URL's topology, with the run's timeouts on every
// connection, sentinels' included.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/client.hpp"

namespace dlock::torture {

inline std::vector<std::string> split_commas(std::string_view list) {
  std::vector<std::string> out;
  while (!list.empty()) {
    const auto comma = list.find(',');
    if (comma != 0) out.emplace_back(list.substr(0, comma));
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return out;
}

inline client_options lock_client_options(const std::string& topology, const std::string& url,
                                          std::chrono::milliseconds command_timeout,
                                          std::chrono::milliseconds connect_timeout) {
  client_options o;
  if (topology == "cluster") {
    o = client_options::cluster(split_commas(url));
  } else if (topology == "redlock") {
    o = client_options::redlock_masters(split_commas(url));
  } else {
    o = client_options::from_url(url);
  }
  const auto timeouts = [&](connection_options& c) {
    c.command_timeout = command_timeout;
    c.connect_timeout = connect_timeout;
    c.reconnect_max = std::chrono::milliseconds(250);
  };
  timeouts(o.connection);
  for (auto& s : o.sentinel.sentinels)
    timeouts(s);
  for (auto& m : o.redlock.masters)
    timeouts(m);
  return o;
}

}  // namespace dlock::torture
