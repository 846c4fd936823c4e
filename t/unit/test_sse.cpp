#include <gtest/gtest.h>

#include "core/codec/sse.h"

using llmgw::SseEvent;
using llmgw::SseParser;

namespace {

std::vector<SseEvent> parse_chunks(const std::vector<std::string>& chunks, SseParser* keep = nullptr) {
    SseParser local;
    SseParser& p = keep ? *keep : local;
    std::vector<SseEvent> out;
    for (const auto& c : chunks) EXPECT_TRUE(p.feed(c, out));
    return out;
}

std::vector<SseEvent> parse_whole(const std::string& s) { return parse_chunks({s}); }

std::vector<SseEvent> parse_bytewise(const std::string& s) {
    std::vector<std::string> chunks;
    for (char c : s) chunks.emplace_back(1, c);
    return parse_chunks(chunks);
}

void expect_same(const std::vector<SseEvent>& a, const std::vector<SseEvent>& b) {
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].event, b[i].event) << i;
        EXPECT_EQ(a[i].data, b[i].data) << i;
        EXPECT_EQ(a[i].lines, b[i].lines) << i;
    }
}

using Lines = std::vector<std::string>;

}  // namespace

TEST(Sse, SingleEventLf) {
    auto ev = parse_whole("data: hello\n\n");
    ASSERT_EQ(ev.size(), 1u);
    EXPECT_EQ(ev[0].data, "hello");
    EXPECT_EQ(ev[0].event, "");
    EXPECT_EQ(ev[0].lines, Lines{"data: hello"});
}

TEST(Sse, LineEndsCrLfCrAndMixed) {
    for (const char* s : {"data: a\r\ndata: b\r\n\r\n", "data: a\rdata: b\r\r", "data: a\ndata: b\r\n\r",
                          "data: a\r\ndata: b\r\n\n", "data: a\rdata: b\n\n"}) {
        auto ev = parse_whole(s);
        ASSERT_EQ(ev.size(), 1u) << s;
        EXPECT_EQ(ev[0].data, "a\nb") << s;
        EXPECT_EQ(ev[0].lines, (Lines{"data: a", "data: b"})) << s;
    }
}

TEST(Sse, CrLfIsOneLineEndNotABlankLine) {
    // "\r\n" once: the event is not dispatched.
    SseParser p;
    std::vector<SseEvent> out;
    ASSERT_TRUE(p.feed("data: a\r\n", out));
    EXPECT_TRUE(out.empty());
    EXPECT_TRUE(p.has_partial());
}

TEST(Sse, CrSplitAcrossFeeds) {
    SseParser p;
    std::vector<SseEvent> out;
    ASSERT_TRUE(p.feed("data: a\r", out));
    EXPECT_TRUE(out.empty());
    ASSERT_TRUE(p.feed("\ndata: b\r", out));
    EXPECT_TRUE(out.empty()) << "CR + LF across feeds must be one line end";
    ASSERT_TRUE(p.feed("", out));  // an empty feed between keeps the pending CR
    ASSERT_TRUE(p.feed("\n\r", out));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].data, "a\nb");
    EXPECT_EQ(out[0].lines, (Lines{"data: a", "data: b"}));
    EXPECT_FALSE(p.has_partial());
    // The CR that ended the blank line is followed by an LF in the next feed.
    ASSERT_TRUE(p.feed("\ndata: c\n\n", out));
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[1].data, "c");
}

TEST(Sse, CrThenCrAcrossFeedsIsBlankLine) {
    SseParser p;
    std::vector<SseEvent> out;
    ASSERT_TRUE(p.feed("data: x\r", out));
    ASSERT_TRUE(p.feed("\r", out));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].data, "x");
}

TEST(Sse, ByteByByteEqualsWholeAndEverySplit) {
    const std::string s =
        ": hello\r\n\r\nevent: delta\ndata: {\"a\":1}\r\ndata:two\r\rid: 7\rretry: 10\ndata\n\n"
        "data: x\r\n\r\n\n\n\r\r\ndata: last\n\r\n: tail\r";
    auto whole = parse_whole(s);
    ASSERT_EQ(whole.size(), 5u);
    expect_same(whole, parse_bytewise(s));
    for (std::size_t cut = 0; cut <= s.size(); ++cut) {
        SCOPED_TRACE(cut);
        expect_same(whole, parse_chunks({s.substr(0, cut), s.substr(cut)}));
    }
}

TEST(Sse, FieldParsing) {
    auto ev = parse_whole("event: delta\ndata: {\"a\":1}\ndata:two\ndata:  three\ndata\nid: 7\nretry: 10\nfoo: bar\n\n");
    ASSERT_EQ(ev.size(), 1u);
    EXPECT_EQ(ev[0].event, "delta");
    EXPECT_EQ(ev[0].data, "{\"a\":1}\ntwo\n three\n");
    EXPECT_EQ(ev[0].lines.size(), 8u);
    EXPECT_EQ(ev[0].lines[3], "data:  three");
    EXPECT_EQ(ev[0].lines[7], "foo: bar");
}

TEST(Sse, EmptyDataThenData) {
    auto ev = parse_whole("data:\ndata: x\n\n");
    ASSERT_EQ(ev.size(), 1u);
    EXPECT_EQ(ev[0].data, "\nx");
    ev = parse_whole("data: x\ndata:\n\n");
    ASSERT_EQ(ev.size(), 1u);
    EXPECT_EQ(ev[0].data, "x\n");
}

TEST(Sse, LastEventFieldWinsAndColonInValue) {
    auto ev = parse_whole("event: a\nevent: b\ndata: http://x:1\n\n");
    ASSERT_EQ(ev.size(), 1u);
    EXPECT_EQ(ev[0].event, "b");
    EXPECT_EQ(ev[0].data, "http://x:1");
}

TEST(Sse, CommentOnlyEventIsDispatched) {
    auto ev = parse_whole(": keep-alive\n\n:\n\n");
    ASSERT_EQ(ev.size(), 2u);
    EXPECT_EQ(ev[0].data, "");
    EXPECT_EQ(ev[0].event, "");
    EXPECT_EQ(ev[0].lines, Lines{": keep-alive"});
    EXPECT_EQ(ev[1].lines, Lines{":"});
}

TEST(Sse, CommentLinesDoNotSetFields) {
    auto ev = parse_whole(":data: no\n: event: no\ndata: yes\n\n");
    ASSERT_EQ(ev.size(), 1u);
    EXPECT_EQ(ev[0].data, "yes");
    EXPECT_EQ(ev[0].event, "");
    EXPECT_EQ(ev[0].lines.size(), 3u);
}

TEST(Sse, BlankLinesWithoutEventDispatchNothing) {
    EXPECT_TRUE(parse_whole("\n\n\r\n\r\r\n").empty());
}

TEST(Sse, UnterminatedEventIsHeld) {
    SseParser p;
    std::vector<SseEvent> out;
    EXPECT_FALSE(p.has_partial());
    ASSERT_TRUE(p.feed("data: a\ndata: b", out));
    EXPECT_TRUE(out.empty());
    EXPECT_EQ(p.pending(), 7u + 7u);
    ASSERT_TRUE(p.feed("c\n", out));
    EXPECT_TRUE(out.empty());
    ASSERT_TRUE(p.feed("\n", out));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].data, "a\nbc");
    EXPECT_EQ(p.pending(), 0u);
    EXPECT_FALSE(p.has_partial());
}

TEST(Sse, ManyEventsInOneFeed) {
    std::string s;
    for (int i = 0; i < 100; ++i) s += "data: " + std::to_string(i) + "\n\n";
    auto ev = parse_whole(s);
    ASSERT_EQ(ev.size(), 100u);
    EXPECT_EQ(ev[42].data, "42");
}

TEST(Sse, OversizeEventFails) {
    {
        SseParser p(10);
        std::vector<SseEvent> out;
        EXPECT_TRUE(p.feed("data: 1234\n\n", out));  // exactly 10 bytes
        EXPECT_EQ(out.size(), 1u);
        EXPECT_TRUE(p.feed("data: 9876\n\n", out));  // the limit is per event
        EXPECT_EQ(out.size(), 2u);
    }
    {
        SseParser p(10);
        std::vector<SseEvent> out;
        EXPECT_FALSE(p.feed("data: 12345\n\n", out));
        EXPECT_TRUE(out.empty());
        EXPECT_FALSE(p.feed("data: 1\n\n", out)) << "unusable after failure";
        EXPECT_TRUE(out.empty());
    }
    {
        SseParser p(10);  // several lines add up
        std::vector<SseEvent> out;
        EXPECT_FALSE(p.feed("data: 1\ndata: 2\n", out));
    }
    {
        SseParser p(10);  // an unterminated line, byte by byte
        std::vector<SseEvent> out;
        std::string s = "data: 1234567890";
        bool ok = true;
        std::size_t fed = 0;
        for (char c : s) {
            ok = p.feed(std::string_view(&c, 1), out);
            if (!ok) break;
            ++fed;
        }
        EXPECT_FALSE(ok);
        EXPECT_EQ(fed, 10u);
        EXPECT_LE(p.pending(), 10u);
    }
}

TEST(Sse, SerializeUsesLf) {
    auto ev = parse_whole("event: x\r\ndata: a\r\n: c\r\n\r\n");
    ASSERT_EQ(ev.size(), 1u);
    EXPECT_EQ(llmgw::sse_serialize(ev[0]), "event: x\ndata: a\n: c\n\n");
}

TEST(Sse, SerializeRoundTrips) {
    const std::string s = "event: e\ndata: 1\ndata:2\n\n: ping\n\ndata: {}\n\n";
    auto ev = parse_whole(s);
    std::string again;
    for (const auto& e : ev) again += llmgw::sse_serialize(e);
    EXPECT_EQ(again, s);
    expect_same(ev, parse_whole(again));
}

TEST(Sse, SerializeBuiltEvent) {
    SseEvent e;
    e.event = "error";
    e.data = "a\nb";
    EXPECT_EQ(llmgw::sse_serialize(e), "event: error\ndata: a\ndata: b\n\n");
    SseEvent d;
    d.data = "{}";
    EXPECT_EQ(llmgw::sse_serialize(d), "data: {}\n\n");
}

TEST(Sse, OpenAiStream) {
    const std::string s =
        "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n"
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3}}\n\n"
        "data: [DONE]\n\n";
    auto ev = parse_bytewise(s);
    ASSERT_EQ(ev.size(), 3u);
    EXPECT_EQ(ev[2].data, "[DONE]");
    expect_same(ev, parse_whole(s));
}
