// Admission on a Redis Cluster (docs/store.md#redis-cluster). No nginx, no
// I/O. A script may only touch the keys of one slot, and in the cluster
// layout (core/metering/keys.h) each scope is a slot of its own, so a plan
// runs as one admission script call per slot (its checks, increments and
// reservations), all sent at once. The request is admitted when every part
// admits it. When a part refuses, the parts that admitted are cancelled (the
// op cancel, core/store/cancel_script.h, undoes their increments and
// reservations) and the parts that did not refuse count the rejection
// (reject_command): the store ends as one atomic script would have left it,
// the spec's rollback rule. The refusal reported is the plan's first
// refusing check, so precedence is the plan's.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/metering/lease.h"
#include "core/metering/limits.h"

namespace llmgw {

// One slot's part of a plan.
struct PlanPart {
    std::uint16_t slot = 0;
    AdmissionPlan plan;                   // its checks, admit, reject and reserve (reserve_index renumbered)
    std::vector<std::size_t> checks;      // part check i is the plan's checks[i]
    std::vector<std::size_t> reserves;    // part reservation i is the plan's reserve[i]
    // Sent at admission: it has a check, an admit increment or a
    // reservation. The others only count a rejection.
    bool sent() const { return !plan.checks.empty() || !plan.admit.empty() || !plan.reserve.empty(); }
};

struct SplitPlan {
    std::vector<PlanPart> parts;          // in the order their slots first appear in the plan
};

// Splits plan by the slots of its keys (core/store/cluster.h key_slot).
// false with err a sentence when one check's keys (or its reserved record)
// lie in more than one slot, which the cluster layout never makes.
bool split_plan(const AdmissionPlan& plan, SplitPlan& out, std::string& err);

// The part's share of a request's lease ticket (its reservations' parts).
LeaseTicket part_ticket(const LeaseTicket& ticket, const PlanPart& part);

// The parts' results (results[i] is parts[i]'s, decoded with its own plan;
// ignored for a part not sent) as one result over plan: admitted when every
// sent part admitted; otherwise refused by the first refusing check in plan
// order. used and held per plan check (empty when a part's are).
AdmissionResult merge_part_results(const AdmissionPlan& plan, const SplitPlan& split,
                                   const std::vector<AdmissionResult>& results);

// The rejection counters of one part (reject increments of one slot, which
// share their delta and TTL), bumped with the admission script's TTL rule
// (a counter's TTL is set when the increment created it), as one EVAL;
// false (out unchanged) when there is none or memory ran out.
bool append_reject_command(std::string& out, const std::vector<Incr>& rejects);

}  // namespace llmgw
