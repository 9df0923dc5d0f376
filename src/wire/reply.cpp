#include "dlock/redis/reply.hpp"

#include "dlock/error.hpp"

namespace dlock {
namespace {

const char* kind_name(reply::kind k) {
  switch (k) {
    case reply::kind::nil:
      return "nil";
    case reply::kind::simple_string:
      return "simple string";
    case reply::kind::bulk_string:
      return "bulk string";
    case reply::kind::error:
      return "error";
    case reply::kind::integer:
      return "integer";
    case reply::kind::array:
      return "array";
  }
  return "?";
}

[[noreturn]] void wrong_kind(const reply& r, const char* wanted) {
  throw error(errc::unexpected_reply, std::string("expected ") + wanted + " reply, got " +
                                          kind_name(r.type()) + ": " + r.to_string());
}

}  // namespace

const std::string& reply::str() const {
  if (!is_string() && !is_error()) wrong_kind(*this, "a string");
  return text_;
}

std::int64_t reply::integer() const {
  if (!is_integer()) wrong_kind(*this, "an integer");
  return integer_;
}

const std::vector<reply>& reply::elements() const {
  if (!is_array()) wrong_kind(*this, "an array");
  return elements_;
}

std::vector<reply>& reply::elements() {
  if (!is_array()) wrong_kind(*this, "an array");
  return elements_;
}

const reply& reply::at(std::size_t i) const {
  const auto& e = elements();
  if (i >= e.size()) {
    throw dlock::error(errc::unexpected_reply, "array reply has " + std::to_string(e.size()) +
                                                   " elements, wanted element " +
                                                   std::to_string(i));
  }
  return e[i];
}

std::string reply::to_string() const {
  constexpr std::size_t max_text = 200;
  auto clip = [](const std::string& s) {
    return s.size() <= max_text ? s : s.substr(0, max_text) + "...";
  };
  switch (kind_) {
    case kind::nil:
      return "(nil)";
    case kind::simple_string:
      return clip(text_);
    case kind::bulk_string:
      return '"' + clip(text_) + '"';
    case kind::error:
      return "(error) " + clip(text_);
    case kind::integer:
      return "(integer) " + std::to_string(integer_);
    case kind::array: {
      std::string out = "[";
      for (std::size_t i = 0; i < elements_.size(); ++i) {
        if (i) out += ", ";
        if (i == 16) {
          out += "... " + std::to_string(elements_.size() - i) + " more";
          break;
        }
        out += elements_[i].to_string();
      }
      return out + "]";
    }
  }
  return "?";
}

}  // namespace dlock
