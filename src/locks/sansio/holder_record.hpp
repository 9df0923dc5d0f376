// Who holds a lock, as each grant records it beside the lock (`dlock_holder:{NAME}`, written by
// the scripts in _holder.lua): the JSON object a client sends with its grants, and reading back
// what a grant stored. Pure functions, tested without a server (holder_record_test.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "dlock/lock.hpp"

namespace dlock::detail {

/// What a client says of itself in every grant it records.
struct holder_facts {
  std::string host;
  std::int64_t pid = 0;
  std::string user;
  std::string label;
  std::string client_id;
};

/// This process's facts (core/process_facts.hpp), with `label` (empty: the program's name) and
/// the client's id. Never throws except std::bad_alloc.
holder_facts holder_of_this_process(std::string label, std::string client_id);

/// Labels are cut to this many bytes (at a character's boundary): a grant carries the record.
inline constexpr std::size_t max_label_bytes = 512;

/// The JSON object a grant records, `{"host":...,"pid":...,"user":...,"label":...,
/// "client":...}`; the script puts the server's time first. Bytes that are not UTF-8 become
/// U+FFFD, control characters are escaped, the label is cut to max_label_bytes.
std::string encode_holder(const holder_facts& facts);

/// What a grant recorded, from the stored object (`{"since_ms":N,"host":...}`): nothing if the
/// text is not such an object (a key someone else wrote). Unknown members are skipped, so that
/// older clients read newer records.
std::optional<holder_identity> decode_holder(std::string_view stored);

}  // namespace dlock::detail
