-- paced.lua — requests.lua at a bounded rate: each connection waits
-- PACE_MS (environment, default 5) before each request, so the offered load
-- is about connections / PACE_MS per millisecond whatever the server does
-- (wrk 4 has no fixed-rate mode; this is the same load for every server of
-- one run). The RESULT line is requests.lua's.
dofile((os.getenv("BENCH_HTTP") or "bench/http") .. "/requests.lua")
local pace = tonumber(os.getenv("PACE_MS") or "5")

function delay()
  return pace
end
