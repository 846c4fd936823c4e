-- wrk script for bench/run's "memory per concurrent stream": one streaming
-- chat completion per connection, held open by the mock's slow SSE endpoint
-- (about 10 s per response). The URL comes from the command line: the
-- gateway's /v1/chat/completions, where the model "slow/gpt-4o-mini" selects
-- the provider "slow", or plain's /slow-v1/chat/completions (the mock
-- ignores the model).
--
-- Run with -t1 -c N: the N connections each send one request at once, so N
-- streams are in flight together. When N responses (BENCH_STREAM_N) have
-- completed, the thread stops (so connections start no second stream) and
-- the file BENCH_STREAM_DONE_FILE is created: wrk's main thread sleeps for the
-- whole -d regardless, so bench/run then ends the run early with SIGINT
-- (wrk still reports, through done()).
wrk.method = "POST"
wrk.headers["Authorization"] = "Bearer sk-bench-key"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "text/event-stream"
wrk.body = '{"model":"slow/gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"Say hello"}]}'

local threads = {}
function setup(thread)
   table.insert(threads, thread)
end

local want = tonumber(os.getenv("BENCH_STREAM_N") or "0") or 0
local done_file = os.getenv("BENCH_STREAM_DONE_FILE")
ok, bad, seen = 0, 0, 0

-- A good response: 200, at least one chat.completion.chunk event, and the
-- stream terminator "data: [DONE]" (so it was relayed to its end).
function response(status, headers, body)
   seen = seen + 1
   if status == 200 and body:find("chat.completion.chunk", 1, true)
      and body:find("data: [DONE]", 1, true) then
      ok = ok + 1
   else
      bad = bad + 1
      if bad <= 3 then
         io.stderr:write(string.format("bench stream: bad response: status %d, body: %s\n",
                                       status, body:sub(1, 300)))
      end
   end
   if want > 0 and seen == want then
      if done_file then
         local f = io.open(done_file, "w")
         if f then f:write(ok, " ", bad, "\n"); f:close() end
      end
      wrk.thread:stop()
   end
end

function done(summary, latency, requests)
   local o, b = 0, 0
   for _, t in ipairs(threads) do
      o = o + (tonumber(t:get("ok")) or 0)
      b = b + (tonumber(t:get("bad")) or 0)
   end
   local e = summary.errors
   -- One machine-readable line; bench/run parses it (latencies in µs).
   io.write(string.format(
      "BENCH_STREAM requests=%d duration_us=%d ok=%d bad=%d p50_us=%.0f max_us=%.0f"
      .. " err_connect=%d err_read=%d err_write=%d err_status=%d err_timeout=%d\n",
      summary.requests, summary.duration, o, b, latency:percentile(50), latency.max,
      e.connect, e.read, e.write, e.status, e.timeout))
end
