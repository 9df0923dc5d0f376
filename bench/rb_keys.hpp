// The keys the redis-benchmark ceilings run on (lock_scenarios.cpp for one server,
// script_ceiling.cpp for a cluster and RedLock's masters), and the scripts that set them up:
// shared so that every ceiling measures the same key shapes.
#pragma once

#include <cstdint>
#include <string_view>

namespace dlock::bench::rb {

constexpr std::string_view token = "0123456789abcdef0123456789abcdef";  // 32 hex, as dlock's
constexpr std::string_view acquire_prefix = "dlock-bench:rb:a:";
constexpr std::string_view release_prefix = "dlock-bench:rb:r:";
constexpr std::int64_t populate_chunk = 100'000;  // keys per script call: short server stalls

// Sets keys PREFIX000000000000 .. PREFIX(n-1) (12 digits, as redis-benchmark's __rand_int__)
// to a value with a lease; returns how many it set. ARGV: from, to, prefix, value, lease ms.
constexpr std::string_view populate_range =
    "local from, to = tonumber(ARGV[1]), tonumber(ARGV[2]) "
    "for i = from, to - 1 do "
    "  redis.call('set', ARGV[3] .. string.format('%012d', i), ARGV[4], 'PX', ARGV[5]) "
    "end "
    "return to - from";
// Deletes that range; returns how many keys were still there. ARGV: from, to, prefix.
constexpr std::string_view delete_range =
    "local from, to, n = tonumber(ARGV[1]), tonumber(ARGV[2]), 0 "
    "for i = from, to - 1 do "
    "  n = n + redis.call('del', ARGV[3] .. string.format('%012d', i)) "
    "end "
    "return n";

}  // namespace dlock::bench::rb
