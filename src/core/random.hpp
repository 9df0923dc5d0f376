// Unguessable identifiers from the operating system's CSPRNG (OpenSSL RAND_bytes).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace dlock::detail {

/// `bytes` random bytes as lower-case hex. Throws `dlock::error(errc::invalid_argument)` only if
/// the CSPRNG fails, which OpenSSL reports when it cannot seed.
std::string random_hex(std::size_t bytes);

/// `bytes` random bytes, raw.
std::string random_raw(std::size_t bytes);

/// `raw` as lower-case hex.
std::string to_hex(std::string_view raw);
/// Hex (either case) back to bytes; nothing if `hex` has an odd length or a non-hex digit.
std::optional<std::string> from_hex(std::string_view hex);

/// A random (version 4) UUID in the canonical 8-4-4-4-12 form.
std::string random_uuid();

}  // namespace dlock::detail
