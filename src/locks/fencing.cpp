#include "dlock/fencing.hpp"

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/redis_client.hpp"
#include "dlock_lua_scripts.hpp"
#include "locks/lock_core.hpp"

namespace dlock {

std::string fence_record_key(std::string_view key) {
  const std::string k(key);
  return "dlock_fence:" + (detail::has_hash_tag(k) ? k : "{" + k + "}");
}

fenced_write_result fenced_set(redis_client& redis, std::string_view key, std::string_view value,
                               std::uint64_t fence) {
  static const script fenced{std::string(lua::fenced_set)};
  const std::string record = fence_record_key(key);
  const std::string token = std::to_string(fence);
  const auto r = redis.eval(fenced, {key, record}, {token, value});
  return {r.at(0).integer() == 1, static_cast<std::uint64_t>(r.at(1).integer())};
}

fenced_write_result fenced_set(const client& c, std::string_view key, std::string_view value,
                               std::uint64_t fence) {
  return fenced_set(c.redis(), key, value, fence);
}

}  // namespace dlock
