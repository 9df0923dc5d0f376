// What the connections and topologies of one client report upwards, for its events, metrics and
// log (client_options::on_event, logger): rare happenings, never the traffic itself.
#pragma once

#include <functional>
#include <string>

namespace dlock::net {

struct notice {
  enum class kind {
    connection_lost,  // a connection that was up dropped
    reconnected,      // a connection is up again after a drop
    master_switched,  // Sentinel: the client follows a new master
    slot_moved,       // Cluster: a MOVED redirect was followed
  };
  kind what = kind::connection_lost;
  std::string node;    // "host:port" (or a unix socket's path)
  std::string key;     // slot_moved: the key whose command was redirected
  std::string detail;  // the error, where there is one
};

using notice_handler = std::function<void(notice)>;

}  // namespace dlock::net
