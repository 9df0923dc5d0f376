// libFuzzer target for dlock::wire::resp_parser, the reader every connection feeds straight from
// its socket. Surviving hostile bytes is not enough: the reader promises that the way bytes are
// split never changes what comes out, that an error is final, that what it returns is what the
// bytes said, and that its limits hold. Each input is checked against those promises, and a
// broken promise aborts so that libFuzzer reports and minimizes it like a crash.
//
// The whole input is the byte stream, so corpus files are plain RESP that a person can read and
// write. The split points and the small limits of the second parser come from a hash of the
// input instead of from its first bytes: every mutation then also tries new splits and limits.
//
// Built twice (tests/fuzz/CMakeLists.txt): as dlock_resp_fuzz with libFuzzer, and, with
// DLOCK_FUZZ_REPLAY defined, as a plain program that replays the seed corpus through the same
// checks in every build of the test suite.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/redis/reply.hpp"
#include "wire/resp.hpp"

namespace {

using dlock::reply;
using dlock::wire::parser_limits;
using dlock::wire::resp_parser;
using status = resp_parser::status;

#ifdef DLOCK_FUZZ_REPLAY
// libFuzzer names the failing input itself; the replay driver has to.
const char* replayed_file = nullptr;
#endif

[[noreturn]] void violated(const char* property, const char* context) {
  std::fprintf(stderr, "resp_reader_fuzz: property violated (%s): %s\n", context, property);
#ifdef DLOCK_FUZZ_REPLAY
  if (replayed_file != nullptr) std::fprintf(stderr, "resp_reader_fuzz: input %s\n", replayed_file);
#endif
  std::abort();
}

void require(bool ok, const char* property, const char* context) {
  if (!ok) violated(property, context);
}

// Deterministic per input, so that whatever libFuzzer reports replays exactly.
class split_rng {
 public:
  explicit split_rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {  // splitmix64
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
  }
  std::size_t below(std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(next() % n); }
  bool one_in(std::size_t n) { return below(n) == 0; }

 private:
  std::uint64_t state_;
};

std::uint64_t fnv1a(std::string_view bytes) {
  std::uint64_t h = 0xcbf29ce484222325u;
  for (const char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3u;
  }
  return h;
}

// The project's encoder covers only what clients send (arrays of bulk strings); servers also
// send the other kinds, so they are encoded here, canonically: no sign on zero, no leading
// zeros, nil as "$-1".
void encode_reply(std::string& out, const reply& r) {
  switch (r.type()) {
    case reply::kind::nil:
      out += "$-1\r\n";
      return;
    case reply::kind::simple_string:
      out += '+';
      out += r.str();
      out += "\r\n";
      return;
    case reply::kind::error:
      out += '-';
      out += r.str();
      out += "\r\n";
      return;
    case reply::kind::integer:
      out += ':';
      out += std::to_string(r.integer());
      out += "\r\n";
      return;
    case reply::kind::bulk_string:
      dlock::wire::encode_bulk(out, r.str());
      return;
    case reply::kind::array:
      dlock::wire::encode_array_header(out, r.elements().size());
      for (const reply& e : r.elements())
        encode_reply(out, e);
      return;
  }
  violated("a reply has a kind outside reply::kind", "encode");
}

// What the limits promise about any reply the parser returns. `frames` counts the non-empty
// arrays around `r`: only those take a nesting level (an empty array is complete at once).
void check_limits(const reply& r, const parser_limits& limits, std::size_t frames,
                  const char* context) {
  switch (r.type()) {
    case reply::kind::simple_string:
    case reply::kind::error:
      require(r.str().size() <= limits.max_line_length,
              "a simple string or error is no longer than max_line_length", context);
      require(r.str().find('\r') == std::string::npos,
              "a simple string or error holds no CR (its line ends at the first)", context);
      return;
    case reply::kind::integer:
      require(std::to_string(r.integer()).size() <= limits.max_line_length,
              "an integer came from a line no longer than max_line_length", context);
      return;
    case reply::kind::bulk_string:
      require(r.str().size() <= limits.max_bulk_length,
              "a bulk string is no longer than max_bulk_length", context);
      return;
    case reply::kind::array:
      require(r.elements().size() <= limits.max_array_length,
              "an array has at most max_array_length elements", context);
      if (r.elements().empty()) return;
      require(frames + 1 <= limits.max_depth, "non-empty arrays nest at most max_depth deep",
              context);
      for (const reply& e : r.elements())
        check_limits(e, limits, frames + 1, context);
      return;
    case reply::kind::nil:
      return;
  }
  violated("a reply has a kind outside reply::kind", context);
}

// Everything observable about one run of a parser over the input.
struct outcome {
  std::vector<reply> replies;
  std::vector<std::size_t> ends;  // stream offset one past each reply's last byte
  status last = status::need_more;
  std::string error;
  std::size_t buffered = 0;
};

void require_same(const outcome& a, const outcome& b, const char* context) {
  require(a.replies == b.replies, "the same replies however the input is split", context);
  require(a.ends == b.ends, "each reply ends at the same byte however the input is split", context);
  require(a.last == b.last, "the same final status however the input is split", context);
  require(a.error == b.error, "the same error message however the input is split", context);
  require(a.buffered == b.buffered, "the same bytes left buffered however the input is split",
          context);
}

// One parser fed the way a connection feeds it, checking every answer as it comes.
class driven_parser {
 public:
  // `reference` is the outcome of feeding the same limits the whole input at once, if known.
  driven_parser(const parser_limits& limits, const outcome* reference, const char* context)
      : limits_(limits), parser_(limits), reference_(reference), context_(context) {}

  void feed(std::string_view bytes) {
    parser_.feed(bytes);
    fed_ += bytes.size();
  }

  // The zero-copy path of connection::start_read: reserve a read's worth, receive fewer.
  void feed_prepared(std::string_view bytes, std::size_t reservation) {
    reservation = std::max(reservation, bytes.size());
    const std::span<char> room = parser_.prepare(reservation);
    require(room.size() >= reservation, "prepare(n) gives at least n bytes", context_);
    std::copy(bytes.begin(), bytes.end(), room.begin());
    parser_.commit(bytes.size());
    fed_ += bytes.size();
  }

  // The loop of connection::on_bytes_read: take replies until the parser needs more or fails.
  void drain() {
    if (out_.last == status::error) {
      out_.buffered = parser_.buffered();
      reply r;
      require(parser_.next(r) == status::error, "a failed parser keeps returning error", context_);
      require(parser_.failed(), "a failed parser stays failed", context_);
      require(parser_.error_message() == out_.error, "a failed parser keeps its first message",
              context_);
      return;
    }
    for (;;) {
      const status s = parser_.next(scratch_);
      require(parser_.buffered() <= fed_, "buffered() never exceeds the bytes fed", context_);
      if (s == status::reply) {
        check_limits(scratch_, limits_, 0, context_);
        const std::size_t end = fed_ - parser_.buffered();
        require(out_.ends.empty() || out_.ends.back() < end, "every reply consumes bytes",
                context_);
        out_.replies.push_back(std::move(scratch_));
        out_.ends.push_back(end);
        continue;
      }
      out_.buffered = parser_.buffered();
      if (s == status::need_more) {
        require(!parser_.failed(), "need_more comes only from a parser that has not failed",
                context_);
        require(out_.ends.empty() || out_.buffered <= fed_ - out_.ends.back(),
                "bytes of returned replies are not kept", context_);
        break;
      }
      require(s == status::error, "next() returns reply, need_more or error", context_);
      require(parser_.failed(), "an error marks the parser failed", context_);
      require(!parser_.error_message().empty(), "an error says what was wrong", context_);
      out_.last = status::error;
      out_.error = parser_.error_message();
      break;
    }
    if (reference_ == nullptr) return;
    // No reply may wait for bytes beyond its own last one.
    const auto due =
        static_cast<std::size_t>(std::count_if(reference_->ends.begin(), reference_->ends.end(),
                                               [&](std::size_t end) { return end <= fed_; }));
    require(out_.replies.size() >= due, "a reply comes out as soon as its last byte is fed",
            context_);
  }

  // Drops all state, as a connection does after a reconnect.
  void reset() {
    parser_.reset();
    require(!parser_.failed() && parser_.error_message().empty() && parser_.buffered() == 0,
            "reset() leaves a fresh parser", context_);
    out_ = outcome{};
    fed_ = 0;
  }

  const outcome& result() const { return out_; }

 private:
  parser_limits limits_;
  resp_parser parser_;
  const outcome* reference_;
  const char* context_;
  outcome out_;
  std::size_t fed_ = 0;
  // Reused across next() calls like the connection's, so a moved-from reply is also an input.
  reply scratch_;
};

std::size_t chunk_size(split_rng& rng, std::size_t remaining) {
  switch (rng.below(5)) {
    case 0:
      return 0;  // empty reads happen and must change nothing
    case 1:
      return std::min<std::size_t>(remaining, 1);
    case 2:
      return std::min(remaining, 1 + rng.below(8));
    default:
      return std::min(remaining, 1 + rng.below(remaining + 1));
  }
}

std::size_t reservation(split_rng& rng) {
  switch (rng.below(3)) {
    case 0:
      return 0;
    case 1:
      return rng.below(64);
    default:
      return 16 * 1024;  // what connection::start_read asks for
  }
}

outcome run_whole(std::string_view input, const parser_limits& limits, const char* context) {
  driven_parser p(limits, nullptr, context);
  p.feed(input);
  p.drain();
  // Asking again without new bytes must not change the answer.
  const outcome first = p.result();
  p.drain();
  require_same(first, p.result(), context);
  return first;
}

outcome run_chunks(std::string_view input, const parser_limits& limits, const outcome& whole,
                   split_rng& rng, const char* context) {
  driven_parser p(limits, &whole, context);
  for (std::size_t off = 0; off < input.size();) {
    const std::size_t n = chunk_size(rng, input.size() - off);
    const std::string_view piece = input.substr(off, n);
    if (rng.one_in(2)) {
      p.feed(piece);
    } else {
      p.feed_prepared(piece, reservation(rng));
    }
    off += n;
    // Sometimes several reads arrive before anyone asks for replies.
    if (!rng.one_in(4)) p.drain();
  }
  p.drain();
  return p.result();
}

// Every byte in its own read, draining after each: the finest split there is. Then the same
// parser is reset and fed everything at once, which must behave like a new parser.
outcome run_bytewise(std::string_view input, const parser_limits& limits, const outcome& whole,
                     split_rng& rng, const char* context) {
  driven_parser p(limits, &whole, context);
  for (std::size_t off = 0; off < input.size(); ++off) {
    p.feed_prepared(input.substr(off, 1), reservation(rng));
    p.drain();
  }
  outcome bytewise = p.result();
  p.reset();
  p.feed(input);
  p.drain();
  require_same(whole, p.result(), "reset, then the whole input");
  return bytewise;
}

// Whatever the parser returned, encoded canonically, parses back to the same replies under the
// same limits (a canonical encoding is never longer than the bytes it was read from).
void check_round_trip(const outcome& o, const parser_limits& limits, const char* context) {
  std::string bytes;
  for (const reply& r : o.replies)
    encode_reply(bytes, r);
  require(bytes.size() <= (o.ends.empty() ? 0 : o.ends.back()),
          "replies encode canonically into no more bytes than they were read from", context);
  resp_parser p(limits);
  p.feed(bytes);
  for (const reply& expected : o.replies) {
    reply r;
    require(p.next(r) == status::reply, "a re-encoded reply parses", context);
    require(r == expected, "a re-encoded reply parses back to an equal reply", context);
  }
  reply r;
  require(p.next(r) == status::need_more && p.buffered() == 0,
          "re-encoded replies parse without leftovers", context);

  // Commands are arrays of bulk strings; the command encoder must agree with the general one.
  for (const reply& command : o.replies) {
    if (!command.is_array()) continue;
    std::vector<std::string_view> args;
    for (const reply& e : command.elements()) {
      if (e.type() != reply::kind::bulk_string) break;
      args.push_back(e.str());
    }
    if (args.size() != command.elements().size()) continue;
    std::string via_command;
    std::string via_reply;
    dlock::wire::encode_command(via_command, args);
    encode_reply(via_reply, command);
    require(via_command == via_reply, "encode_command encodes an array of bulk strings", context);
  }
}

outcome check_with_limits(std::string_view input, const parser_limits& limits, split_rng& rng,
                          const char* context) {
  outcome whole = run_whole(input, limits, context);
  require_same(whole, run_chunks(input, limits, whole, rng, context), context);
  require_same(whole, run_bytewise(input, limits, whole, rng, context), context);
  check_round_trip(whole, limits, context);
  return whole;
}

parser_limits small_limits(split_rng& rng) {
  parser_limits limits;
  limits.max_bulk_length = rng.below(41);
  limits.max_array_length = rng.below(7);
  limits.max_line_length = rng.below(31);
  limits.max_depth = rng.below(5);
  return limits;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  split_rng rng(fnv1a(input));

  const outcome loose = check_with_limits(input, parser_limits{}, rng, "default limits");
  const parser_limits small = small_limits(rng);
  const outcome tight = check_with_limits(input, small, rng, "small limits");

  // Tighter limits can only stop the parser sooner: until then it reads exactly the same.
  const char* context = "small against default limits";
  require(tight.replies.size() <= loose.replies.size(), "tighter limits never yield more replies",
          context);
  require(std::equal(tight.replies.begin(), tight.replies.end(), loose.replies.begin()) &&
              std::equal(tight.ends.begin(), tight.ends.end(), loose.ends.begin()),
          "tighter limits yield a prefix of the same replies", context);
  if (tight.last == status::need_more) require_same(tight, loose, context);
  return 0;
}

#ifdef DLOCK_FUZZ_REPLAY
#include <filesystem>
#include <fstream>
#include <iterator>

// Runs files, and every file in directories, through the checks above; nonzero if there were
// none, so that a missing corpus cannot pass for a clean one.
int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    const fs::path arg(argv[i]);
    if (fs::is_directory(arg)) {
      for (const auto& entry : fs::directory_iterator(arg))
        if (entry.is_regular_file()) files.push_back(entry.path());
    } else if (fs::is_regular_file(arg)) {
      files.push_back(arg);
    } else {
      std::fprintf(stderr, "%s: no such file or directory: %s\n", argv[0], argv[i]);
      return 2;
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: %s FILE-OR-DIRECTORY... (found no inputs)\n", argv[0]);
    return 2;
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "%s: cannot read %s\n", argv[0], file.c_str());
      return 2;
    }
    const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    const std::string name = file.string();
    replayed_file = name.c_str();
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  }
  replayed_file = nullptr;
  std::printf("replayed %zu inputs\n", files.size());
  return 0;
}
#endif
