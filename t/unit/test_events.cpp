// The failure feed's event JSON, the ring, the mirror throttle, the events
// response and its limit parameter.
#include <gtest/gtest.h>

#include <memory>

#include "core/events/event.h"
#include "core/events/ring.h"

namespace llmgw {
namespace {

GatewayEvent sample() {
    GatewayEvent e;
    e.time_ms = 1795630581123;
    e.replica = "r1";
    e.user = "alice";
    e.group = "eng";
    e.model = "oai/gpt-4o";
    e.provider = "oai";
    e.route = "chat/completions";
    e.kind = "upstream";
    e.message = "busy";
    e.status = 503;
    return e;
}

TEST(EventJson, FieldsInOrderEmptyOnesLeftOut) {
    EXPECT_EQ(event_json(sample()),
              R"({"time":"2026-11-25T18:16:21.123Z","replica":"r1","user":"alice","group":"eng","model":"oai/gpt-4o",)"
              R"("provider":"oai","route":"chat/completions","kind":"upstream","message":"busy","status":503})");
    GatewayEvent e;
    e.time_ms = 1000;
    e.replica = "r";
    e.instance = "eu-1";
    e.route = "pricing";
    e.kind = "unpriced";
    e.message = "m";
    EXPECT_EQ(event_json(e), R"({"time":"1970-01-01T00:00:01.000Z","replica":"r","instance":"eu-1","route":"pricing",)"
                             R"("kind":"unpriced","message":"m"})");
}

TEST(EventJson, HostileFieldsStayValidAndBounded) {
    GatewayEvent e = sample();
    e.user = std::string(5000, '\x01');           // escapes to \u0001 each
    e.group = "\xff\xfe bad utf-8";
    e.message = std::string(1000, '"') + "\xe2\x82";   // a cut UTF-8 sequence at the end
    e.model = std::string(300, 'm');
    const std::string j = event_json(e);
    EXPECT_LT(j.size(), kEventMaxBytes);
    EXPECT_TRUE(is_event_object(j));
    EXPECT_EQ(j.find("\xff"), std::string::npos);
    std::string big(10000, '\x02');
    GatewayEvent all = e;
    all.replica = all.instance = all.provider = all.route = all.kind = big;
    const std::string k = event_json(all);
    EXPECT_LT(k.size(), kEventMaxBytes);
    EXPECT_TRUE(is_event_object(k));
}

TEST(EventRing, WrapsAtCapacityNewestFirst) {
    auto ring = std::make_unique<EventRing>();
    ring->clear();
    EXPECT_TRUE(ring->newest(50).empty());
    for (int i = 0; i < 250; ++i) ASSERT_TRUE(ring->push("{\"n\":" + std::to_string(i) + "}"));
    auto got = ring->newest(500);
    ASSERT_EQ(got.size(), kEventCapacity);
    EXPECT_EQ(got.front(), "{\"n\":249}");
    EXPECT_EQ(got.back(), "{\"n\":50}");
    EXPECT_EQ(ring->newest(3).size(), 3u);
    EXPECT_FALSE(ring->push(std::string(EventRing::kSlotBytes + 1, 'x')));
}

TEST(EventRing, MirrorThrottleFiftyPerSecond) {
    auto ring = std::make_unique<EventRing>();
    ring->clear();
    int taken = 0;
    for (int i = 0; i < 80; ++i) taken += ring->take_mirror(100) ? 1 : 0;
    EXPECT_EQ(taken, 50);
    EXPECT_TRUE(ring->take_mirror(101));
}

TEST(EventsResponse, ShapeAndDegraded) {
    EXPECT_EQ(render_events("replica", "r1", {R"({"a":1})", R"({"b":2})"}, false),
              R"({"source":"replica","replica":"r1","events":[{"a":1},{"b":2}],"capacity":200})");
    EXPECT_EQ(render_events("replica", "r1", {}, true),
              R"({"source":"replica","replica":"r1","events":[],"capacity":200,"degraded":true})");
}

TEST(EventsResponse, OnlyObjectsAreEvents) {
    EXPECT_TRUE(is_event_object(R"({"kind":"upstream"})"));
    EXPECT_TRUE(is_event_object(" {}"));
    EXPECT_FALSE(is_event_object("[1]"));
    EXPECT_FALSE(is_event_object("\"text\""));
    EXPECT_FALSE(is_event_object("{\"a\":"));
    EXPECT_FALSE(is_event_object(""));
    EXPECT_FALSE(is_event_object("{} {}"));
}

TEST(EventsLimit, DefaultCapAndRefusals) {
    EXPECT_EQ(events_limit(""), 50);
    EXPECT_EQ(events_limit("1"), 1);
    EXPECT_EQ(events_limit("200"), 200);
    EXPECT_EQ(events_limit("201"), 200);
    EXPECT_EQ(events_limit("99999999999999999999"), 200);
    EXPECT_EQ(events_limit("0"), -1);
    EXPECT_EQ(events_limit("-5"), -1);
    EXPECT_EQ(events_limit("1.5"), -1);
    EXPECT_EQ(events_limit("ten"), -1);
    EXPECT_EQ(events_limit("5%00"), -1);
}

}  // namespace
}  // namespace llmgw
