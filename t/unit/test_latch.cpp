// The store-down latch: closed -> open -> one probe after 5 s -> closed or
// open again; error log throttle; last error retained.
#include <gtest/gtest.h>

#include <cstdint>

#include "core/store/latch.h"

using namespace llmgw;

namespace {
constexpr std::int64_t kT0 = 1'000'000;  // an arbitrary monotonic start
}

TEST(StoreLatch, StartsClosed) {
    StoreLatch l;
    EXPECT_FALSE(l.open());
    EXPECT_FALSE(l.probing());
    EXPECT_FALSE(l.has_error());
    EXPECT_EQ(l.last_error(), "");
    EXPECT_EQ(l.last_error_time_ms(), 0);
    for (int i = 0; i < 5; ++i) EXPECT_TRUE(l.should_try(kT0 + i));
    l.on_success(kT0);
    EXPECT_FALSE(l.open());
}

TEST(StoreLatch, FailureOpensForFiveSeconds) {
    StoreLatch l;
    ASSERT_TRUE(l.should_try(kT0));
    EXPECT_TRUE(l.on_failure(kT0, "connect() failed (111: Connection refused)"));
    EXPECT_TRUE(l.open());
    EXPECT_EQ(l.last_error(), "connect() failed (111: Connection refused)");
    EXPECT_EQ(l.last_error_time_ms(), kT0);
    EXPECT_FALSE(l.should_try(kT0));
    EXPECT_FALSE(l.should_try(kT0 + 1000));
    EXPECT_FALSE(l.should_try(kT0 + 4999));
    EXPECT_FALSE(l.probing());
    // exactly 5 s later: one probe
    EXPECT_TRUE(l.should_try(kT0 + 5000));
    EXPECT_TRUE(l.probing());
    EXPECT_TRUE(l.open());
}

TEST(StoreLatch, ProbeSuccessCloses) {
    StoreLatch l;
    l.on_failure(kT0, "timed out");
    ASSERT_TRUE(l.should_try(kT0 + 6000));
    l.on_success(kT0 + 6010);
    EXPECT_FALSE(l.open());
    EXPECT_FALSE(l.probing());
    EXPECT_TRUE(l.should_try(kT0 + 6011));
    EXPECT_TRUE(l.should_try(kT0 + 6012));
    // the last error and its time are kept after recovery
    EXPECT_TRUE(l.has_error());
    EXPECT_EQ(l.last_error(), "timed out");
    EXPECT_EQ(l.last_error_time_ms(), kT0);
}

TEST(StoreLatch, ProbeFailureReopensForAnotherFiveSeconds) {
    StoreLatch l;
    l.on_failure(kT0, "first");
    ASSERT_TRUE(l.should_try(kT0 + 5000));
    l.on_failure(kT0 + 5100, "second");
    EXPECT_TRUE(l.open());
    EXPECT_FALSE(l.probing());
    EXPECT_EQ(l.last_error(), "second");
    EXPECT_EQ(l.last_error_time_ms(), kT0 + 5100);
    EXPECT_FALSE(l.should_try(kT0 + 5100 + 4999));
    EXPECT_TRUE(l.should_try(kT0 + 5100 + 5000));
    l.on_success(kT0 + 10200);
    EXPECT_FALSE(l.open());
    EXPECT_EQ(l.last_error(), "second");
}

TEST(StoreLatch, OnlyOneProbeInFlight) {
    StoreLatch l;
    l.on_failure(kT0, "down");
    ASSERT_TRUE(l.should_try(kT0 + 5000));
    // other callers while the probe is out: not contacted
    EXPECT_FALSE(l.should_try(kT0 + 5000));
    EXPECT_FALSE(l.should_try(kT0 + 5500));
    EXPECT_FALSE(l.should_try(kT0 + 7000));
    EXPECT_FALSE(l.should_try(kT0 + 20000));
    EXPECT_TRUE(l.probing());
    // the probe's failure ends it; the next probe waits 5 s again
    l.on_failure(kT0 + 7000, "still down");
    EXPECT_FALSE(l.probing());
    EXPECT_FALSE(l.should_try(kT0 + 11999));
    EXPECT_TRUE(l.should_try(kT0 + 12000));
    EXPECT_FALSE(l.should_try(kT0 + 12000));
}

// may_try answers as should_try would, without taking the probe: a caller
// that asks it (an accounting joining a pending batch) leaves the probe to
// the call that will reach the store.
TEST(StoreLatch, MayTryLeavesTheProbe) {
    StoreLatch l;
    EXPECT_TRUE(l.may_try(kT0));
    l.on_failure(kT0, "down");
    EXPECT_FALSE(l.may_try(kT0 + 4999));
    EXPECT_TRUE(l.may_try(kT0 + 5000));
    EXPECT_TRUE(l.may_try(kT0 + 5000));
    EXPECT_FALSE(l.probing()) << "may_try took nothing";
    ASSERT_TRUE(l.should_try(kT0 + 5000)) << "the probe is still there for the call";
    EXPECT_FALSE(l.may_try(kT0 + 5001)) << "while it is out, not for others";
    l.on_success(kT0 + 5002);
    EXPECT_TRUE(l.may_try(kT0 + 5003));
}

TEST(StoreLatch, LostProbeStopsBlockingAfterAWhile) {
    StoreLatch l;
    l.on_failure(kT0, "down");
    ASSERT_TRUE(l.should_try(kT0 + 5000));
    EXPECT_FALSE(l.should_try(kT0 + 5000 + StoreLatch::kProbeStaleMs - 1));
    EXPECT_TRUE(l.should_try(kT0 + 5000 + StoreLatch::kProbeStaleMs));
    EXPECT_FALSE(l.should_try(kT0 + 5000 + StoreLatch::kProbeStaleMs + 1));
}

TEST(StoreLatch, FailuresWhileClosedAndOpen) {
    // operations already in flight when the latch opened fail too: each
    // failure moves the 5 s window
    StoreLatch l;
    l.on_failure(kT0, "a");
    l.on_failure(kT0 + 3000, "b");
    EXPECT_FALSE(l.should_try(kT0 + 5000));
    EXPECT_FALSE(l.should_try(kT0 + 7999));
    EXPECT_TRUE(l.should_try(kT0 + 8000));
    EXPECT_EQ(l.last_error(), "b");
}

TEST(StoreLatch, LogThrottleOncePer30Seconds) {
    StoreLatch l;
    EXPECT_TRUE(l.on_failure(kT0, "e1"));          // first: logged
    EXPECT_FALSE(l.on_failure(kT0 + 1, "e2"));
    EXPECT_FALSE(l.on_failure(kT0 + 5000, "e3"));
    EXPECT_FALSE(l.on_failure(kT0 + 29999, "e4"));
    EXPECT_TRUE(l.on_failure(kT0 + 30000, "e5"));  // 30 s after the last logged one
    EXPECT_FALSE(l.on_failure(kT0 + 30001, "e6"));
    EXPECT_EQ(l.last_error(), "e6");                // every failure is recorded, logged or not

    // recovery does not reset the throttle: a new outage within 30 s of the
    // last log line stays quiet
    l.on_success(kT0 + 40000);
    EXPECT_FALSE(l.on_failure(kT0 + 50000, "e7"));
    EXPECT_TRUE(l.on_failure(kT0 + 60000, "e8"));
}

TEST(StoreLatch, FullCycle) {
    StoreLatch l;
    std::int64_t now = kT0;
    int contacted = 0;
    // store down for 12 s; operations every 100 ms
    const std::int64_t up_at = kT0 + 12000;
    bool probe_out = false;
    std::int64_t probe_done_at = 0;
    int logs = 0;
    for (; now < kT0 + 20000; now += 100) {
        if (probe_out && now >= probe_done_at) {
            probe_out = false;
            if (now >= up_at) {
                l.on_success(now);
            } else if (l.on_failure(now, "down")) {
                ++logs;
            }
        }
        if (!l.should_try(now)) continue;
        ++contacted;
        if (l.open()) {  // a probe: its outcome comes 300 ms later
            probe_out = true;
            probe_done_at = now + 300;
        } else if (now < up_at) {
            if (l.on_failure(now, "down")) ++logs;
        }
    }
    EXPECT_FALSE(l.open());
    EXPECT_EQ(logs, 1);
    // closed operations: kT0 (fails), probes at +5000 (fails at +5300),
    // +10300 (fails at +10600), +15600 (succeeds at +15900), then every
    // 100 ms from +15900 to +19900
    EXPECT_EQ(contacted, 1 + 3 + 41);
}
