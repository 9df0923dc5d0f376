#include "dlock/keys.hpp"

namespace dlock {

std::string derived_key(std::string_view prefix, std::string_view name) {
  std::string key;
  key.reserve(prefix.size() + name.size() + 3);
  key.append(prefix).append(":");
  if (name.find('{') != std::string_view::npos) return key.append(name);
  return key.append("{").append(name).append("}");
}

lock_keys keys_of_lock(std::string_view name) {
  return {std::string(name), derived_key(fence_counter_prefix, name),
          derived_key("redisson_lock__channel", name), derived_key(holder_key_prefix, name)};
}

std::vector<std::string> lock_names_of_fence_counter(std::string_view counter_key) {
  const std::string prefix = std::string(fence_counter_prefix) + ":";
  if (!counter_key.starts_with(prefix)) return {};
  const std::string_view rest = counter_key.substr(prefix.size());
  // A derived key is prefix:{NAME} for a NAME without '{', and prefix:NAME for a NAME with one;
  // `rest` is therefore a name of the second form whenever it contains '{', and of the first
  // form when it is "{NAME}" with no '{' inside.
  std::vector<std::string> names;
  if (rest.size() > 2 && rest.front() == '{' && rest.back() == '}') {
    const auto inner = rest.substr(1, rest.size() - 2);
    if (inner.find('{') == std::string_view::npos) names.emplace_back(inner);
  }
  if (rest.find('{') != std::string_view::npos) names.emplace_back(rest);
  return names;
}

}  // namespace dlock
