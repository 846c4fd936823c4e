// A request held while the store answers.
#pragma once
#include <functional>

#include "ngx/ngx_incl.h"
#include "ngx/request/ctx.h"

namespace llmgw {

// Asks the store on behalf of a request. ask(answered) starts the store
// operation; its completion stores what it learnt and calls answered()
// (once, inline or later). Answered inline: returns finish(). Otherwise the
// request is held (r->main->count) and NGX_DONE returned; when the answer
// comes, Resume::RunPhases runs the phases again (the phase handler calls
// finish itself), Resume::Finalize finalizes the request with finish().
enum class Resume { RunPhases, Finalize };
ngx_int_t await_store(ngx_http_request_t* r, RequestCtx* ctx, Resume how,
                      const std::function<void(std::function<void()> answered)>& ask,
                      std::function<ngx_int_t()> finish);

}  // namespace llmgw
