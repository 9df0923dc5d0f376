// The Sentinel URL form Lettuce established:
// redis-sentinel://[[user:]password@]host1[:port1][,host2[:port2]...][/db][?query]#MASTER
// (valkey-sentinel:// is the same form).
#pragma once

#include <string_view>

#include "dlock/deployment_options.hpp"

namespace dlock::detail {

struct sentinel_url {
  connection_options master;  // the data nodes' credentials, database and query options
  sentinel_options sentinel;  // the master's name, and each sentinel's address and credentials
};

/// True if `url` starts with redis-sentinel:// or valkey-sentinel://.
bool is_sentinel_url(std::string_view url);

/// Parses the URL. The userinfo is the master's; `sentinel_user` and `sentinel_password` in the
/// query are the sentinels'; the other query options apply to both; ports default to 26379.
/// Throws dlock::error(errc::invalid_url) naming the part that is wrong (never a password).
sentinel_url parse_sentinel_url(std::string_view url);

}  // namespace dlock::detail
