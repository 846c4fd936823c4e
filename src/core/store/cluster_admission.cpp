#include "core/store/cluster_admission.h"

#include "core/store/cluster.h"
#include "core/store/resp.h"

namespace llmgw {

namespace {

PlanPart& part_of(SplitPlan& out, std::uint16_t slot, const AdmissionPlan& plan) {
    for (PlanPart& p : out.parts) {
        if (p.slot == slot) return p;
    }
    out.parts.emplace_back();
    PlanPart& p = out.parts.back();
    p.slot = slot;
    p.plan.leased = plan.leased;
    p.plan.reserves_worst_cases = plan.reserves_worst_cases;
    return p;
}

// The rejection counters' bump: INCRBY each key by ARGV[1]; a key the
// increment created gets ARGV[2] seconds.
constexpr char kRejectScript[] =
    "for _, k in ipairs(KEYS) do "
    "if redis.call('INCRBY', k, ARGV[1]) == tonumber(ARGV[1]) then redis.call('EXPIRE', k, ARGV[2]) end "
    "end return #KEYS";

}  // namespace

bool split_plan(const AdmissionPlan& plan, SplitPlan& out, std::string& err) {
    out.parts.clear();
    // Reservations first: a check names its reservation's part index.
    std::vector<std::size_t> reserve_in_part(plan.reserve.size(), 0);
    for (std::size_t j = 0; j < plan.reserve.size(); ++j) {
        PlanPart& p = part_of(out, key_slot(plan.reserve[j].record), plan);
        reserve_in_part[j] = p.plan.reserve.size();
        p.plan.reserve.push_back(plan.reserve[j]);
        p.reserves.push_back(j);
    }
    for (std::size_t i = 0; i < plan.checks.size(); ++i) {
        const Check& c = plan.checks[i];
        if (c.keys.empty()) {
            err = "an admission check names no counter";
            return false;
        }
        const std::uint16_t slot = key_slot(c.keys.front());
        bool one_slot = !c.reserves || key_slot(c.reserved_record) == slot;
        for (const std::string& k : c.keys) one_slot = one_slot && key_slot(k) == slot;
        if (c.reserves && c.reserve_index >= 0) {
            const auto j = static_cast<std::size_t>(c.reserve_index);
            one_slot = one_slot && j < plan.reserve.size() && key_slot(plan.reserve[j].record) == slot;
        }
        if (!one_slot) {
            err = "an admission check's counters are in more than one cluster slot";
            return false;
        }
        PlanPart& p = part_of(out, slot, plan);
        p.plan.checks.push_back(c);
        if (c.reserves && c.reserve_index >= 0) {
            p.plan.checks.back().reserve_index =
                static_cast<int>(reserve_in_part[static_cast<std::size_t>(c.reserve_index)]);
        }
        p.checks.push_back(i);
    }
    for (const Incr& in : plan.admit) part_of(out, key_slot(in.key), plan).plan.admit.push_back(in);
    for (const Incr& in : plan.reject) part_of(out, key_slot(in.key), plan).plan.reject.push_back(in);
    return true;
}

LeaseTicket part_ticket(const LeaseTicket& ticket, const PlanPart& part) {
    LeaseTicket t;
    t.parts.reserve(part.reserves.size());
    for (const std::size_t j : part.reserves) {
        t.parts.push_back(j < ticket.parts.size() ? ticket.parts[j] : LeasePart{});
    }
    return t;
}

AdmissionResult merge_part_results(const AdmissionPlan& plan, const SplitPlan& split,
                                   const std::vector<AdmissionResult>& results) {
    AdmissionResult out;
    const std::size_t n = plan.checks.size();
    out.used.assign(n, 0);
    out.held.assign(n, 0);
    bool used_known = true, held_known = true;
    std::size_t refusing = n;
    for (std::size_t k = 0; k < split.parts.size() && k < results.size(); ++k) {
        const PlanPart& p = split.parts[k];
        if (!p.sent()) continue;
        const AdmissionResult& r = results[k];
        if (r.used.size() != p.checks.size()) used_known = false;
        if (r.held.size() != p.checks.size()) held_known = false;
        for (std::size_t i = 0; i < p.checks.size(); ++i) {
            if (used_known && i < r.used.size()) out.used[p.checks[i]] = r.used[i];
            if (held_known && i < r.held.size()) out.held[p.checks[i]] = r.held[i];
        }
        if (!r.admitted && r.check_index >= 0 && static_cast<std::size_t>(r.check_index) < p.checks.size()) {
            const std::size_t i = p.checks[static_cast<std::size_t>(r.check_index)];
            if (i < refusing) refusing = i;
        }
    }
    if (!used_known) out.used.clear();
    if (!held_known) out.held.clear();
    if (refusing < n) {
        const Check& c = plan.checks[refusing];
        out.admitted = false;
        out.kind = c.kind;
        out.retry_after = c.retry_after;
        out.message = c.message;
        out.check_index = static_cast<int>(refusing);
    }
    return out;
}

bool append_reject_command(std::string& out, const std::vector<Incr>& rejects) {
    if (rejects.empty()) return false;
    const std::size_t mark = out.size();
    try {
        RespWriter w(out);
        w.command(3 + rejects.size() + 2);
        w.arg(std::string_view("EVAL"));
        w.arg(std::string_view(kRejectScript));
        w.arg(static_cast<std::int64_t>(rejects.size()));
        for (const Incr& in : rejects) w.arg(in.key);
        w.arg(rejects.front().delta);
        w.arg(rejects.front().ttl);
        return true;
    } catch (...) {
        out.resize(mark);
        return false;
    }
}

}  // namespace llmgw
