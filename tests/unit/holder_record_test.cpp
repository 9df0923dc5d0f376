// Unit tests for the holder record a grant writes beside its lock: what a client sends, and
// reading back what a script stored (the server's time put in front), including records no
// dlock client wrote and texts that are not UTF-8.
#include "locks/sansio/holder_record.hpp"

#include <gtest/gtest.h>

#include <chrono>

namespace {

using dlock::detail::decode_holder;
using dlock::detail::encode_holder;
using dlock::detail::holder_facts;
using dlock::detail::max_label_bytes;

// What _holder.lua stores: the client's object with "since_ms" put first.
std::string stored(const std::string& sent, long long since_ms) {
  return "{\"since_ms\":" + std::to_string(since_ms) + "," + sent.substr(1);
}

TEST(HolderRecord, WhatAClientSendsReadsBackAsItsIdentity) {
  const holder_facts facts{"web-3", 4242, "cron", "./report.sh --full", "8ebf-uuid"};
  const auto sent = encode_holder(facts);
  EXPECT_EQ(sent,
            "{\"host\":\"web-3\",\"pid\":4242,\"user\":\"cron\",\"label\":\"./report.sh "
            "--full\",\"client\":\"8ebf-uuid\"}");
  const auto id = decode_holder(stored(sent, 1764288000123));
  ASSERT_TRUE(id);
  EXPECT_EQ(id->host, "web-3");
  EXPECT_EQ(id->pid, 4242);
  EXPECT_EQ(id->user, "cron");
  EXPECT_EQ(id->label, "./report.sh --full");
  EXPECT_EQ(id->client_id, "8ebf-uuid");
  EXPECT_EQ(id->since.time_since_epoch(), std::chrono::milliseconds(1764288000123));
}

TEST(HolderRecord, QuotesNewlinesAndControlBytesSurviveTheRoundTrip) {
  const holder_facts facts{"h", 1, "u", "sh -c 'echo \"a\\b\"\n\ttab\x01'", "c"};
  const auto sent = encode_holder(facts);
  EXPECT_EQ(sent.find('\n'), std::string::npos);
  const auto id = decode_holder(stored(sent, 5));
  ASSERT_TRUE(id);
  EXPECT_EQ(id->label, facts.label);
}

TEST(HolderRecord, BytesThatAreNotUtf8BecomeReplacementCharacters) {
  const holder_facts facts{"h", 1, "u", std::string("caf\xc3\xa9 \xff\xfe \xed\xa0\x80 \xc0\xaf"),
                           "c"};
  const auto id = decode_holder(stored(encode_holder(facts), 5));
  ASSERT_TRUE(id);
  // é stays; 0xFF, 0xFE, an encoded surrogate (3 bytes) and an overlong '/' (2 bytes) do not.
  EXPECT_EQ(id->label,
            "caf\xc3\xa9 \xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd "
            "\xef\xbf\xbd\xef\xbf\xbd");
}

TEST(HolderRecord, ALongLabelIsCutAtACharactersBoundary) {
  std::string label(max_label_bytes - 1, 'x');
  label += "\xc3\xa9\xc3\xa9";  // the first é would end one byte past the limit
  const auto id = decode_holder(stored(encode_holder({"h", 1, "u", label, "c"}), 5));
  ASSERT_TRUE(id);
  EXPECT_EQ(id->label, std::string(max_label_bytes - 1, 'x'));
}

TEST(HolderRecord, EscapesFromOtherWritersAreRead) {
  const auto id = decode_holder(
      R"({"since_ms":7,"label":"\u00e9\ud83d\ude00\/\n","pid":-1,"future":"x","n":12,"host":"a"})");
  ASSERT_TRUE(id);
  EXPECT_EQ(id->label, "\xc3\xa9\xf0\x9f\x98\x80/\n");
  EXPECT_EQ(id->pid, -1);
  EXPECT_EQ(id->host, "a");
}

TEST(HolderRecord, WhatIsNotARecordReadsAsNothing) {
  for (const char* text :
       {"", "x", "{}", "{\"host\":\"a\"}", "{\"since_ms\":\"1\"}", "{\"since_ms\":1", "[1]",
        "{\"since_ms\":1,}", "{\"since_ms\":1} trailing", "{\"since_ms\":1,\"a\":\"\\q\"}",
        "{\"since_ms\":1,\"a\":\"unterminated}", "{\"since_ms\":1,\"a\":true}",
        "{\"since_ms\":1,\"a\":\"\\u12\"}", "{\"since_ms\":1,\"a\":\"raw\nnewline\"}"}) {
    EXPECT_FALSE(decode_holder(text)) << text;
  }
  EXPECT_TRUE(decode_holder(" { \"since_ms\" : 1 } "));
}

}  // namespace
