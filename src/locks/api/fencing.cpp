#include "dlock/fencing.hpp"

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/redis/client.hpp"
#include "dlock_lua_scripts.hpp"
#include "locks/async/awaitable_factory.hpp"
#include "locks/async/one_call.hpp"
#include "locks/runtime/lock_core.hpp"

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

struct detail::client_access {
  static const std::shared_ptr<lock_core>& core(const client& c) { return c.core_; }
};

namespace {

// Through the client's topology, so that on a cluster it reaches the key's slot.
void write_fenced(detail::lock_core& core, std::string_view key, std::string_view value,
                  std::uint64_t fence, detail::result_callback<fenced_write_result> done) {
  const std::string record = fence_record_key(key);
  const std::string token = std::to_string(fence);
  const std::string_view keys[] = {key, record};
  const std::string_view args[] = {token, value};
  core.call_async(fenced_set_script(), key, keys, args,
                  detail::to_result<fenced_write_result>(result_of, std::move(done)));
}

}  // namespace

fenced_write_result fenced_set(const client& c, std::string_view key, std::string_view value,
                               std::uint64_t fence) {
  auto& core = *detail::client_access::core(c);
  return detail::wait_for_result<fenced_write_result>(
      core.io(), [&](detail::result_callback<fenced_write_result> done) {
        write_fenced(core, key, value, fence, std::move(done));
      });
}

void fenced_set_async(const client& c, std::string_view key, std::string_view value,
                      std::uint64_t fence,
                      std::function<void(call_result<fenced_write_result>)> done) noexcept {
  auto& core = *detail::client_access::core(c);
  detail::start_or_report<fenced_write_result>(
      core.io(), std::move(done), [&](detail::result_callback<fenced_write_result> d) {
        write_fenced(core, key, value, fence, std::move(d));
      });
}

call_awaitable<fenced_write_result> fenced_set_async(const client& c, std::string_view key,
                                                     std::string_view value, std::uint64_t fence) {
  return detail::awaitable_factory::call<fenced_write_result>(
      [core = detail::client_access::core(c), key = std::string(key), value = std::string(value),
       fence](detail::result_callback<fenced_write_result> done) {
        write_fenced(*core, key, value, fence, std::move(done));
      });
}

}  // namespace dlock
