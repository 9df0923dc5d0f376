// A Redis Cluster's slot map and redirects, without a socket: the slot of a key (CRC16 with the
// hash-tag rule), who owns which slot (from CLUSTER SLOTS), and what a MOVED or ASK error says.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/redis/reply.hpp"
#include "topology/sentinel_protocol.hpp"

namespace dlock::detail {

inline constexpr std::uint32_t cluster_slots = 16384;

/// The cluster slot of `key`: CRC16 (XMODEM) mod 16384 of the key, or of its hash tag (the part
/// between the first `{` and the first `}` after it, when not empty).
std::uint16_t key_slot(std::string_view key) noexcept;

/// Masters by slot, as CLUSTER SLOTS describes them.
struct slot_ranges {
  struct range {
    std::uint16_t first = 0;
    std::uint16_t last = 0;
    node_address master;
  };
  std::vector<range> ranges;
};

/// Parses a CLUSTER SLOTS reply. An empty host (a node that does not know its own address)
/// is taken to be `default_host`, the address the reply came from. nullopt if malformed.
std::optional<slot_ranges> parse_cluster_slots(const reply& r, std::string_view default_host);

/// A MOVED or ASK error reply.
struct redirect {
  enum class type { moved, ask };
  type kind = type::moved;
  std::uint16_t slot = 0;
  node_address target;
};
/// "MOVED 3999 127.0.0.1:6381" or "ASK 3999 127.0.0.1:6381"; nullopt for any other text.
std::optional<redirect> parse_redirect(std::string_view error_text);

/// Errors after which the same command may succeed shortly on the same node: TRYAGAIN (a
/// multi-key command during a migration) and CLUSTERDOWN (no quorum, or slots uncovered).
bool cluster_retryable(std::string_view error_text) noexcept;

}  // namespace dlock::detail
