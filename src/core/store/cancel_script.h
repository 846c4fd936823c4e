// Ops and cancels against a RESP2 store. No nginx, no I/O: this writes the
// cancel command (core/store/resp.h RespWriter).
//
// A call whose reply never came (time-out, connection lost) may still run
// later in the store: Redis runs the commands it has received even when the
// client has gone. Such a call is cancelled: every writing call carries a
// unique op key that the script claims (SET NX) before writing, recording
// what it did ('a' admitted, 'r' rejected, 'w...' accounted). The cancel
// script sets the op key to 'c' (a tombstone: a later run of the call finds
// its key taken and writes nothing) and, when the op had already run,
// undoes its increments (DECRBY of the keys it used that still exist, and
// of an admission's reservations HINCRBY of the fields that still exist).
// Whatever the order in which the store sees the call and its cancel, the
// call ends up counted nowhere in the store, as long as the call arrives
// within op_ttl of the cancel.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/metering/limits.h"
#include "core/store/account_script.h"

namespace llmgw {

// EVAL of the cancel script for an admission op (admit_command_op,
// admit_script.h) or an accounting op (account_command, account_script.h),
// in RESP ("" on failure). Reply: 0 (the op had not run), 1 (its increments
// were undone).
const std::string& cancel_script_source();
std::string cancel_admit_command(const AdmissionPlan& plan, const ReserveAmounts& amounts, std::string_view op_key,
                                 std::int64_t op_ttl, const LeaseTicket* lease = nullptr);
std::string cancel_account_command(const std::vector<Incr>& plain, const std::vector<BoundedIncrs>& groups,
                                   std::string_view op_key, std::int64_t op_ttl);

}  // namespace llmgw
