// The number guard in front of RapidJSON's full-precision parsing.
#include <gtest/gtest.h>

#include "core/codec/openai.h"
#include "core/json/text_checks.h"

using namespace llmgw;

// RapidJSON 1.1's full-precision parser reads past its power-of-ten table for
// a non-zero number below about 1e-330 written with many digits: such
// documents are refused before they are parsed (fuzz/fuzz_request.cpp found it).
TEST(JsonNumbers, TinyNumbersRefused) {
    EXPECT_TRUE(json_numbers_representable(R"({"t":0.7,"n":-3,"big":1.7976931348623157e308,"min":5e-324,"z":0e-22,"y":0.0})"));
    EXPECT_FALSE(json_numbers_representable("0e-999"));
    EXPECT_FALSE(json_numbers_representable("0e-23"));
    EXPECT_FALSE(json_numbers_representable("0e23"));
    EXPECT_FALSE(json_numbers_representable("0.00000000000000000000000"));   // 23 zeros
    EXPECT_TRUE(json_numbers_representable("0.0000000000000000000000"));     // 22 zeros
    EXPECT_FALSE(json_numbers_representable("123456789012345678901234567890e300"));
    EXPECT_TRUE(json_numbers_representable(R"({"s":"0.1234567890123456789012345e-330"})"));   // in a string
    EXPECT_TRUE(json_numbers_representable("0.000000000000000000001e-299"));                  // 1e-321
    EXPECT_TRUE(json_numbers_representable("0.0000000000000000000001e-300"));                 // 1e-322, a denormal
    EXPECT_FALSE(json_numbers_representable("0.1234567890123456789012345e-330"));
    EXPECT_FALSE(json_numbers_representable("[1,700000.014360000000007777777777777777736000000078000000000000335144e-367]"));
    EXPECT_FALSE(json_numbers_representable("0.0000000000000000000001e-310"));
    EXPECT_FALSE(json_numbers_representable("1e-99999999999999999999"));
    EXPECT_TRUE(json_numbers_representable("[\"\\\"\", 1e-10]"));
    // Above the largest double (1.7976931348623157e308): infinity, where
    // RapidJSON's rounding asserts (3.769e308 aborted a worker).
    EXPECT_FALSE(json_numbers_representable("3.769e308"));
    EXPECT_FALSE(json_numbers_representable("-3.769e308"));
    EXPECT_FALSE(json_numbers_representable("1.7976931348623158e308"));
    EXPECT_FALSE(json_numbers_representable("1.79769313486231571e308"));
    EXPECT_FALSE(json_numbers_representable("17.976931348623158e307"));
    EXPECT_FALSE(json_numbers_representable("0.0018e311"));
    EXPECT_FALSE(json_numbers_representable("1e309"));
    EXPECT_TRUE(json_numbers_representable("1.7976931348623157e308"));
    EXPECT_TRUE(json_numbers_representable("1.79769313486231570000e308"));
    EXPECT_TRUE(json_numbers_representable("1.7976931348623156e308"));
    EXPECT_TRUE(json_numbers_representable("9.99e307"));
    EXPECT_TRUE(json_numbers_representable("1e308"));
    std::string err;
    EXPECT_EQ(RequestDoc::parse(R"({"model":"m","messages":[],"temperature":0.1234567890123456789012345e-330})", err), nullptr);
    EXPECT_EQ(err, "request body has a number out of the range of a double (a non-zero below 1e-326 or above 1.7976931348623157e308 (the largest double), or a zero written beyond 1e-22 or 1e22, or significant digits beginning 18446744073709551615 then 5 to 9)");
}

TEST(JsonTextDepth, StringsSkippedEscapesCounted) {
    EXPECT_TRUE(json_text_depth_at_most(R"({"a":[[1]]})", 3));
    EXPECT_FALSE(json_text_depth_at_most(R"({"a":[[1]]})", 2));
    EXPECT_TRUE(json_text_depth_at_most(R"(["[[[[", "\"[[[["])", 1));   // brackets in strings, an escaped quote
    EXPECT_FALSE(json_text_depth_at_most(R"(["\\", [[1]]])", 2));       // an escaped backslash ends the string
    EXPECT_TRUE(json_text_depth_at_most(R"(["unterminated [[[)", 1));   // the rest is a string the parser fails
}

// RapidJSON 1.1's full-precision reading keeps the first significant digits
// of a number in 64 bits and rounds up on the next one: digits beginning
// 18446744073709551615 (2^64-1) then 5 to 9 wrap that significand to zero,
// which it then normalizes (clz(0), shifts by 64 or more: undefined
// behaviour); 18446744073709551615.73709551615 read as -2.5e263. Found by
// fuzz_request (the fuzz build had lost -fno-sanitize=builtin, which hid it).
// Refused wherever the point and the exponent put those digits.
TEST(JsonNumbers, SignificandWrappingToZeroRefused) {
    EXPECT_FALSE(json_numbers_representable("18446744073709551615.73709551615"));
    EXPECT_FALSE(json_numbers_representable("18446744073709551615.5"));
    EXPECT_FALSE(json_numbers_representable("-18446744073709551615.9"));
    EXPECT_FALSE(json_numbers_representable("184467440737095516155"));
    EXPECT_FALSE(json_numbers_representable("1.84467440737095516157e-5"));
    EXPECT_FALSE(json_numbers_representable("0.000184467440737095516159"));
    EXPECT_FALSE(json_numbers_representable("[1,{\"t\":1844674407370.95516156e3}]"));
    EXPECT_TRUE(json_numbers_representable("18446744073709551615"));      // an integer RapidJSON keeps in 64 bits
    EXPECT_TRUE(json_numbers_representable("18446744073709551615.4"));    // rounds down: no wrap
    EXPECT_TRUE(json_numbers_representable("18446744073709551614.9"));
    EXPECT_TRUE(json_numbers_representable("18446744073709551616.9"));
    EXPECT_TRUE(json_numbers_representable("1844674407370955161.5"));     // 20 significant digits only
    EXPECT_TRUE(json_numbers_representable(R"({"s":"18446744073709551615.5"})"));
    rapidjson::Document d;
    ASSERT_TRUE(parse_full_precision(d, "18446744073709551615.4"));
    EXPECT_DOUBLE_EQ(d.GetDouble(), 18446744073709551615.4);
    std::string err;
    EXPECT_EQ(RequestDoc::parse(R"({"model":"m","messages":[],"temperature":18446744073709551615.73709551615})", err),
              nullptr);
    EXPECT_FALSE(err.empty());
}
