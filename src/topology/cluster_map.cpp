#include "topology/cluster_map.hpp"

#include <charconv>

namespace dlock::detail {
namespace {

// CRC16-CCITT (XMODEM): polynomial 0x1021, initial value 0, as Redis Cluster specifies.
constexpr std::array<std::uint16_t, 256> make_crc_table() {
  std::array<std::uint16_t, 256> table{};
  for (unsigned i = 0; i < 256; ++i) {
    std::uint16_t crc = static_cast<std::uint16_t>(i << 8);
    for (int bit = 0; bit < 8; ++bit)
      crc = static_cast<std::uint16_t>((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
    table[i] = crc;
  }
  return table;
}
constexpr auto crc_table = make_crc_table();

std::uint16_t crc16(std::string_view data) noexcept {
  std::uint16_t crc = 0;
  for (const char c : data) {
    crc = static_cast<std::uint16_t>(
        (crc << 8) ^ crc_table[((crc >> 8) ^ static_cast<unsigned char>(c)) & 0xff]);
  }
  return crc;
}

template <class T>
bool parse_number(std::string_view text, T& value) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

std::uint16_t key_slot(std::string_view key) noexcept {
  if (const auto open = key.find('{'); open != std::string_view::npos) {
    const auto close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return static_cast<std::uint16_t>(crc16(key) % cluster_slots);
}

std::optional<slot_ranges> parse_cluster_slots(const reply& r, std::string_view default_host) {
  if (!r.is_array()) return std::nullopt;
  slot_ranges out;
  for (const auto& entry : r.elements()) {
    // [first, last, [host, port, id, ...] (the master), replicas...]
    if (!entry.is_array() || entry.elements().size() < 3) return std::nullopt;
    const auto& first = entry.at(0);
    const auto& last = entry.at(1);
    const auto& master = entry.at(2);
    if (!first.is_integer() || !last.is_integer() || !master.is_array() ||
        master.elements().size() < 2 || !master.at(0).is_string() || !master.at(1).is_integer()) {
      return std::nullopt;
    }
    const auto lo = first.integer();
    const auto hi = last.integer();
    const auto port = master.at(1).integer();
    if (lo < 0 || hi < lo || hi >= static_cast<std::int64_t>(cluster_slots) || port <= 0 ||
        port > 65535) {
      return std::nullopt;
    }
    std::string host = master.at(0).str();
    if (host.empty() || host == "?") host = std::string(default_host);
    out.ranges.push_back({static_cast<std::uint16_t>(lo),
                          static_cast<std::uint16_t>(hi),
                          {std::move(host), static_cast<std::uint16_t>(port)}});
  }
  return out;
}

std::optional<redirect> parse_redirect(std::string_view text) {
  redirect out;
  if (text.starts_with("MOVED ")) {
    out.kind = redirect::type::moved;
    text.remove_prefix(6);
  } else if (text.starts_with("ASK ")) {
    out.kind = redirect::type::ask;
    text.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  const auto space = text.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  unsigned slot = 0;
  if (!parse_number(text.substr(0, space), slot) || slot >= cluster_slots) return std::nullopt;
  out.slot = static_cast<std::uint16_t>(slot);
  const auto address = text.substr(space + 1);
  const auto colon = address.rfind(':');
  unsigned port = 0;
  if (colon == std::string_view::npos || colon == 0 ||
      !parse_number(address.substr(colon + 1), port) || port == 0 || port > 65535) {
    return std::nullopt;
  }
  out.target = {std::string(address.substr(0, colon)), static_cast<std::uint16_t>(port)};
  return out;
}

bool cluster_retryable(std::string_view text) noexcept {
  return text.starts_with("TRYAGAIN") || text.starts_with("CLUSTERDOWN");
}

}  // namespace dlock::detail
