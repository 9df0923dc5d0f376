#include "dlock/fencing.hpp"

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/redis/client.hpp"
#include "dlock_lua_scripts.hpp"
#include "locks/lock_core.hpp"

namespace dlock {

namespace {

// Redis Cluster's hash-tag rule: the key holds '{', a later '}', and something between them.
bool has_hash_tag(std::string_view key) {
  const auto open = key.find('{');
  if (open == std::string_view::npos) return false;
  const auto close = key.find('}', open + 1);
  return close != std::string_view::npos && close > open + 1;
}

}  // namespace

// Not Redisson's rule (dlock/keys.hpp): the record is dlock's own, and what matters is that it
// shares the resource key's cluster slot, which only Redis's own hash-tag rule guarantees.
std::string fence_record_key(std::string_view key) {
  std::string record = "dlock_fence:";
  if (has_hash_tag(key)) return record.append(key);
  return record.append("{").append(key).append("}");
}

namespace {

const script& fenced_set_script() {
  static const script fenced{std::string(lua::fenced_set)};
  return fenced;
}

fenced_write_result result_of(const reply& r) {
  return {r.at(0).integer() == 1, static_cast<std::uint64_t>(r.at(1).integer())};
}

}  // namespace

fenced_write_result fenced_set(redis_client& redis, std::string_view key, std::string_view value,
                               std::uint64_t fence) {
  const std::string record = fence_record_key(key);
  const std::string token = std::to_string(fence);
  return result_of(redis.eval(fenced_set_script(), {key, record}, {token, value}));
}

// Through the client's topology, so that on a cluster it reaches the key's slot.
fenced_write_result fenced_set(const client& c, std::string_view key, std::string_view value,
                               std::uint64_t fence) {
  const std::string record = fence_record_key(key);
  const std::string token = std::to_string(fence);
  const std::string_view keys[] = {key, record};
  const std::string_view args[] = {token, value};
  return result_of(c.core_->call(fenced_set_script(), key, keys, args));
}

}  // namespace dlock
