// dlock/redis/script.hpp — a Lua script sent by its SHA1 (EVALSHA), loaded on demand.
#pragma once

#include "dlock/export.hpp"

#include <memory>
#include <string>

namespace dlock {

/// A server-side Lua script. Cheap to copy (the text is shared). The first call of a script on a
/// connection (and the first after each reconnect) sends it in full with `EVAL`, later calls
/// `EVALSHA`, so calls run in the order they were made. If the server forgets it meanwhile
/// (`SCRIPT FLUSH`), the NOSCRIPT call is retried once as `EVAL`. Callers never see NOSCRIPT.
class DLOCK_API script {
 public:
  /// Hashes `source` (SHA1, as Redis does). Throws `dlock::error(errc::invalid_argument)` if the
  /// source is empty.
  explicit script(std::string source);

  const std::string& source() const noexcept { return body_->source; }
  /// Lower-case hex SHA1 of the source, as `SCRIPT LOAD` returns it.
  const std::string& sha1() const noexcept { return body_->sha1; }

 private:
  struct body {
    std::string source;
    std::string sha1;
  };
  std::shared_ptr<const body> body_;
};

}  // namespace dlock
