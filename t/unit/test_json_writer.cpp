#include <gtest/gtest.h>

#include "core/json/writer.h"

namespace llmgw {
namespace {

TEST(JsonWriter, ObjectsArraysAndScalars) {
    JsonWriter w;
    w.begin_object().field("name", "a\"b\n").field("n", std::int64_t{-3}).field("ok", true);
    w.key("list").begin_array().num(1).null().str("x").end_array();
    w.key("when").time(0).key("at").time(86400);
    w.end_object();
    EXPECT_TRUE(w.complete());
    EXPECT_EQ(w.take(),
              "{\"name\":\"a\\\"b\\n\",\"n\":-3,\"ok\":true,\"list\":[1,null,\"x\"],\"when\":null,"
              "\"at\":\"1970-01-02T00:00:00Z\"}");
}

TEST(JsonWriter, InvalidUtf8BecomesReplacementCharacter) {
    JsonWriter w;
    w.begin_object().field(std::string_view("k\xff", 2), std::string_view("v\xc3(\xe2\x82\xac", 6)).end_object();
    EXPECT_EQ(w.take(), "{\"k\xEF\xBF\xBD\":\"v\xEF\xBF\xBD(\xE2\x82\xAC\"}");
}

TEST(JsonWriter, ControlCharactersAndNulAreEscaped) {
    JsonWriter w;
    w.begin_array().str(std::string_view("\x01\0\x1f", 3)).end_array();
    EXPECT_EQ(w.take(), "[\"\\u0001\\u0000\\u001F\"]");
}

TEST(Utf8, Validity) {
    EXPECT_TRUE(is_valid_utf8("plain"));
    EXPECT_TRUE(is_valid_utf8("\xE2\x82\xAC"));
    EXPECT_FALSE(is_valid_utf8("\xC0\xAF"));         // overlong
    EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));     // surrogate
    EXPECT_FALSE(is_valid_utf8("\xE2\x82"));         // truncated
    EXPECT_EQ(to_valid_utf8("a\xE2\x82"), "a\xEF\xBF\xBD");
}

}  // namespace
}  // namespace llmgw
