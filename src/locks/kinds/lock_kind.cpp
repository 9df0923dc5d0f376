#include "locks/kinds/lock_kind.hpp"

#include "dlock/keys.hpp"

namespace dlock::detail {

lock_names::lock_names(std::string lock_name, const std::string& shared_fence_counter) {
  auto keys = keys_of_lock(lock_name);
  name = std::move(lock_name);
  fence_key = shared_fence_counter.empty() ? std::move(keys.fence_counter) : shared_fence_counter;
  channel = std::move(keys.unlock_channel);
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

std::span<const lock_kind* const> all_lock_kinds() noexcept {
  static const lock_kind* const kinds[] = {&reentrant_kind(), &simple_kind()};
  return kinds;
}

}  // namespace dlock::detail
