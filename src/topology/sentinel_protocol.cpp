#include "topology/sentinel_protocol.hpp"

#include <charconv>
#include <vector>

namespace dlock::detail {
namespace {

std::optional<std::uint16_t> parse_port(std::string_view text) {
  unsigned value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value == 0 || value > 65535) {
    return std::nullopt;
  }
  return static_cast<std::uint16_t>(value);
}

}  // namespace

std::optional<node_address> parse_master_address(const reply& r) {
  if (!r.is_array() || r.elements().size() != 2 || !r.at(0).is_string() || !r.at(1).is_string()) {
    return std::nullopt;
  }
  const auto port = parse_port(r.at(1).str());
  if (!port || r.at(0).str().empty()) return std::nullopt;
  return node_address{r.at(0).str(), *port};
}

std::optional<node_address> parse_switch_master(std::string_view payload,
                                                std::string_view master_name) {
  std::vector<std::string_view> words;
  while (!payload.empty()) {
    const auto space = payload.find(' ');
    words.push_back(payload.substr(0, space));
    if (space == std::string_view::npos) break;
    payload.remove_prefix(space + 1);
  }
  if (words.size() != 5 || words[0] != master_name || words[3].empty()) return std::nullopt;
  const auto port = parse_port(words[4]);
  if (!port) return std::nullopt;
  return node_address{std::string(words[3]), *port};
}

}  // namespace dlock::detail
