#include "dlock/redis/script.hpp"

#include <openssl/sha.h>

#include "dlock/error.hpp"

namespace dlock {

script::script(std::string source) {
  if (source.empty()) throw error(errc::invalid_argument, "script source is empty");
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(source.data()), source.size(), digest);
  static const char hex[] = "0123456789abcdef";
  std::string sha;
  sha.reserve(2 * SHA_DIGEST_LENGTH);
  for (unsigned char byte : digest) {
    sha += hex[byte >> 4];
    sha += hex[byte & 15];
  }
  body_ = std::make_shared<const body>(body{std::move(source), std::move(sha)});
}

}  // namespace dlock
