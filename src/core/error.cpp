#include "dlock/error.hpp"

namespace dlock {
namespace {

class dlock_category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "dlock"; }
  std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
      case errc::invalid_argument:
        return "invalid argument";
      case errc::invalid_url:
        return "invalid URL";
      case errc::connect_failed:
        return "cannot connect to the server";
      case errc::auth_failed:
        return "authentication failed";
      case errc::tls_failed:
        return "TLS failure";
      case errc::timeout:
        return "timed out";
      case errc::connection_lost:
        return "connection lost";
      case errc::client_closed:
        return "client closed";
      case errc::protocol_error:
        return "protocol error";
      case errc::server_error:
        return "server error";
      case errc::wrong_type:
        return "key holds the wrong type";
      case errc::unexpected_reply:
        return "unexpected reply";
      case errc::lease_lost:
        return "lease lost";
      case errc::server_busy:
        return "the server is busy or loading";
      case errc::permission_denied:
        return "permission denied";
      case errc::read_only:
        return "the server is a read-only replica";
      case errc::not_replicated:
        return "too few replicas acknowledged the grant";
      case errc::upgrade_conflict:
        return "another holder is already upgrading to the write lock";
      case errc::cancelled:
        return "cancelled";
    }
    return "unknown dlock error";
  }
};

}  // namespace

const std::error_category& error_category() noexcept {
  static const dlock_category category;
  return category;
}

std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), error_category()};
}

}  // namespace dlock
