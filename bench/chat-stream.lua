-- wrk script for bench/run: one streamed answer per request (the stream
-- scenarios: plain-stream, gateway-stream, gateway-anthropic-stream). The URL
-- comes from the command line; the body from BENCH_BODY (bench/run sets it
-- for BENCH_PATH: a Responses API request with /v1/responses), else a
-- streamed chat completion.
wrk.method = "POST"
wrk.headers["Authorization"] = "Bearer sk-bench-key"
wrk.headers["Content-Type"] = "application/json"
wrk.body = os.getenv("BENCH_BODY") or '{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"Say hello"}]}'

-- wrk itself counts responses with status >= 400 in errors.status.
-- BENCH_STRICT=1 also counts every non-2xx (1xx/3xx too) in a response()
-- callback; that makes wrk parse each response in Lua, which costs client
-- CPU on a shared box, so it is off by default.
local threads = {}
function setup(thread)
   table.insert(threads, thread)
end

if os.getenv("BENCH_STRICT") == "1" then
   non2xx = 0
   function response(status, headers, body)
      if status < 200 or status > 299 then
         non2xx = non2xx + 1
      end
   end
end

function done(summary, latency, requests)
   local non2xx_total = -1
   if os.getenv("BENCH_STRICT") == "1" then
      non2xx_total = 0
      for _, t in ipairs(threads) do
         non2xx_total = non2xx_total + (tonumber(t:get("non2xx")) or 0)
      end
   end
   local e = summary.errors
   -- One machine-readable line; bench/run parses it (latencies in µs).
   io.write(string.format(
      "BENCH_RESULT requests=%d duration_us=%d bytes=%d p50_us=%.0f p90_us=%.0f p99_us=%.0f mean_us=%.1f max_us=%.0f"
      .. " err_connect=%d err_read=%d err_write=%d err_status=%d err_timeout=%d non2xx=%d\n",
      summary.requests, summary.duration, summary.bytes,
      latency:percentile(50), latency:percentile(90), latency:percentile(99),
      latency.mean, latency.max,
      e.connect, e.read, e.write, e.status, e.timeout, non2xx_total))
end
