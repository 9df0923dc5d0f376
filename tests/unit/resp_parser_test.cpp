// Unit tests for the sans-io RESP2 reader/encoder (src/wire/resp.hpp) and dlock::reply.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "dlock/error.hpp"
#include "dlock/redis/reply.hpp"
#include "wire/resp.hpp"

namespace dlock {
// Lets GoogleTest print replies in failure messages (found by ADL; internal linkage so it cannot
// clash with another test file).
[[maybe_unused]] static void PrintTo(const reply& r, std::ostream* os) {
  *os << r.to_string();
}
}  // namespace dlock

namespace {

using dlock::reply;
using dlock::wire::parser_limits;
using dlock::wire::resp_parser;
using status = resp_parser::status;
using namespace std::string_literals;

// ---------------------------------------------------------------------------------------------
// Helpers

reply S(std::string s) {
  return reply::simple_string(std::move(s));
}
reply B(std::string s) {
  return reply::bulk_string(std::move(s));
}
reply E(std::string s) {
  return reply::error(std::move(s));
}
reply I(std::int64_t v) {
  return reply::integer(v);
}
reply A(std::vector<reply> v) {
  return reply::array(std::move(v));
}
reply Nil() {
  return reply();
}

// Joins strings by appending. Tests build their inputs with this rather than with
// `"literal" + std::string(...)`: g++ 12 at -O3 reports a false -Wrestrict inside
// char_traits.h for operator+(const char*, std::string&&) (GCC bug 105329).
template <class... Parts>
std::string cat(const Parts&... parts) {
  std::string out;
  (out.append(parts), ...);
  return out;
}

std::string bulk_bytes(std::string_view payload) {
  return cat("$", std::to_string(payload.size()), "\r\n", payload, "\r\n");
}

// Takes every complete reply out of `p`, appending to `out`. Fails the test on a parse error.
void drain(resp_parser& p, std::vector<reply>& out) {
  for (;;) {
    reply r;
    const status s = p.next(r);
    if (s == status::need_more) return;
    ASSERT_EQ(s, status::reply) << "unexpected parse error: " << p.error_message();
    out.push_back(std::move(r));
  }
}

std::vector<reply> parse_all(std::string_view bytes, parser_limits limits = {}) {
  resp_parser p(limits);
  p.feed(bytes);
  std::vector<reply> out;
  drain(p, out);
  EXPECT_EQ(p.buffered(), 0u);
  return out;
}

// Parses exactly one reply from `bytes` and checks nothing is left over.
reply parse_one(std::string_view bytes, parser_limits limits = {}) {
  resp_parser p(limits);
  p.feed(bytes);
  reply r;
  const status s = p.next(r);
  EXPECT_EQ(s, status::reply) << p.error_message();
  reply extra;
  EXPECT_EQ(p.next(extra), status::need_more);
  EXPECT_EQ(p.buffered(), 0u);
  EXPECT_FALSE(p.failed());
  return r;
}

// Feeds `bytes` (after `prefix`, which must parse cleanly) and expects a protocol error; then
// checks the parser stays failed whatever it is fed next.
void expect_protocol_error(std::string_view bytes, parser_limits limits = {},
                           std::string_view prefix = {}) {
  SCOPED_TRACE("input: " + std::string(bytes));
  resp_parser p(limits);
  std::vector<reply> before;
  if (!prefix.empty()) {
    p.feed(prefix);
    drain(p, before);
    ASSERT_FALSE(p.failed());
  }
  p.feed(bytes);
  reply r;
  status s = status::reply;
  while (s == status::reply)
    s = p.next(r);
  ASSERT_EQ(s, status::error) << "expected a protocol error";
  EXPECT_TRUE(p.failed());
  const std::string message = p.error_message();
  EXPECT_FALSE(message.empty());

  // Sticky: further calls and further (valid) input change nothing.
  EXPECT_EQ(p.next(r), status::error);
  EXPECT_EQ(p.next(r), status::error);
  p.feed("+OK\r\n:1\r\n");
  EXPECT_EQ(p.next(r), status::error);
  EXPECT_TRUE(p.failed());
  EXPECT_EQ(p.error_message(), message);
}

// A stream of mixed replies with the exact values they decode to.
struct sample {
  std::string bytes;
  reply value;
};

std::vector<sample> mixed_samples() {
  const std::string binary("a\r\n\0b\r\xff\n\r\n\0"s);
  return {
      {"+OK\r\n", S("OK")},
      {"-ERR wrong number of arguments for 'get' command\r\n",
       E("ERR wrong number of arguments for 'get' command")},
      {":0\r\n", I(0)},
      {":-42\r\n", I(-42)},
      {":9223372036854775807\r\n", I(std::numeric_limits<std::int64_t>::max())},
      {"$0\r\n\r\n", B("")},
      {"$-1\r\n", Nil()},
      {"*-1\r\n", Nil()},
      {"*0\r\n", A({})},
      {bulk_bytes(binary), B(binary)},
      {"*3\r\n:1\r\n*2\r\n+x\r\n$-1\r\n*0\r\n", A({I(1), A({S("x"), Nil()}), A({})})},
      {"+\r\n", S("")},
      {"*2\r\n*1\r\n*1\r\n:7\r\n-E\r\n", A({A({A({I(7)})}), E("E")})},
      {"$5\r\nhello\r\n", B("hello")},
      {":-9223372036854775808\r\n", I(std::numeric_limits<std::int64_t>::min())},
      {"*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$-1\r\n:5\r\n", A({B("SET"), B("k"), Nil(), I(5)})},
      {"-\r\n", E("")},
      {"$2\r\n\r\n\r\n", B("\r\n")},
  };
}

std::string concat_bytes(const std::vector<sample>& samples) {
  std::string out;
  for (const auto& s : samples)
    out += s.bytes;
  return out;
}

std::vector<reply> values(const std::vector<sample>& samples) {
  std::vector<reply> out;
  for (const auto& s : samples)
    out.push_back(s.value);
  return out;
}

std::size_t depth_of(const reply& r) {
  std::size_t depth = 0;
  const reply* cur = &r;
  while (cur->is_array() && !cur->elements().empty()) {
    ++depth;
    cur = &cur->elements().front();
  }
  return depth;
}

std::string nested_arrays(std::size_t depth, std::string_view leaf) {
  std::string out;
  for (std::size_t i = 0; i < depth; ++i)
    out += "*1\r\n";
  out += leaf;
  return out;
}

// Total virtual memory of this process, or nothing where /proc is unavailable.
std::optional<std::size_t> virtual_memory_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0;
  if (!(statm >> pages)) return std::nullopt;
  return pages * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

// Walls off timing checks: they only guard against accidentally quadratic behaviour, so the bound
// is orders of magnitude above what a linear implementation needs, even unoptimized.
constexpr auto kGenerousTimeBound = std::chrono::seconds(10);

// ---------------------------------------------------------------------------------------------
// Each reply kind

TEST(RespParser, SimpleString) {
  EXPECT_EQ(parse_one("+OK\r\n"), S("OK"));
  EXPECT_EQ(parse_one("+hello world\r\n"), S("hello world"));
  EXPECT_EQ(parse_one("+\r\n"), S(""));
  EXPECT_EQ(parse_one("+QUEUED\r\n").type(), reply::kind::simple_string);
}

TEST(RespParser, Error) {
  const reply r = parse_one("-WRONGTYPE Operation against a key holding the wrong kind\r\n");
  EXPECT_TRUE(r.is_error());
  EXPECT_EQ(r, E("WRONGTYPE Operation against a key holding the wrong kind"));
  EXPECT_EQ(parse_one("-\r\n"), E(""));
}

TEST(RespParser, Integer) {
  EXPECT_EQ(parse_one(":0\r\n"), I(0));
  EXPECT_EQ(parse_one(":1\r\n"), I(1));
  EXPECT_EQ(parse_one(":1000\r\n"), I(1000));
  EXPECT_EQ(parse_one(":-1\r\n"), I(-1));
  EXPECT_EQ(parse_one(":-2\r\n"), I(-2));
}

TEST(RespParser, IntegerLimits) {
  EXPECT_EQ(parse_one(":9223372036854775807\r\n"), I(std::numeric_limits<std::int64_t>::max()));
  EXPECT_EQ(parse_one(":-9223372036854775808\r\n"), I(std::numeric_limits<std::int64_t>::min()));
}

TEST(RespParser, IntegerOverflowIsProtocolError) {
  expect_protocol_error(":9223372036854775808\r\n");
  expect_protocol_error(":-9223372036854775809\r\n");
  expect_protocol_error(":99999999999999999999999999\r\n");
}

TEST(RespParser, BulkString) {
  EXPECT_EQ(parse_one("$5\r\nhello\r\n"), B("hello"));
  EXPECT_EQ(parse_one("$5\r\nhello\r\n").type(), reply::kind::bulk_string);
  EXPECT_NE(parse_one("$2\r\nOK\r\n"), S("OK"));  // bulk and simple strings differ
}

TEST(RespParser, EmptyBulkString) {
  const reply r = parse_one("$0\r\n\r\n");
  EXPECT_EQ(r, B(""));
  EXPECT_FALSE(r.is_nil());
}

TEST(RespParser, BinaryBulkStringWithEmbeddedCrlfAndNul) {
  std::string payload("\r\n\0\r\0\n$-1\r\n*3\r\n\xff\x80"s);
  for (int c = 0; c < 256; ++c)
    payload += static_cast<char>(c);
  EXPECT_EQ(parse_one(bulk_bytes(payload)), B(payload));
  EXPECT_EQ(parse_one("$4\r\n\r\n\r\n\r\n"), B("\r\n\r\n"));
  EXPECT_EQ(parse_one("$1\r\n\0\r\n"s), B("\0"s));
}

TEST(RespParser, NilBulk) {
  const reply r = parse_one("$-1\r\n");
  EXPECT_TRUE(r.is_nil());
  EXPECT_EQ(r, Nil());
}

TEST(RespParser, NilArray) {
  const reply r = parse_one("*-1\r\n");
  EXPECT_TRUE(r.is_nil());
  EXPECT_EQ(r, Nil());
}

TEST(RespParser, EmptyArray) {
  const reply r = parse_one("*0\r\n");
  ASSERT_TRUE(r.is_array());
  EXPECT_TRUE(r.elements().empty());
  EXPECT_FALSE(r.is_nil());
}

TEST(RespParser, FlatArray) {
  EXPECT_EQ(parse_one("*3\r\n$3\r\nfoo\r\n:-7\r\n+bar\r\n"), A({B("foo"), I(-7), S("bar")}));
}

TEST(RespParser, ArrayOfNils) {
  EXPECT_EQ(parse_one("*3\r\n$-1\r\n*-1\r\n$-1\r\n"), A({Nil(), Nil(), Nil()}));
}

TEST(RespParser, NestedArrays) {
  const reply r = parse_one("*3\r\n*2\r\n:1\r\n:2\r\n*0\r\n*1\r\n*2\r\n-ERR x\r\n$1\r\ny\r\n");
  EXPECT_EQ(r, A({A({I(1), I(2)}), A({}), A({A({E("ERR x"), B("y")})})}));
}

TEST(RespParser, NestedArrayEndingSeveralLevelsAtOnce) {
  EXPECT_EQ(parse_one("*2\r\n*2\r\n*1\r\n:1\r\n:2\r\n:3\r\n"), A({A({A({I(1)}), I(2)}), I(3)}));
}

TEST(RespParser, ExecStyleReplyWithErrorsInside) {
  EXPECT_EQ(parse_one("*3\r\n+OK\r\n-ERR boom\r\n:1\r\n"), A({S("OK"), E("ERR boom"), I(1)}));
}

TEST(RespParser, SeveralRepliesInOneFeed) {
  const auto got = parse_all("+OK\r\n:1\r\n$3\r\nabc\r\n*-1\r\n-ERR\r\n*1\r\n:2\r\n");
  EXPECT_EQ(got, (std::vector<reply>{S("OK"), I(1), B("abc"), Nil(), E("ERR"), A({I(2)})}));
}

TEST(RespParser, MixedSampleStreamInOneFeed) {
  const auto samples = mixed_samples();
  EXPECT_EQ(parse_all(concat_bytes(samples)), values(samples));
}

TEST(RespParser, EachMixedSampleAlone) {
  for (const auto& s : mixed_samples()) {
    SCOPED_TRACE(s.value.to_string());
    EXPECT_EQ(parse_one(s.bytes), s.value);
  }
}

TEST(RespParser, NextOnEmptyParserNeedsMore) {
  resp_parser p;
  reply r = S("untouched");
  EXPECT_EQ(p.next(r), status::need_more);
  EXPECT_EQ(p.next(r), status::need_more);
  EXPECT_FALSE(p.failed());
  EXPECT_TRUE(p.error_message().empty());
  EXPECT_EQ(p.buffered(), 0u);
}

TEST(RespParser, FeedingNothingChangesNothing) {
  resp_parser p;
  p.feed("");
  reply r;
  EXPECT_EQ(p.next(r), status::need_more);
  EXPECT_EQ(p.buffered(), 0u);
  p.feed("+O");
  p.feed("");
  EXPECT_EQ(p.next(r), status::need_more);
  p.feed("K\r\n");
  EXPECT_EQ(p.next(r), status::reply);
  EXPECT_EQ(r, S("OK"));
}

TEST(RespParser, FeedingADefaultConstructedStringViewIsANoOp) {
  // A default-constructed string_view has data() == nullptr and size() == 0.
  resp_parser p;
  p.feed(std::string_view{});
  reply r;
  EXPECT_EQ(p.next(r), status::need_more);
  EXPECT_EQ(p.buffered(), 0u);
  p.feed("+OK\r\n");
  p.feed(std::string_view{});
  ASSERT_EQ(p.next(r), status::reply);
  EXPECT_EQ(r, S("OK"));
}

// ---------------------------------------------------------------------------------------------
// Splitting

TEST(RespParserSplit, EverySplitPoint) {
  const auto samples = mixed_samples();
  const std::string bytes = concat_bytes(samples);
  const auto expected = values(samples);
  ASSERT_GE(expected.size(), 15u);
  for (std::size_t k = 0; k <= bytes.size(); ++k) {
    SCOPED_TRACE("split at " + std::to_string(k));
    resp_parser p;
    std::vector<reply> got;
    p.feed(std::string_view(bytes).substr(0, k));
    ASSERT_NO_FATAL_FAILURE(drain(p, got));
    ASSERT_LE(got.size(), expected.size());
    p.feed(std::string_view(bytes).substr(k));
    ASSERT_NO_FATAL_FAILURE(drain(p, got));
    ASSERT_EQ(got, expected);
    EXPECT_EQ(p.buffered(), 0u);
  }
}

TEST(RespParserSplit, EveryPairOfSplitPoints) {
  // Three pieces: [0,i) [i,j) [j,n) for all i <= j, on a shorter stream.
  const std::string bytes = "*3\r\n$3\r\na\r\n\r\n:-12\r\n*1\r\n$-1\r\n+OK\r\n$0\r\n\r\n";
  const std::vector<reply> expected = {A({B("a\r\n"), I(-12), A({Nil()})}), S("OK"), B("")};
  for (std::size_t i = 0; i <= bytes.size(); ++i) {
    for (std::size_t j = i; j <= bytes.size(); ++j) {
      SCOPED_TRACE("split at " + std::to_string(i) + " and " + std::to_string(j));
      resp_parser p;
      std::vector<reply> got;
      p.feed(std::string_view(bytes).substr(0, i));
      ASSERT_NO_FATAL_FAILURE(drain(p, got));
      p.feed(std::string_view(bytes).substr(i, j - i));
      ASSERT_NO_FATAL_FAILURE(drain(p, got));
      p.feed(std::string_view(bytes).substr(j));
      ASSERT_NO_FATAL_FAILURE(drain(p, got));
      ASSERT_EQ(got, expected);
    }
  }
}

TEST(RespParserSplit, OneByteAtATime) {
  const auto samples = mixed_samples();
  const std::string bytes = concat_bytes(samples);
  resp_parser p;
  std::vector<reply> got;
  for (char c : bytes) {
    p.feed(std::string_view(&c, 1));
    ASSERT_NO_FATAL_FAILURE(drain(p, got));
  }
  EXPECT_EQ(got, values(samples));
  EXPECT_EQ(p.buffered(), 0u);
}

TEST(RespParserSplit, RepliesArriveExactlyWhenTheirLastByteDoes) {
  const auto samples = mixed_samples();
  std::string bytes;
  std::vector<std::size_t> ends;  // offset one past each reply's last byte
  for (const auto& s : samples) {
    bytes += s.bytes;
    ends.push_back(bytes.size());
  }
  resp_parser p;
  std::vector<reply> got;
  std::size_t complete = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    p.feed(std::string_view(bytes).substr(i, 1));
    ASSERT_NO_FATAL_FAILURE(drain(p, got));
    while (complete < ends.size() && ends[complete] <= i + 1)
      ++complete;
    ASSERT_EQ(got.size(), complete) << "after byte " << i;
  }
}

TEST(RespParserSplit, RandomChunksWithFixedSeed) {
  const auto samples = mixed_samples();
  std::string bytes;
  for (int rep = 0; rep < 20; ++rep)
    bytes += concat_bytes(samples);
  std::vector<reply> expected;
  for (int rep = 0; rep < 20; ++rep) {
    for (auto& v : values(samples))
      expected.push_back(std::move(v));
  }
  std::mt19937 rng(12345);
  for (int round = 0; round < 50; ++round) {
    std::uniform_int_distribution<std::size_t> chunk(1, 1 + static_cast<std::size_t>(round) * 3);
    resp_parser p;
    std::vector<reply> got;
    for (std::size_t off = 0; off < bytes.size();) {
      const std::size_t n = std::min(chunk(rng), bytes.size() - off);
      p.feed(std::string_view(bytes).substr(off, n));
      off += n;
      ASSERT_NO_FATAL_FAILURE(drain(p, got));
    }
    ASSERT_EQ(got, expected) << "round " << round;
  }
}

TEST(RespParserSplit, DrainingOnlyAtTheEnd) {
  // Feeding many pieces without calling next() in between must give the same result.
  const auto samples = mixed_samples();
  const std::string bytes = concat_bytes(samples);
  resp_parser p;
  for (std::size_t off = 0; off < bytes.size(); off += 3) {
    p.feed(std::string_view(bytes).substr(off, 3));
  }
  EXPECT_EQ(p.buffered(), bytes.size());
  std::vector<reply> got;
  drain(p, got);
  EXPECT_EQ(got, values(samples));
}

// ---------------------------------------------------------------------------------------------
// Zero-copy feeding

void zero_copy_feed(resp_parser& p, std::string_view bytes) {
  auto room = p.prepare(bytes.size());
  ASSERT_GE(room.size(), bytes.size());
  if (!bytes.empty()) std::memcpy(room.data(), bytes.data(), bytes.size());
  p.commit(bytes.size());
}

TEST(RespParserZeroCopy, PrepareReturnsAtLeastTheRequestedRoom) {
  resp_parser p;
  EXPECT_GE(p.prepare(1).size(), 1u);
  EXPECT_GE(p.prepare(16 * 1024).size(), 16u * 1024);
  EXPECT_GE(p.prepare(1).size(), 1u);
  EXPECT_EQ(p.buffered(), 0u);  // prepare alone receives nothing
}

TEST(RespParserZeroCopy, CommitMakesBytesVisible) {
  resp_parser p;
  const std::string msg = "*2\r\n+a\r\n:5\r\n";
  auto room = p.prepare(msg.size());
  std::memcpy(room.data(), msg.data(), msg.size());
  reply r;
  EXPECT_EQ(p.next(r), status::need_more);  // nothing committed yet
  EXPECT_EQ(p.buffered(), 0u);
  p.commit(msg.size());
  EXPECT_EQ(p.buffered(), msg.size());
  ASSERT_EQ(p.next(r), status::reply);
  EXPECT_EQ(r, A({S("a"), I(5)}));
}

TEST(RespParserZeroCopy, PartialCommitOfALargerReservation) {
  // As a socket read does: reserve a big block, receive fewer bytes.
  resp_parser p;
  const std::string msg = "+PONG\r\n";
  auto room = p.prepare(16 * 1024);
  std::memcpy(room.data(), msg.data(), 3);
  p.commit(3);
  reply r;
  EXPECT_EQ(p.next(r), status::need_more);
  EXPECT_EQ(p.buffered(), 3u);
  room = p.prepare(16 * 1024);
  std::memcpy(room.data(), msg.data() + 3, msg.size() - 3);
  p.commit(msg.size() - 3);
  ASSERT_EQ(p.next(r), status::reply);
  EXPECT_EQ(r, S("PONG"));
  EXPECT_EQ(p.buffered(), 0u);
}

TEST(RespParserZeroCopy, CommitZeroIsANoOp) {
  resp_parser p;
  p.feed("+O");
  (void)p.prepare(100);
  p.commit(0);
  EXPECT_EQ(p.buffered(), 2u);
  p.feed("K\r\n");
  reply r;
  ASSERT_EQ(p.next(r), status::reply);
  EXPECT_EQ(r, S("OK"));
}

TEST(RespParserZeroCopy, EverySplitPoint) {
  const auto samples = mixed_samples();
  const std::string bytes = concat_bytes(samples);
  const auto expected = values(samples);
  for (std::size_t k = 0; k <= bytes.size(); ++k) {
    SCOPED_TRACE("split at " + std::to_string(k));
    resp_parser p;
    std::vector<reply> got;
    ASSERT_NO_FATAL_FAILURE(zero_copy_feed(p, std::string_view(bytes).substr(0, k)));
    ASSERT_NO_FATAL_FAILURE(drain(p, got));
    ASSERT_NO_FATAL_FAILURE(zero_copy_feed(p, std::string_view(bytes).substr(k)));
    ASSERT_NO_FATAL_FAILURE(drain(p, got));
    ASSERT_EQ(got, expected);
  }
}

TEST(RespParserZeroCopy, OneByteAtATimeWithBigReservations) {
  const auto samples = mixed_samples();
  const std::string bytes = concat_bytes(samples);
  resp_parser p;
  std::vector<reply> got;
  for (char c : bytes) {
    auto room = p.prepare(4096);
    ASSERT_GE(room.size(), 4096u);
    room[0] = c;
    p.commit(1);
    ASSERT_NO_FATAL_FAILURE(drain(p, got));
  }
  EXPECT_EQ(got, values(samples));
}

TEST(RespParserZeroCopy, InterleavedWithFeed) {
  const auto samples = mixed_samples();
  const std::string bytes = concat_bytes(samples);
  resp_parser p;
  std::vector<reply> got;
  bool zero_copy = false;
  for (std::size_t off = 0; off < bytes.size(); off += 5) {
    const auto piece = std::string_view(bytes).substr(off, 5);
    if (zero_copy) {
      ASSERT_NO_FATAL_FAILURE(zero_copy_feed(p, piece));
    } else {
      p.feed(piece);
    }
    zero_copy = !zero_copy;
    ASSERT_NO_FATAL_FAILURE(drain(p, got));
  }
  EXPECT_EQ(got, values(samples));
}

// ---------------------------------------------------------------------------------------------
// Large bulk strings

std::string patterned_payload(std::size_t n) {
  // Deterministic bytes covering every value, including plenty of '\r', '\n' and '\0'.
  std::string s(n, '\0');
  std::uint32_t x = 2463534242u;
  for (std::size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    s[i] = static_cast<char>(x & 0xff);
    if (i % 97 == 0) s[i] = '\r';
    if (i % 97 == 1) s[i] = '\n';
  }
  return s;
}

TEST(RespParserLarge, ThreeMebibyteBulkIn4KiBChunks) {
  const std::string payload = patterned_payload(3 * 1024 * 1024);
  const std::string bytes = bulk_bytes(payload) + ":1\r\n";
  resp_parser p;
  std::vector<reply> got;
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t off = 0; off < bytes.size(); off += 4096) {
    p.feed(std::string_view(bytes).substr(off, 4096));
    ASSERT_NO_FATAL_FAILURE(drain(p, got));
    if (off + 4096 < bytes.size() - 4 - 2) {
      ASSERT_TRUE(got.empty()) << "at offset " << off;
    }
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, kGenerousTimeBound);
  ASSERT_EQ(got.size(), 2u);
  ASSERT_TRUE(got[0].is_string());
  EXPECT_EQ(got[0].str().size(), payload.size());
  EXPECT_TRUE(got[0].str() == payload);  // not EXPECT_EQ: a mismatch would print 3 MiB
  EXPECT_EQ(got[1], I(1));
  EXPECT_EQ(p.buffered(), 0u);
}

TEST(RespParserLarge, ThreeMebibyteBulkViaPrepareCommitLikeASocket) {
  const std::string payload = patterned_payload(3 * 1024 * 1024 + 17);
  const std::string bytes = "+before\r\n" + bulk_bytes(payload) + "+after\r\n";
  resp_parser p;
  std::vector<reply> got;
  std::size_t off = 0;
  std::size_t read_size = 1;
  while (off < bytes.size()) {
    auto room = p.prepare(16 * 1024);
    // Vary the amount "received" per read from 1 byte up to the whole reservation.
    const std::size_t n = std::min({read_size, room.size(), bytes.size() - off});
    std::memcpy(room.data(), bytes.data() + off, n);
    p.commit(n);
    off += n;
    read_size = read_size >= 16 * 1024 ? 1 : read_size * 3;
    ASSERT_NO_FATAL_FAILURE(drain(p, got));
  }
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0], S("before"));
  EXPECT_TRUE(got[1].str() == payload);
  EXPECT_EQ(got[2], S("after"));
}

TEST(RespParserLarge, OneAndAHalfMebibyteBulkOneByteAtATimeStaysFast) {
  const std::string payload = patterned_payload(1536 * 1024);
  const std::string bytes = bulk_bytes(payload);
  resp_parser p;
  reply r;
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i + 1 < bytes.size(); ++i) {
    p.feed(std::string_view(bytes).substr(i, 1));
    ASSERT_EQ(p.next(r), status::need_more) << "at byte " << i;
  }
  p.feed(std::string_view(bytes).substr(bytes.size() - 1));
  ASSERT_EQ(p.next(r), status::reply) << p.error_message();
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_LT(elapsed, kGenerousTimeBound);
  EXPECT_TRUE(r.str() == payload);
  EXPECT_EQ(p.buffered(), 0u);
}

TEST(RespParserLarge, LongSimpleStringOneByteAtATimeStaysFast) {
  // Exercises the incremental CRLF search: a re-scan from the start of the line on every byte
  // would be quadratic (~5e11 byte comparisons here).
  const std::string text(1024 * 1024, 'x');
  const std::string bytes = "+" + text + "\r\n";
  resp_parser p;
  reply r;
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i + 1 < bytes.size(); ++i) {
    p.feed(std::string_view(bytes).substr(i, 1));
    ASSERT_EQ(p.next(r), status::need_more) << "at byte " << i;
  }
  p.feed("\n");
  ASSERT_EQ(p.next(r), status::reply) << p.error_message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, kGenerousTimeBound);
  EXPECT_TRUE(r.str() == text);
}

TEST(RespParserLarge, BigArrayOfSmallElementsInSmallChunks) {
  constexpr std::size_t n = 100'000;
  std::string bytes = cat("*", std::to_string(n), "\r\n");
  for (std::size_t i = 0; i < n; ++i) {
    bytes += i % 2 ? cat(":", std::to_string(i), "\r\n") : bulk_bytes(std::to_string(i));
  }
  resp_parser p;
  std::vector<reply> got;
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t off = 0; off < bytes.size(); off += 7) {
    p.feed(std::string_view(bytes).substr(off, 7));
    ASSERT_NO_FATAL_FAILURE(drain(p, got));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, kGenerousTimeBound);
  ASSERT_EQ(got.size(), 1u);
  const auto& e = got[0].elements();
  ASSERT_EQ(e.size(), n);
  for (std::size_t i = 0; i < n; ++i) {
    const reply want = i % 2 ? I(static_cast<std::int64_t>(i)) : B(std::to_string(i));
    ASSERT_EQ(e[i], want) << "element " << i;
  }
}

TEST(RespParserLarge, BulkAtExactlyTheCustomLimitIsAccepted) {
  parser_limits limits;
  limits.max_bulk_length = 64 * 1024;
  const std::string payload = patterned_payload(64 * 1024);
  EXPECT_TRUE(parse_one(bulk_bytes(payload), limits).str() == payload);
}

// ---------------------------------------------------------------------------------------------
// Nesting depth

TEST(RespParserDepth, FiveHundredDeepParses) {
  const reply r = parse_one(nested_arrays(500, ":42\r\n"));
  EXPECT_EQ(depth_of(r), 500u);
  const reply* leaf = &r;
  while (leaf->is_array())
    leaf = &leaf->at(0);
  EXPECT_EQ(*leaf, I(42));
}

TEST(RespParserDepth, FiveHundredDeepOneByteAtATime) {
  const std::string bytes = nested_arrays(500, "$3\r\nend\r\n") + "+next\r\n";
  resp_parser p;
  std::vector<reply> got;
  for (char c : bytes) {
    p.feed(std::string_view(&c, 1));
    ASSERT_NO_FATAL_FAILURE(drain(p, got));
  }
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(depth_of(got[0]), 500u);
  EXPECT_EQ(got[1], S("next"));
}

TEST(RespParserDepth, DeepReplyCanBeCopiedComparedAndRendered) {
  const reply r = parse_one(nested_arrays(500, ":1\r\n"));
  const reply copy = r;  // NOLINT(performance-unnecessary-copy-initialization)
  EXPECT_TRUE(copy == r);
  EXPECT_FALSE(copy == parse_one(nested_arrays(500, ":2\r\n")));
  const std::string text = r.to_string();
  EXPECT_NE(text.find("(integer) 1"), std::string::npos);
}

TEST(RespParserDepth, ExactlyTheDefaultLimitParses) {
  const parser_limits defaults;
  ASSERT_EQ(defaults.max_depth, 512u);
  EXPECT_EQ(depth_of(parse_one(nested_arrays(512, ":1\r\n"))), 512u);
}

TEST(RespParserDepth, OneBeyondTheDefaultLimitIsProtocolError) {
  expect_protocol_error(nested_arrays(513, ":1\r\n"));
}

TEST(RespParserDepth, SixHundredDeepIsProtocolErrorNotACrash) {
  expect_protocol_error(nested_arrays(600, ":1\r\n"));
}

TEST(RespParserDepth, HundredThousandDeepIsProtocolErrorNotAStackOverflow) {
  expect_protocol_error(nested_arrays(100'000, ":1\r\n"));
}

TEST(RespParserDepth, EmptyArraysAtTheLimitDoNotCountAsALevel) {
  // The innermost *0 opens no frame.
  EXPECT_EQ(depth_of(parse_one(nested_arrays(512, "*0\r\n"))), 512u);
}

TEST(RespParserDepth, CustomLimit) {
  parser_limits limits;
  limits.max_depth = 3;
  EXPECT_EQ(parse_one("*1\r\n*1\r\n*1\r\n:1\r\n", limits), A({A({A({I(1)})})}));
  expect_protocol_error("*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n", limits);
  // Depth is about nesting, not the number of arrays in a row.
  EXPECT_EQ(parse_all("*1\r\n*1\r\n*1\r\n:1\r\n*1\r\n*1\r\n*1\r\n:2\r\n", limits).size(), 2u);
}

TEST(RespParserDepth, ErrorWhenLimitReachedSplitAcrossFeeds) {
  const std::string bytes = nested_arrays(600, ":1\r\n");
  resp_parser p;
  reply r;
  status s = status::need_more;
  for (std::size_t off = 0; off < bytes.size() && s == status::need_more; off += 4) {
    p.feed(std::string_view(bytes).substr(off, 4));
    s = p.next(r);
  }
  EXPECT_EQ(s, status::error);
  EXPECT_FALSE(p.error_message().empty());
}

// ---------------------------------------------------------------------------------------------
// Malformed input

TEST(RespParserErrors, UnknownTypeByte) {
  expect_protocol_error("?\r\n");
  expect_protocol_error("x hello\r\n");
  expect_protocol_error("HTTP/1.1 400 Bad Request\r\n");
  expect_protocol_error("\r\n+OK\r\n");  // a stray CRLF between replies
  expect_protocol_error("%2\r\n");       // RESP3 map: not RESP2
  expect_protocol_error("_\r\n");        // RESP3 null
}

TEST(RespParserErrors, UnknownTypeByteAfterValidReplies) {
  resp_parser p;
  p.feed("+OK\r\n:1\r\n!oops\r\n+never\r\n");
  reply r;
  ASSERT_EQ(p.next(r), status::reply);
  EXPECT_EQ(r, S("OK"));
  ASSERT_EQ(p.next(r), status::reply);
  EXPECT_EQ(r, I(1));
  EXPECT_EQ(p.next(r), status::error);
  EXPECT_FALSE(p.error_message().empty());
  EXPECT_EQ(p.next(r), status::error);
}

TEST(RespParserErrors, UnknownTypeByteInsideArray) {
  expect_protocol_error("*2\r\n:1\r\n?\r\n");
}

TEST(RespParserErrors, UnknownTypeByteMessageNamesTheByte) {
  resp_parser p;
  p.feed("?\r\n");
  reply r;
  ASSERT_EQ(p.next(r), status::error);
  EXPECT_NE(p.error_message().find("3f"), std::string::npos) << p.error_message();
}

TEST(RespParserErrors, CrNotFollowedByLf) {
  expect_protocol_error("+OK\rX\r\n");
  expect_protocol_error(":12\r3\r\n");
  expect_protocol_error("$3\rxabc\r\n");
  expect_protocol_error("*1\r:1\r\n");
  expect_protocol_error("-ERR\r\r\n");
}

TEST(RespParserErrors, CrNotFollowedByLfSplitRightAfterCr) {
  resp_parser p;
  p.feed("+OK\r");
  reply r;
  EXPECT_EQ(p.next(r), status::need_more);
  p.feed("+");
  EXPECT_EQ(p.next(r), status::error);
  EXPECT_FALSE(p.error_message().empty());
}

TEST(RespParserErrors, BulkLengthNegativeOtherThanMinusOne) {
  expect_protocol_error("$-2\r\n");
  expect_protocol_error("$-100\r\nabc\r\n");
  expect_protocol_error("$-9223372036854775808\r\n");
}

TEST(RespParserErrors, BulkLengthNotNumeric) {
  expect_protocol_error("$abc\r\n");
  expect_protocol_error("$\r\n");
  expect_protocol_error("$3a\r\nabc\r\n");
  expect_protocol_error("$+3\r\nabc\r\n");
  expect_protocol_error("$ 3\r\nabc\r\n");
  expect_protocol_error("$99999999999999999999\r\n");
}

TEST(RespParserErrors, BulkLengthBeyondCustomLimit) {
  parser_limits limits;
  limits.max_bulk_length = 10;
  EXPECT_EQ(parse_one("$10\r\n0123456789\r\n", limits), B("0123456789"));
  // Rejected as soon as the header is complete, before any body arrives.
  expect_protocol_error("$11\r\n", limits);
  expect_protocol_error("$1000000\r\n", limits);
  expect_protocol_error("*2\r\n$1\r\na\r\n$11\r\n", limits);
  // The nil bulk is not subject to the limit.
  EXPECT_EQ(parse_one("$-1\r\n", limits), Nil());
}

TEST(RespParserErrors, BulkLengthBeyondDefaultLimit) {
  expect_protocol_error(cat("$", std::to_string(512ull * 1024 * 1024 + 1), "\r\n"));
}

TEST(RespParserErrors, BulkBodyNotTerminatedByCrlf) {
  expect_protocol_error("$3\r\nabcXY");
  expect_protocol_error("$3\r\nabc\rX");
  expect_protocol_error("$3\r\nabc\nX");
  expect_protocol_error("$3\r\nabcd\r\n");
  expect_protocol_error("$0\r\nXY");
  // Too short: the CRLF lands inside the body and the byte after it is not CRLF's LF.
  expect_protocol_error("$3\r\nab\r\n+OK\r\n");
}

TEST(RespParserErrors, BulkBodyNotTerminatedSplitAcrossFeeds) {
  resp_parser p;
  reply r;
  p.feed("$3\r\nab");
  EXPECT_EQ(p.next(r), status::need_more);
  p.feed("c\r");
  EXPECT_EQ(p.next(r), status::need_more);
  p.feed("x");
  EXPECT_EQ(p.next(r), status::error);
  EXPECT_TRUE(p.failed());
}

TEST(RespParserErrors, IntegerNotNumeric) {
  expect_protocol_error(":abc\r\n");
  expect_protocol_error(":\r\n");
  expect_protocol_error(":12a\r\n");
  expect_protocol_error(":+1\r\n");
  expect_protocol_error(": 1\r\n");
  expect_protocol_error(":1 \r\n");
  expect_protocol_error(":1.5\r\n");
  expect_protocol_error(":-\r\n");
  expect_protocol_error(":0x10\r\n");
}

TEST(RespParserErrors, ArrayLengthOutOfRange) {
  expect_protocol_error("*-2\r\n");
  expect_protocol_error("*-9223372036854775808\r\n");
  expect_protocol_error("*abc\r\n");
  expect_protocol_error("*\r\n");
  expect_protocol_error("*99999999999999999999\r\n");
  expect_protocol_error(cat("*", std::to_string((1ull << 28) + 1), "\r\n"));
}

TEST(RespParserErrors, ArrayLengthBeyondCustomLimit) {
  parser_limits limits;
  limits.max_array_length = 4;
  EXPECT_EQ(parse_one("*4\r\n:1\r\n:2\r\n:3\r\n:4\r\n", limits), A({I(1), I(2), I(3), I(4)}));
  expect_protocol_error("*5\r\n", limits);
  expect_protocol_error("*1\r\n*5\r\n", limits);
  EXPECT_EQ(parse_one("*-1\r\n", limits), Nil());
}

TEST(RespParserErrors, HeaderLineBeyondCustomMaxLineLength) {
  parser_limits limits;
  limits.max_line_length = 16;
  expect_protocol_error(cat("+", std::string(100, 'a')), limits);
  expect_protocol_error(cat("$", std::string(100, '1')), limits);
  expect_protocol_error(cat(":", std::string(100, '9')), limits);
  expect_protocol_error(cat("*1\r\n-", std::string(100, 'e')), limits);
}

TEST(RespParserErrors, HeaderLineLimitReachedGradually) {
  parser_limits limits;
  limits.max_line_length = 1024;
  resp_parser p(limits);
  reply r;
  p.feed("+");
  status s = status::need_more;
  std::size_t fed = 1;
  while (s == status::need_more && fed < 100'000) {
    p.feed("0123456789abcdef");
    fed += 16;
    s = p.next(r);
  }
  EXPECT_EQ(s, status::error);
  EXPECT_LE(fed, 1024u + 16 + 1);  // detected promptly, not after unbounded buffering
  EXPECT_FALSE(p.error_message().empty());
}

TEST(RespParserErrors, ShortLineWithinCustomLimitNeedsMore) {
  parser_limits limits;
  limits.max_line_length = 16;
  resp_parser p(limits);
  p.feed("+abcdef");
  reply r;
  EXPECT_EQ(p.next(r), status::need_more);
  EXPECT_FALSE(p.failed());
  p.feed("\r\n");
  ASSERT_EQ(p.next(r), status::reply);
  EXPECT_EQ(r, S("abcdef"));
}

TEST(RespParserErrors, LineLengthLimitDoesNotApplyToBulkBodies) {
  parser_limits limits;
  limits.max_line_length = 16;
  const std::string payload(1000, 'z');
  const std::string bytes = bulk_bytes(payload);
  resp_parser p(limits);
  std::vector<reply> got;
  for (std::size_t off = 0; off < bytes.size(); off += 10) {
    p.feed(std::string_view(bytes).substr(off, 10));
    ASSERT_NO_FATAL_FAILURE(drain(p, got));
  }
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], B(payload));
}

TEST(RespParserErrors, LineLengthLimitIsIndependentOfHowInputIsSplit) {
  // "Feed it bytes as they arrive, split anywhere": whether a reply is accepted must not depend
  // on the split. A 40-byte simple string with a 16-byte line limit is rejected when it arrives
  // in pieces, so it must be rejected when it arrives whole too (or accepted in both cases).
  parser_limits limits;
  limits.max_line_length = 16;
  const std::string bytes = cat("+", std::string(40, 'a'), "\r\n");

  resp_parser whole(limits);
  whole.feed(bytes);
  reply r1;
  const status s1 = whole.next(r1);

  resp_parser split(limits);
  split.feed(std::string_view(bytes).substr(0, 20));
  reply r2;
  status s2 = split.next(r2);
  if (s2 == status::need_more) {
    split.feed(std::string_view(bytes).substr(20));
    s2 = split.next(r2);
  }
  EXPECT_EQ(s1, s2);
}

TEST(RespParserErrors, LineAtTheLengthLimitSplitBetweenCrAndLf) {
  // Found by tests/fuzz: a read that ended between a header's CR and its LF counted the CR as
  // part of the line, so a line of exactly max_line_length was rejected in pieces although it
  // was accepted whole, and a CR without LF was misreported as an overlong line.
  parser_limits limits;
  limits.max_line_length = 3;
  for (const std::string& bytes : {"+abc\r\n"s, "-ERR\r\n"s, ":123\r\n"s, "$3\r\nabc\r\n"s,
                                   "*1\r\n:12\r\n"s, "+abc\rx\r\n"s}) {
    SCOPED_TRACE("input: " + bytes);
    resp_parser whole(limits);
    whole.feed(bytes);
    reply r1;
    const status s1 = whole.next(r1);
    for (std::size_t k = 1; k <= bytes.size(); ++k) {
      if (bytes[k - 1] != '\r') continue;
      SCOPED_TRACE("split after the CR at " + std::to_string(k - 1));
      resp_parser split(limits);
      split.feed(std::string_view(bytes).substr(0, k));
      reply r2;
      status s2 = split.next(r2);
      if (s2 == status::need_more) {
        split.feed(std::string_view(bytes).substr(k));
        s2 = split.next(r2);
      }
      EXPECT_EQ(s2, s1) << split.error_message();
      EXPECT_EQ(r2, r1);
      EXPECT_EQ(split.error_message(), whole.error_message());
    }
  }
}

TEST(RespParserErrors, HostileArrayHeaderDoesNotAllocateGigabytes) {
  const auto vm_before = virtual_memory_bytes();
  resp_parser p;
  p.feed("*268435455\r\n");
  reply r;
  EXPECT_EQ(p.next(r), status::need_more);
  EXPECT_FALSE(p.failed());
  p.feed(":1\r\n:2\r\n$3\r\nabc\r\n");
  EXPECT_EQ(p.next(r), status::need_more);
  const auto vm_after = virtual_memory_bytes();
  if (vm_before && vm_after && *vm_after > *vm_before) {
    EXPECT_LT(*vm_after - *vm_before, 64u * 1024 * 1024)
        << "virtual memory grew by " << (*vm_after - *vm_before) << " bytes";
  }
  // The parser is still usable for what it is: after reset, normal replies parse.
  p.reset();
  p.feed("+OK\r\n");
  ASSERT_EQ(p.next(r), status::reply);
  EXPECT_EQ(r, S("OK"));
}

TEST(RespParserErrors, HostileBulkHeaderDoesNotAllocate) {
  const auto vm_before = virtual_memory_bytes();
  resp_parser p;
  p.feed("$536870912\r\nabc");  // exactly the default 512 MiB limit
  reply r;
  EXPECT_EQ(p.next(r), status::need_more);
  EXPECT_FALSE(p.failed());
  const auto vm_after = virtual_memory_bytes();
  if (vm_before && vm_after && *vm_after > *vm_before) {
    EXPECT_LT(*vm_after - *vm_before, 64u * 1024 * 1024);
  }
}

TEST(RespParserErrors, ErrorInsidePartiallyBuiltArray) {
  resp_parser p;
  reply r;
  p.feed("*3\r\n:1\r\n");
  EXPECT_EQ(p.next(r), status::need_more);
  p.feed("$x\r\n");
  EXPECT_EQ(p.next(r), status::error);
  EXPECT_EQ(p.next(r), status::error);
}

// ---------------------------------------------------------------------------------------------
// reset()

TEST(RespParserReset, AfterErrorParserWorksAgain) {
  resp_parser p;
  reply r;
  p.feed("?garbage\r\n");
  ASSERT_EQ(p.next(r), status::error);
  ASSERT_TRUE(p.failed());
  p.reset();
  EXPECT_FALSE(p.failed());
  EXPECT_TRUE(p.error_message().empty());
  EXPECT_EQ(p.buffered(), 0u);
  EXPECT_EQ(p.next(r), status::need_more);
  p.feed("+OK\r\n*2\r\n:1\r\n:2\r\n");
  ASSERT_EQ(p.next(r), status::reply);
  EXPECT_EQ(r, S("OK"));
  ASSERT_EQ(p.next(r), status::reply);
  EXPECT_EQ(r, A({I(1), I(2)}));
}

TEST(RespParserReset, DropsBufferedBytes) {
  resp_parser p;
  p.feed("+partial");
  reply r;
  EXPECT_EQ(p.next(r), status::need_more);
  EXPECT_EQ(p.buffered(), 8u);
  p.reset();
  EXPECT_EQ(p.buffered(), 0u);
  p.feed(":5\r\n");
  ASSERT_EQ(p.next(r), status::reply);
  EXPECT_EQ(r, I(5));
}

TEST(RespParserReset, DropsPartiallyBuiltArrays) {
  resp_parser p;
  reply r;
  p.feed("*3\r\n*2\r\n:1\r\n");
  EXPECT_EQ(p.next(r), status::need_more);
  p.reset();
  p.feed(":5\r\n");
  ASSERT_EQ(p.next(r), status::reply);
  EXPECT_EQ(r, I(5));  // not swallowed into the old array
  EXPECT_EQ(p.next(r), status::need_more);
}

TEST(RespParserReset, DropsPartialBulk) {
  resp_parser p;
  reply r;
  p.feed("$10\r\nabc");
  EXPECT_EQ(p.next(r), status::need_more);
  p.reset();
  p.feed("$3\r\nxyz\r\n");
  ASSERT_EQ(p.next(r), status::reply);
  EXPECT_EQ(r, B("xyz"));
}

TEST(RespParserReset, ResetAfterHalfScannedLine) {
  // Exercises the incremental scan position: after a reset it must not point into old data.
  resp_parser p;
  reply r;
  p.feed(cat("+", std::string(5000, 'q')));
  EXPECT_EQ(p.next(r), status::need_more);
  p.reset();
  p.feed("+a\r\n");
  ASSERT_EQ(p.next(r), status::reply);
  EXPECT_EQ(r, S("a"));
}

TEST(RespParserReset, KeepsLimits) {
  parser_limits limits;
  limits.max_bulk_length = 3;
  resp_parser p(limits);
  reply r;
  p.feed("$4\r\n");
  ASSERT_EQ(p.next(r), status::error);
  p.reset();
  p.feed("$4\r\n");
  EXPECT_EQ(p.next(r), status::error);
}

TEST(RespParserReset, RepeatedUseAfterResetAtEverySplit) {
  const auto samples = mixed_samples();
  const std::string bytes = concat_bytes(samples);
  resp_parser p;
  for (std::size_t k = 0; k <= bytes.size(); k += 7) {
    p.reset();
    std::vector<reply> got;
    p.feed("?bad\r\n");
    reply r;
    ASSERT_EQ(p.next(r), status::error);
    p.reset();
    p.feed(std::string_view(bytes).substr(0, k));
    ASSERT_NO_FATAL_FAILURE(drain(p, got));
    p.feed(std::string_view(bytes).substr(k));
    ASSERT_NO_FATAL_FAILURE(drain(p, got));
    ASSERT_EQ(got, values(samples)) << "split at " << k;
  }
}

// ---------------------------------------------------------------------------------------------
// buffered()

TEST(RespParserBuffered, CountsUnconsumedBytes) {
  resp_parser p;
  EXPECT_EQ(p.buffered(), 0u);
  p.feed("+OK\r\n+PA");
  EXPECT_EQ(p.buffered(), 8u);
  reply r;
  ASSERT_EQ(p.next(r), status::reply);
  EXPECT_EQ(p.buffered(), 3u);
  EXPECT_EQ(p.next(r), status::need_more);
  EXPECT_EQ(p.buffered(), 3u);
  p.feed("RTIAL\r\n");
  EXPECT_EQ(p.buffered(), 10u);
  ASSERT_EQ(p.next(r), status::reply);
  EXPECT_EQ(r, S("PARTIAL"));
  EXPECT_EQ(p.buffered(), 0u);
}

TEST(RespParserBuffered, PartialBulkCountsEverything) {
  resp_parser p;
  p.feed("$10\r\n01234");
  reply r;
  EXPECT_EQ(p.next(r), status::need_more);
  EXPECT_EQ(p.buffered(), 10u);
  p.feed("56789\r");
  EXPECT_EQ(p.next(r), status::need_more);
  EXPECT_EQ(p.buffered(), 16u);
  p.feed("\n:1\r\n");
  ASSERT_EQ(p.next(r), status::reply);
  EXPECT_EQ(p.buffered(), 4u);
  ASSERT_EQ(p.next(r), status::reply);
  EXPECT_EQ(p.buffered(), 0u);
}

TEST(RespParserBuffered, PartialArrayNeverExceedsBytesFedAndEndsAtZero) {
  resp_parser p;
  reply r;
  p.feed("*2\r\n:1\r\n");
  EXPECT_EQ(p.next(r), status::need_more);
  EXPECT_LE(p.buffered(), 8u);
  p.feed(":2");
  EXPECT_EQ(p.next(r), status::need_more);
  EXPECT_LE(p.buffered(), 10u);
  EXPECT_GE(p.buffered(), 2u);  // the incomplete ":2" is certainly unconsumed
  p.feed("\r\n");
  ASSERT_EQ(p.next(r), status::reply);
  EXPECT_EQ(r, A({I(1), I(2)}));
  EXPECT_EQ(p.buffered(), 0u);
}

TEST(RespParserBuffered, GrowsWithFeedsBeforeNext) {
  resp_parser p;
  std::size_t total = 0;
  for (int i = 0; i < 100; ++i) {
    p.feed(":123\r\n");
    total += 6;
    ASSERT_EQ(p.buffered(), total);
  }
  std::vector<reply> got;
  drain(p, got);
  EXPECT_EQ(got.size(), 100u);
  EXPECT_EQ(p.buffered(), 0u);
}

TEST(RespParserBuffered, ZeroCopyCommitCounts) {
  resp_parser p;
  ASSERT_NO_FATAL_FAILURE(zero_copy_feed(p, "+hel"));
  EXPECT_EQ(p.buffered(), 4u);
  ASSERT_NO_FATAL_FAILURE(zero_copy_feed(p, "lo\r\n"));
  EXPECT_EQ(p.buffered(), 8u);
  reply r;
  ASSERT_EQ(p.next(r), status::reply);
  EXPECT_EQ(p.buffered(), 0u);
}

// ---------------------------------------------------------------------------------------------
// Encoder

std::string encode(std::vector<std::string_view> args) {
  std::string out;
  dlock::wire::encode_command(out, args);
  return out;
}

TEST(RespEncoder, EncodeCommandExactBytes) {
  EXPECT_EQ(encode({"SET", "key", "value"}), "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n");
  EXPECT_EQ(encode({"PING"}), "*1\r\n$4\r\nPING\r\n");
  EXPECT_EQ(encode({}), "*0\r\n");
}

TEST(RespEncoder, EmptyArgument) {
  EXPECT_EQ(encode({"ECHO", ""}), "*2\r\n$4\r\nECHO\r\n$0\r\n\r\n");
}

TEST(RespEncoder, BinaryArgumentIsLengthPrefixedVerbatim) {
  const std::string arg("a\r\n\0b"s);
  EXPECT_EQ(encode({"SET", "k", arg}), "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\na\r\n\0b\r\n"s);
}

TEST(RespEncoder, AppendsToExistingOutput) {
  std::string out = "prefix";
  const std::vector<std::string_view> a = {"GET", "x"};
  dlock::wire::encode_command(out, a);
  dlock::wire::encode_command(out, a);
  EXPECT_EQ(out, "prefix*2\r\n$3\r\nGET\r\n$1\r\nx\r\n*2\r\n$3\r\nGET\r\n$1\r\nx\r\n");
}

TEST(RespEncoder, ArrayHeaderAndBulk) {
  std::string out;
  dlock::wire::encode_array_header(out, 2);
  dlock::wire::encode_bulk(out, "EVALSHA");
  dlock::wire::encode_bulk(out, std::string(12, 'x'));
  EXPECT_EQ(out, "*2\r\n$7\r\nEVALSHA\r\n$12\r\nxxxxxxxxxxxx\r\n");

  std::string big;
  dlock::wire::encode_array_header(big, std::numeric_limits<std::size_t>::max());
  EXPECT_EQ(big, cat("*", std::to_string(std::numeric_limits<std::size_t>::max()), "\r\n"));
  std::string zero;
  dlock::wire::encode_array_header(zero, 0);
  EXPECT_EQ(zero, "*0\r\n");
}

TEST(RespEncoder, EncodeCommandEqualsHeaderPlusBulks) {
  const std::vector<std::string_view> args = {"HSET", "h", "f", "v"};
  std::string manual;
  dlock::wire::encode_array_header(manual, args.size());
  for (auto a : args)
    dlock::wire::encode_bulk(manual, a);
  EXPECT_EQ(encode(args), manual);
}

TEST(RespEncoder, LongArgumentLength) {
  const std::string arg(123456, 'q');
  const std::string out = encode({arg});
  EXPECT_EQ(out.substr(0, 14), "*1\r\n$123456\r\nq");
  EXPECT_EQ(out.size(), 4 + 9 + arg.size() + 2);
}

std::vector<std::string> random_args(std::mt19937& rng) {
  std::uniform_int_distribution<int> count(0, 8);
  std::uniform_int_distribution<int> length(0, 300);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<int> special(0, 5);
  std::vector<std::string> args(static_cast<std::size_t>(count(rng)));
  for (auto& a : args) {
    a.resize(static_cast<std::size_t>(length(rng)));
    for (auto& c : a) {
      // Bias towards the bytes that matter to the framing.
      switch (special(rng)) {
        case 0:
          c = '\r';
          break;
        case 1:
          c = '\n';
          break;
        case 2:
          c = '\0';
          break;
        default:
          c = static_cast<char>(byte(rng));
      }
    }
  }
  return args;
}

TEST(RespEncoder, RoundTripArbitraryBinaryArgs) {
  std::mt19937 rng(2024);
  std::string stream;
  std::vector<reply> expected;
  for (int i = 0; i < 300; ++i) {
    const auto args = random_args(rng);
    const std::vector<std::string_view> views(args.begin(), args.end());
    std::string one;
    dlock::wire::encode_command(one, views);
    std::vector<reply> elements;
    for (const auto& a : args)
      elements.push_back(B(a));
    const reply want = A(std::move(elements));
    ASSERT_EQ(parse_one(one), want) << "command " << i;
    stream += one;
    expected.push_back(want);
  }
  EXPECT_EQ(parse_all(stream), expected);

  // And the whole stream split into odd-sized pieces.
  resp_parser p;
  std::vector<reply> got;
  for (std::size_t off = 0; off < stream.size(); off += 13) {
    p.feed(std::string_view(stream).substr(off, 13));
    ASSERT_NO_FATAL_FAILURE(drain(p, got));
  }
  EXPECT_EQ(got, expected);
}

TEST(RespEncoder, RoundTripEveryByteValue) {
  std::string all;
  for (int c = 0; c < 256; ++c)
    all += static_cast<char>(c);
  EXPECT_EQ(parse_one(encode({all, "", "\r\n", all + all})),
            A({B(all), B(""), B("\r\n"), B(all + all)}));
}

// ---------------------------------------------------------------------------------------------
// dlock::reply

template <typename F>
void expect_unexpected_reply(F&& f, const char* what) {
  SCOPED_TRACE(what);
  try {
    f();
    ADD_FAILURE() << "no exception";
  } catch (const dlock::error& e) {
    EXPECT_TRUE(e.code() == dlock::errc::unexpected_reply) << e.code().message();
    EXPECT_FALSE(std::string(e.what()).empty());
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
}

TEST(Reply, DefaultIsNil) {
  const reply r;
  EXPECT_EQ(r.type(), reply::kind::nil);
  EXPECT_TRUE(r.is_nil());
  EXPECT_FALSE(r.is_string());
  EXPECT_FALSE(r.is_error());
  EXPECT_FALSE(r.is_integer());
  EXPECT_FALSE(r.is_array());
}

TEST(Reply, KindPredicates) {
  EXPECT_TRUE(S("x").is_string());
  EXPECT_TRUE(B("x").is_string());
  EXPECT_FALSE(E("x").is_string());  // errors are not strings
  EXPECT_TRUE(E("x").is_error());
  EXPECT_TRUE(I(1).is_integer());
  EXPECT_TRUE(A({}).is_array());
  EXPECT_EQ(S("x").type(), reply::kind::simple_string);
  EXPECT_EQ(B("x").type(), reply::kind::bulk_string);
  EXPECT_EQ(E("x").type(), reply::kind::error);
  EXPECT_EQ(I(1).type(), reply::kind::integer);
  EXPECT_EQ(A({}).type(), reply::kind::array);
  for (const reply& r : {S("x"), B("x"), E("x"), I(0), A({})})
    EXPECT_FALSE(r.is_nil());
}

TEST(Reply, Accessors) {
  EXPECT_EQ(S("OK").str(), "OK");
  EXPECT_EQ(B("bin\0ary"s).str(), "bin\0ary"s);
  EXPECT_EQ(E("ERR no").str(), "ERR no");  // str() also gives an error's text
  EXPECT_EQ(I(-7).integer(), -7);
  EXPECT_EQ(I(std::numeric_limits<std::int64_t>::min()).integer(),
            std::numeric_limits<std::int64_t>::min());
  const reply a = A({I(1), S("two"), Nil()});
  ASSERT_EQ(a.elements().size(), 3u);
  EXPECT_EQ(a.at(0), I(1));
  EXPECT_EQ(a.at(1).str(), "two");
  EXPECT_TRUE(a.at(2).is_nil());
  EXPECT_EQ(&a.at(1), &a.elements()[1]);
}

TEST(Reply, MutableElements) {
  reply a = A({I(1)});
  a.elements().push_back(S("x"));
  a.elements()[0] = I(9);
  EXPECT_EQ(a, A({I(9), S("x")}));
}

TEST(Reply, StrThrowsOnWrongKind) {
  expect_unexpected_reply([] { (void)I(1).str(); }, "integer");
  expect_unexpected_reply([] { (void)Nil().str(); }, "nil");
  expect_unexpected_reply([] { (void)A({S("x")}).str(); }, "array");
}

TEST(Reply, IntegerThrowsOnWrongKind) {
  expect_unexpected_reply([] { (void)S("1").integer(); }, "simple string");
  expect_unexpected_reply([] { (void)B("1").integer(); }, "bulk string");
  expect_unexpected_reply([] { (void)E("1").integer(); }, "error");
  expect_unexpected_reply([] { (void)Nil().integer(); }, "nil");
  expect_unexpected_reply([] { (void)A({I(1)}).integer(); }, "array");
}

TEST(Reply, ElementsThrowsOnWrongKind) {
  expect_unexpected_reply([] { (void)S("x").elements(); }, "simple string");
  expect_unexpected_reply([] { (void)B("x").elements(); }, "bulk string");
  expect_unexpected_reply([] { (void)E("x").elements(); }, "error");
  expect_unexpected_reply([] { (void)I(3).elements(); }, "integer");
  expect_unexpected_reply([] { (void)Nil().elements(); }, "nil");
  expect_unexpected_reply(
      [] {
        reply r = I(3);
        (void)r.elements();  // the non-const overload
      },
      "integer (non-const)");
  expect_unexpected_reply(
      [] {
        reply r;
        r.elements().push_back(I(1));
      },
      "nil (non-const)");
}

TEST(Reply, AtThrowsOnWrongKindOrOutOfRange) {
  expect_unexpected_reply([] { (void)S("x").at(0); }, "string");
  expect_unexpected_reply([] { (void)Nil().at(0); }, "nil");
  expect_unexpected_reply([] { (void)A({}).at(0); }, "empty array");
  expect_unexpected_reply([] { (void)A({I(1), I(2)}).at(2); }, "index == size");
  expect_unexpected_reply([] { (void)A({I(1)}).at(std::numeric_limits<std::size_t>::max()); },
                          "huge index");
}

TEST(Reply, WrongKindMessageIsInformative) {
  try {
    (void)B("hello").integer();
    FAIL() << "no exception";
  } catch (const dlock::error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("integer"), std::string::npos) << what;
    EXPECT_NE(what.find("hello"), std::string::npos) << what;
  }
  try {
    (void)A({I(1), I(2)}).at(5);
    FAIL() << "no exception";
  } catch (const dlock::error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find('5'), std::string::npos) << what;
    EXPECT_NE(what.find('2'), std::string::npos) << what;
  }
}

TEST(Reply, WrongKindMessageClipsHugeReplies) {
  try {
    (void)B(std::string(1'000'000, 'x')).integer();
    FAIL() << "no exception";
  } catch (const dlock::error& e) {
    EXPECT_LT(std::string(e.what()).size(), 1000u);
  }
}

TEST(Reply, ToStringOfEachKind) {
  EXPECT_EQ(Nil().to_string(), "(nil)");
  EXPECT_EQ(S("OK").to_string(), "OK");
  EXPECT_EQ(B("hello").to_string(), "\"hello\"");
  EXPECT_EQ(E("ERR bad").to_string(), "(error) ERR bad");
  EXPECT_EQ(I(-5).to_string(), "(integer) -5");
  EXPECT_EQ(I(std::numeric_limits<std::int64_t>::min()).to_string(),
            "(integer) -9223372036854775808");
  EXPECT_EQ(A({}).to_string(), "[]");
  EXPECT_EQ(A({I(1), B("a"), Nil()}).to_string(), "[(integer) 1, \"a\", (nil)]");
  EXPECT_EQ(A({A({S("x")}), A({})}).to_string(), "[[x], []]");
}

TEST(Reply, ToStringClipsLongText) {
  const std::string long_text(10'000, 'y');
  for (const reply& r : {S(long_text), B(long_text), E(long_text)}) {
    const std::string s = r.to_string();
    EXPECT_LT(s.size(), 300u) << s.size();
    EXPECT_NE(s.find("..."), std::string::npos);
    EXPECT_NE(s.find(std::string(100, 'y')), std::string::npos);
  }
  // Text at exactly the clip length is not marked as clipped.
  EXPECT_EQ(S(std::string(200, 'z')).to_string(), std::string(200, 'z'));
  EXPECT_EQ(S(std::string(201, 'z')).to_string(), std::string(200, 'z') + "...");
}

TEST(Reply, ToStringClipsLongArrays) {
  std::vector<reply> many;
  for (int i = 0; i < 100; ++i)
    many.push_back(I(i));
  const std::string s = A(many).to_string();
  EXPECT_LT(s.size(), 400u) << s;
  EXPECT_NE(s.find("(integer) 0"), std::string::npos);
  EXPECT_EQ(s.find("(integer) 99"), std::string::npos);
  EXPECT_NE(s.find("84 more"), std::string::npos) << s;
  EXPECT_EQ(s.front(), '[');
  EXPECT_EQ(s.back(), ']');
}

TEST(Reply, ToStringOfSixteenElementsIsNotClipped) {
  std::vector<reply> sixteen(16, I(1));
  const std::string s = A(sixteen).to_string();
  EXPECT_EQ(s.find("more"), std::string::npos) << s;
}

TEST(Reply, Equality) {
  EXPECT_EQ(Nil(), Nil());
  EXPECT_EQ(S("a"), S("a"));
  EXPECT_EQ(B("a"), B("a"));
  EXPECT_EQ(E("a"), E("a"));
  EXPECT_EQ(I(5), I(5));
  EXPECT_EQ(A({I(1), A({B("x")})}), A({I(1), A({B("x")})}));

  EXPECT_NE(S("a"), S("b"));
  EXPECT_NE(S("a"), B("a"));
  EXPECT_NE(S("a"), E("a"));
  EXPECT_NE(B("a"), E("a"));
  EXPECT_NE(I(5), I(6));
  EXPECT_NE(I(0), Nil());
  EXPECT_NE(B(""), Nil());
  EXPECT_NE(S(""), Nil());
  EXPECT_NE(A({}), Nil());
  EXPECT_NE(A({}), B(""));
  EXPECT_NE(A({I(1)}), A({I(1), I(1)}));
  EXPECT_NE(A({I(1), I(2)}), A({I(2), I(1)}));
  EXPECT_NE(A({A({B("x")})}), A({A({B("y")})}));
  EXPECT_NE(A({Nil()}), A({}));
  EXPECT_NE(B("a\0b"s), B("a"));
  EXPECT_FALSE(S("a") == B("a"));
  EXPECT_TRUE(S("a") != B("a"));
}

TEST(Reply, CopiesAreDeep) {
  const reply original = A({A({B("x"), I(1)}), S("y")});
  reply copy = original;
  copy.elements()[0].elements()[0] = B("changed");
  copy.elements().push_back(Nil());
  EXPECT_EQ(original, A({A({B("x"), I(1)}), S("y")}));
  EXPECT_NE(copy, original);
}

TEST(Reply, MoveTransfersContent) {
  reply a = A({B(std::string(1000, 'm')), I(3)});
  const reply expected = a;
  reply b = std::move(a);
  EXPECT_EQ(b, expected);
  reply c;
  c = std::move(b);
  EXPECT_EQ(c, expected);
}

TEST(Reply, NoexceptWhereDocumented) {
  static_assert(std::is_nothrow_default_constructible_v<reply>);
  static_assert(noexcept(reply::integer(1)));
  static_assert(std::is_nothrow_move_constructible_v<reply>);
  const reply r;
  static_assert(noexcept(r.type()));
  static_assert(noexcept(r.is_nil()));
  SUCCEED();
}

}  // namespace
