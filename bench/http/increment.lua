-- wrk script of bench/http_bench.sh: POST .../increment, on one actor or round robin.
--
--   wrk -s increment.lua http://HOST:PORT -- /v1/actors/T/counter/hot          (one actor)
--   wrk -s increment.lua http://HOST:PORT -- /v1/actors/T/counter/rr- 1000     (rr-1..rr-1000)
--
-- With a count, each request goes to the next actor in turn; each wrk thread starts at a
-- different offset so that two threads do not walk the same actors in step. done() prints
-- one machine-readable line (microseconds) after wrk's own report.
wrk.method = "POST"

local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("id", threads)
end

function init(args)
  base = args[1]
  n = tonumber(args[2] or "0")
  i = ((id or 1) - 1) * 487
  if n == 0 then
    fixed = wrk.format(nil, base .. "/increment")
  end
end

function request()
  if fixed then return fixed end
  i = i % n + 1
  return wrk.format(nil, base .. i .. "/increment")
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "WRK_RESULT requests=%d duration_us=%d non2xx=%d connect=%d read=%d write=%d timeout=%d " ..
    "p50_us=%d p90_us=%d p99_us=%d max_us=%d\n",
    summary.requests, summary.duration, e.status, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
