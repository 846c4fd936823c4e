// RESP2 codec: replies into RespValue trees, refusals (long/nested arrays,
// garbage), half replies, command formatting.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/store/resp.h"

using namespace llmgw;
using T = RespValue::Type;

namespace {

// Feeds the whole text, then reads every reply until NeedMore or Error.
struct Parsed {
    std::vector<RespValue> replies;
    bool error = false;
    std::string err;
};

Parsed parse_all(const std::string& text, RespReader* reader = nullptr) {
    RespReader own;
    RespReader& r = reader ? *reader : own;
    Parsed p;
    r.feed(text.data(), text.size());
    for (;;) {
        RespValue v;
        std::string err;
        const RespReader::Result res = r.next(v, err);
        if (res == RespReader::Result::NeedMore) break;
        if (res == RespReader::Result::Error) {
            p.error = true;
            p.err = err;
            break;
        }
        p.replies.push_back(std::move(v));
    }
    return p;
}

RespValue one(const std::string& text) {
    Parsed p = parse_all(text);
    EXPECT_FALSE(p.error) << p.err;
    EXPECT_EQ(p.replies.size(), 1u) << text;
    return p.replies.empty() ? RespValue{} : p.replies[0];
}

std::string array_of_ints(std::size_t n) {
    std::string s = "*" + std::to_string(n) + "\r\n";
    for (std::size_t i = 0; i < n; ++i) s += ":" + std::to_string(i) + "\r\n";
    return s;
}

}  // namespace

TEST(Resp, Integers) {
    RespValue v = one(":0\r\n");
    EXPECT_EQ(v.type, T::Integer);
    EXPECT_EQ(v.integer, 0);
    EXPECT_EQ(one(":42\r\n").integer, 42);
    EXPECT_EQ(one(":-7\r\n").integer, -7);
    EXPECT_EQ(one(":9223372036854775807\r\n").integer, 9223372036854775807LL);
    EXPECT_EQ(one(":-9223372036854775808\r\n").integer, (-9223372036854775807LL - 1));
}

TEST(Resp, IntegerOutOfRangeIsProtocolError) {
    Parsed p = parse_all(":9223372036854775808\r\n");
    EXPECT_TRUE(p.error);
    EXPECT_NE(p.err.find("invalid store reply"), std::string::npos) << p.err;
    EXPECT_TRUE(parse_all(":12a\r\n").error);
    EXPECT_TRUE(parse_all(":\r\n").error);
}

TEST(Resp, BulkStrings) {
    RespValue v = one("$5\r\nhello\r\n");
    EXPECT_EQ(v.type, T::String);
    EXPECT_EQ(v.str, "hello");
    RespValue empty = one("$0\r\n\r\n");
    EXPECT_EQ(empty.type, T::String);
    EXPECT_EQ(empty.str, "");
    // binary safe: CR, LF and NUL inside
    RespValue bin = one(std::string("$6\r\na\r\nb\0c\r\n", 12));
    EXPECT_EQ(bin.str, std::string("a\r\nb\0c", 6));
}

TEST(Resp, BulkStringWithoutTrailingCrlfIsRejected) {
    Parsed p = parse_all("$3\r\nabcXY:1\r\n");
    EXPECT_TRUE(p.error);
    EXPECT_NE(p.err.find("CRLF"), std::string::npos) << p.err;
}

TEST(Resp, Nil) {
    EXPECT_EQ(one("$-1\r\n").type, T::Nil);
    EXPECT_EQ(one("*-1\r\n").type, T::Nil);
    EXPECT_TRUE(parse_all("$-2\r\n").error);
}

TEST(Resp, StatusAndError) {
    RespValue ok = one("+OK\r\n");
    EXPECT_EQ(ok.type, T::Status);
    EXPECT_EQ(ok.str, "OK");
    RespValue e = one("-NOSCRIPT No matching script. Please use EVAL.\r\n");
    EXPECT_EQ(e.type, T::Error);
    EXPECT_EQ(e.str, "NOSCRIPT No matching script. Please use EVAL.");
    RespValue empty = one("+\r\n");
    EXPECT_EQ(empty.type, T::Status);
    EXPECT_EQ(empty.str, "");
}

TEST(Resp, Arrays) {
    RespValue a = one("*5\r\n:1\r\n$3\r\nfoo\r\n$-1\r\n+OK\r\n-ERR x\r\n");
    ASSERT_EQ(a.type, T::Array);
    ASSERT_EQ(a.elements.size(), 5u);
    EXPECT_EQ(a.elements[0].type, T::Integer);
    EXPECT_EQ(a.elements[0].integer, 1);
    EXPECT_EQ(a.elements[1].type, T::String);
    EXPECT_EQ(a.elements[1].str, "foo");
    EXPECT_EQ(a.elements[2].type, T::Nil);
    EXPECT_EQ(a.elements[3].type, T::Status);
    EXPECT_EQ(a.elements[4].type, T::Error);
    EXPECT_EQ(a.elements[4].str, "ERR x");

    RespValue empty = one("*0\r\n");
    EXPECT_EQ(empty.type, T::Array);
    EXPECT_TRUE(empty.elements.empty());

    // a nil array inside an array is a Nil element, not a nested array
    RespValue with_nil = one("*2\r\n*-1\r\n:3\r\n");
    ASSERT_EQ(with_nil.elements.size(), 2u);
    EXPECT_EQ(with_nil.elements[0].type, T::Nil);
    EXPECT_EQ(with_nil.elements[1].integer, 3);
}

TEST(Resp, ArrayOf1024IsAccepted) {
    RespValue a = one(array_of_ints(1024));
    ASSERT_EQ(a.type, T::Array);
    ASSERT_EQ(a.elements.size(), 1024u);
    for (std::size_t i = 0; i < a.elements.size(); ++i) EXPECT_EQ(a.elements[i].integer, static_cast<long long>(i));
}

TEST(Resp, ArrayOf1025IsRejectedOnItsHeader) {
    // The header alone is enough: no element is waited for.
    RespReader r;
    const std::string hdr = "*1025\r\n";
    ASSERT_TRUE(r.feed(hdr.data(), hdr.size()));
    RespValue v;
    std::string err;
    EXPECT_EQ(r.next(v, err), RespReader::Result::Error);
    EXPECT_EQ(err, "store reply array too long (1025 > 1024)");
    // dead from now on: the stream is never parsed on
    const std::string more = ":1\r\n";
    EXPECT_FALSE(r.feed(more.data(), more.size()));
    std::string err2;
    EXPECT_EQ(r.next(v, err2), RespReader::Result::Error);
    EXPECT_EQ(err2, err);

    Parsed p = parse_all("*2000\r\n");
    EXPECT_TRUE(p.error);
    EXPECT_EQ(p.err, "store reply array too long (2000 > 1024)");
}

TEST(Resp, NestedArrayIsRejected) {
    Parsed p = parse_all("*2\r\n:1\r\n*1\r\n:2\r\n");
    EXPECT_TRUE(p.error);
    EXPECT_EQ(p.err, "nested array in store reply");
    EXPECT_TRUE(p.replies.empty());
    Parsed empty_nested = parse_all("*1\r\n*0\r\n");
    EXPECT_TRUE(empty_nested.error);
    EXPECT_EQ(empty_nested.err, "nested array in store reply");
    // a reply before the bad one still comes out
    Parsed before = parse_all(":5\r\n*1\r\n*1\r\n:1\r\n");
    ASSERT_EQ(before.replies.size(), 1u);
    EXPECT_EQ(before.replies[0].integer, 5);
    EXPECT_TRUE(before.error);
}

TEST(Resp, Garbage) {
    for (const std::string& bad : std::vector<std::string>{"hello\r\n", "?\r\n", "\r\n", "$abc\r\nxyz\r\n", "*x\r\n", "*-2\r\n",
                                  std::string("\0\0\0", 3)}) {
        Parsed p = parse_all(bad);
        EXPECT_TRUE(p.error) << bad;
        EXPECT_FALSE(p.err.empty());
        EXPECT_TRUE(p.replies.empty());
    }
    // garbage after a good reply: the good one, then the error
    Parsed p = parse_all("+OK\r\n!oops\r\n");
    ASSERT_EQ(p.replies.size(), 1u);
    EXPECT_EQ(p.replies[0].str, "OK");
    EXPECT_TRUE(p.error);
    EXPECT_NE(p.err.find("invalid store reply"), std::string::npos) << p.err;
}

TEST(Resp, HalfRepliesByteByByte) {
    const std::string stream =
        ":12345\r\n$5\r\nhello\r\n$-1\r\n+OK\r\n-ERR bad thing\r\n*3\r\n:1\r\n$2\r\nab\r\n*-1\r\n*0\r\n$0\r\n\r\n";
    RespReader r;
    std::vector<RespValue> got;
    for (char c : stream) {
        ASSERT_TRUE(r.feed(&c, 1));
        for (;;) {
            RespValue v;
            std::string err;
            const RespReader::Result res = r.next(v, err);
            ASSERT_NE(res, RespReader::Result::Error) << err;
            if (res == RespReader::Result::NeedMore) break;
            got.push_back(std::move(v));
        }
    }
    ASSERT_EQ(got.size(), 8u);
    EXPECT_EQ(got[0].integer, 12345);
    EXPECT_EQ(got[1].str, "hello");
    EXPECT_EQ(got[2].type, T::Nil);
    EXPECT_EQ(got[3].type, T::Status);
    EXPECT_EQ(got[4].str, "ERR bad thing");
    ASSERT_EQ(got[5].elements.size(), 3u);
    EXPECT_EQ(got[5].elements[1].str, "ab");
    EXPECT_EQ(got[5].elements[2].type, T::Nil);
    EXPECT_EQ(got[6].type, T::Array);
    EXPECT_TRUE(got[6].elements.empty());
    EXPECT_EQ(got[7].type, T::String);
    EXPECT_EQ(got[7].str, "");
}

TEST(Resp, EveryPrefixOfAReplyNeedsMore) {
    const std::string reply = "*3\r\n:1\r\n$3\r\nfoo\r\n+OK\r\n";
    for (std::size_t cut = 0; cut < reply.size(); ++cut) {
        RespReader r;
        ASSERT_TRUE(r.feed(reply.data(), cut));
        RespValue v;
        std::string err;
        EXPECT_EQ(r.next(v, err), RespReader::Result::NeedMore) << "cut at " << cut;
        ASSERT_TRUE(r.feed(reply.data() + cut, reply.size() - cut));
        EXPECT_EQ(r.next(v, err), RespReader::Result::Reply) << "cut at " << cut;
        EXPECT_EQ(v.elements.size(), 3u);
        EXPECT_EQ(r.next(v, err), RespReader::Result::NeedMore);
    }
}

TEST(Resp, EmptyReaderNeedsMore) {
    RespReader r;
    RespValue v;
    std::string err;
    EXPECT_EQ(r.next(v, err), RespReader::Result::NeedMore);
    EXPECT_TRUE(r.feed("", 0));
    EXPECT_EQ(r.next(v, err), RespReader::Result::NeedMore);
}

TEST(Resp, ManyRepliesInOneFeed) {
    std::string s;
    for (int i = 0; i < 5000; ++i) s += ":" + std::to_string(i) + "\r\n";
    Parsed p = parse_all(s);
    EXPECT_FALSE(p.error);
    ASSERT_EQ(p.replies.size(), 5000u);
    EXPECT_EQ(p.replies[4999].integer, 4999);
}

TEST(Resp, BufferCeiling) {
    RespReader r(64);
    const std::string head = "$100\r\n";
    ASSERT_TRUE(r.feed(head.data(), head.size()));
    const std::string body(80, 'x');
    EXPECT_FALSE(r.feed(body.data(), body.size()));
    RespValue v;
    std::string err;
    EXPECT_EQ(r.next(v, err), RespReader::Result::Error);
    EXPECT_NE(err.find("too large"), std::string::npos) << err;

    // consumed replies do not count against it
    RespReader r2(64);
    for (int i = 0; i < 100; ++i) {
        const std::string one_reply = "$10\r\n0123456789\r\n";
        ASSERT_TRUE(r2.feed(one_reply.data(), one_reply.size())) << i;
        ASSERT_EQ(r2.next(v, err), RespReader::Result::Reply);
        EXPECT_EQ(v.str, "0123456789");
    }
}

TEST(Resp, ReaderIsMovable) {
    RespReader a;
    const std::string part = "$5\r\nhel";
    ASSERT_TRUE(a.feed(part.data(), part.size()));
    RespReader b(std::move(a));
    const std::string rest = "lo\r\n";
    ASSERT_TRUE(b.feed(rest.data(), rest.size()));
    RespValue v;
    std::string err;
    ASSERT_EQ(b.next(v, err), RespReader::Result::Reply);
    EXPECT_EQ(v.str, "hello");
}

TEST(Resp, Command) {
    EXPECT_EQ(resp_command({"PING"}), "*1\r\n$4\r\nPING\r\n");
    EXPECT_EQ(resp_command({"INCRBY", "llmgw:user:alice:req:min:202611211345", "1"}),
              "*3\r\n$6\r\nINCRBY\r\n$37\r\nllmgw:user:alice:req:min:202611211345\r\n$1\r\n1\r\n");
    static const char kBin[] = "*3\r\n$3\r\nSET\r\n$0\r\n\r\n$5\r\na\r\n\0b\r\n";
    EXPECT_EQ(resp_command({"SET", "", std::string("a\r\n\0b", 5)}), std::string(kBin, sizeof kBin - 1));
    EXPECT_EQ(resp_command({}), "");
}

TEST(Resp, CommandsAppendToWhatIsWaiting) {
    std::string out = "*1\r\n$4\r\nPING\r\n";
    const std::string big(123456, 'x');
    ASSERT_TRUE(append_resp_command(out, {"SET", "k", big}));
    EXPECT_EQ(out, "*1\r\n$4\r\nPING\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$123456\r\n" + big + "\r\n");
    const std::string before = out;
    EXPECT_FALSE(append_resp_command(out, {}));
    EXPECT_EQ(out, before);
    // Ten arguments and more: the array's length has two digits.
    std::vector<std::string> argv(12, "a");
    std::string ten;
    ASSERT_TRUE(append_resp_command(ten, argv));
    EXPECT_EQ(ten.substr(0, 5), "*12\r\n");
    EXPECT_EQ(ten.size(), 5u + 12u * 7u);
}

TEST(Resp, CommandRoundTripsThroughTheReader) {
    // A command is an array of bulk strings: the reader reads it back.
    const std::vector<std::string> argv = {"EVALSHA", std::string(40, 'a'), "2", "k1", "k2", "-5"};
    RespValue v = one(resp_command(argv));
    ASSERT_EQ(v.type, T::Array);
    ASSERT_EQ(v.elements.size(), argv.size());
    for (std::size_t i = 0; i < argv.size(); ++i) {
        EXPECT_EQ(v.elements[i].type, T::String);
        EXPECT_EQ(v.elements[i].str, argv[i]);
    }
}

// The writer gives the bytes the argument-list encoder gives, integers in
// decimal (both ends of int64), binary bytes as they are, appended to what
// is waiting.
TEST(Resp, WriterWritesWhatTheEncoderWrites) {
    std::string out = "*1\r\n$4\r\nPING\r\n";
    RespWriter w(out);
    w.command(7);
    w.arg(std::string_view("HINCRBY"));
    w.arg(std::string_view(""));
    w.arg(std::string_view("a\r\n\0b", 5));
    w.arg(std::int64_t{0});
    w.arg(std::int64_t{-42});
    w.arg(INT64_MAX);
    w.arg(INT64_MIN);
    EXPECT_EQ(out, "*1\r\n$4\r\nPING\r\n" + resp_command({"HINCRBY", "", std::string("a\r\n\0b", 5), "0", "-42",
                                                         "9223372036854775807", "-9223372036854775808"}));
    // Twelve arguments: a two-digit count; a big one: a six-digit length.
    std::string many;
    RespWriter m(many);
    m.command(12);
    for (int i = 0; i < 11; ++i) m.arg(std::string_view("a"));
    const std::string big(123456, 'x');
    m.arg(big);
    std::vector<std::string> argv(11, "a");
    argv.push_back(big);
    EXPECT_EQ(many, resp_command(argv));
}

// A reader made for a cluster's topology accepts arrays nested as deep as
// its shape allows, bounded per array and per reply; the default refuses
// any nesting.
TEST(Resp, TopologyShapeAllowsBoundedNesting) {
    const std::string slots =
        "*2\r\n"
        "*3\r\n:0\r\n:5460\r\n*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n$2\r\nid\r\n"
        "*4\r\n:5461\r\n:16383\r\n*2\r\n$0\r\n\r\n:7001\r\n*2\r\n$9\r\n127.0.0.1\r\n:7004\r\n";
    EXPECT_TRUE(parse_all(slots).error);   // the default shape: no nesting
    EXPECT_EQ(parse_all(slots).err, "nested array in store reply");
    RespReader topo(kRespDefaultMaxBuffer, kRespTopologyShape);
    Parsed p = parse_all(slots, &topo);
    ASSERT_FALSE(p.error) << p.err;
    ASSERT_EQ(p.replies.size(), 1u);
    ASSERT_EQ(p.replies[0].elements.size(), 2u);
    EXPECT_EQ(p.replies[0].elements[1].elements[3].elements[1].integer, 7004);
    // Redis 7 adds a fourth level: each node's array of other endpoints
    RespReader seven(kRespDefaultMaxBuffer, kRespTopologyShape);
    p = parse_all("*1\r\n*3\r\n:0\r\n:16383\r\n*4\r\n$9\r\n127.0.0.1\r\n:7000\r\n$2\r\nid\r\n*0\r\n", &seven);
    EXPECT_FALSE(p.error) << p.err;
    // deeper than 4: refused
    RespReader deep(kRespDefaultMaxBuffer, kRespTopologyShape);
    EXPECT_EQ(parse_all("*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n", &deep).err, "nested array in store reply");
    // too many elements in one reply, though each array is short
    RespShape small{3, 10, 12};
    RespReader bounded(kRespDefaultMaxBuffer, small);
    p = parse_all("*3\r\n" + array_of_ints(5) + array_of_ints(5) + array_of_ints(5), &bounded);
    EXPECT_TRUE(p.error);
    EXPECT_EQ(p.err, "store reply has too many elements");
    RespReader bounded2(kRespDefaultMaxBuffer, small);
    EXPECT_EQ(parse_all(array_of_ints(11), &bounded2).err, "store reply array too long (11 > 10)");
    // the count starts again with every reply
    RespReader again(kRespDefaultMaxBuffer, small);
    p = parse_all("*2\r\n" + array_of_ints(4) + array_of_ints(4) + "*2\r\n" + array_of_ints(4) + array_of_ints(4),
                  &again);
    EXPECT_FALSE(p.error) << p.err;
    EXPECT_EQ(p.replies.size(), 2u);
}
