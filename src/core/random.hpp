// Unguessable identifiers from the operating system's CSPRNG (OpenSSL RAND_bytes).
#pragma once

#include <string>

namespace dlock::detail {

/// `bytes` random bytes as lower-case hex. Throws `dlock::error(errc::invalid_argument)` only if
/// the CSPRNG fails, which OpenSSL reports when it cannot seed.
std::string random_hex(std::size_t bytes);

/// A random (version 4) UUID in the canonical 8-4-4-4-12 form.
std::string random_uuid();

}  // namespace dlock::detail
