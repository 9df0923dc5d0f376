#include "locks/kinds/lock_kind.hpp"

#include "dlock/keys.hpp"

namespace dlock::detail {

lock_names::lock_names(std::string lock_name, const std::string& shared_fence_counter) {
  auto keys = keys_of_lock(lock_name);
  name = std::move(lock_name);
  fence_key = shared_fence_counter.empty() ? std::move(keys.fence_counter) : shared_fence_counter;
  channel = std::move(keys.unlock_channel);
  holder_key = std::move(keys.holder);
}

// Every kind's acquire script answers {1, fence} (granted), {2, fence} (re-entered) or
// {0, pttl} (held by someone else).
attempt_outcome lock_kind::decode_attempt(const reply& r) const {
  if (!r.is_array() || r.elements().size() != 2) return {};
  const auto& status = r.elements()[0];
  const auto& value = r.elements()[1];
  if (!status.is_integer() || !value.is_integer()) return {};
  switch (status.integer()) {
    case 1:
      return {attempt_outcome::type::granted, static_cast<std::uint64_t>(value.integer()), 0};
    case 2:
      return {attempt_outcome::type::reentered, static_cast<std::uint64_t>(value.integer()), 0};
    case 0:
      return {attempt_outcome::type::busy, 0, value.integer()};
    default:
      return {};
  }
}

std::string suffixed_key(std::string_view name, std::string_view suffix) {
  std::string key;
  if (name.find('{') != std::string_view::npos) {
    key.append(name);
  } else {
    key.append("{").append(name).append("}");
  }
  return key.append(":").append(suffix);
}

std::shared_ptr<const lock_names> lock_kind::names_of(std::string name,
                                                      const std::string& fence_counter) const {
  return std::make_shared<const lock_names>(std::move(name), fence_counter);
}

std::span<const lock_kind* const> redlock_capable_kinds() noexcept {
  static const lock_kind* const kinds[] = {&reentrant_kind(), &simple_kind()};
  return kinds;
}

}  // namespace dlock::detail
