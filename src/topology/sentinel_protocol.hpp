// What Sentinel says, parsed without a socket: the master's address from
// SENTINEL GET-MASTER-ADDR-BY-NAME, and the new master from a +switch-master message.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "dlock/redis/connection_options.hpp"
#include "dlock/redis/reply.hpp"

namespace dlock::detail {

struct node_address {
  std::string host;
  std::uint16_t port = 0;
  friend bool operator==(const node_address&, const node_address&) = default;
};

/// `o` for the server at `a`, over TCP (a unix socket path is dropped): how a sentinel's or a
/// cluster's answer about a node becomes the options to connect to it.
inline connection_options at(connection_options o, const node_address& a) {
  o.host = a.host;
  o.port = a.port;
  o.unix_path.clear();
  return o;
}

/// The address in a GET-MASTER-ADDR-BY-NAME reply ([host, port]); nullopt for nil (the sentinel
/// does not know that master) or anything malformed.
std::optional<node_address> parse_master_address(const reply& r);

/// The new master in a +switch-master payload ("NAME OLDHOST OLDPORT NEWHOST NEWPORT") when it
/// is about `master_name`; nullopt otherwise.
std::optional<node_address> parse_switch_master(std::string_view payload,
                                                std::string_view master_name);

}  // namespace dlock::detail
