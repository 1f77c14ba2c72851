-- requests.lua — the wrk script of bench/http: POSTs a rotation of realistic
-- decide requests (the files named after `--`, read once per wrk thread)
-- over keep-alive connections; prints one RESULT line with requests/s and the
-- p50/p99/p99.9 latency in microseconds. The bare server gets the same
-- requests (and ignores them).
local reqs = {}
local n = 0

function init(args)
  for _, path in ipairs(args) do
    local f = assert(io.open(path, "r"))
    local body = f:read("*a")
    f:close()
    n = n + 1
    reqs[n] = wrk.format("POST", "/v1/decide", {["Content-Type"] = "application/json"}, body)
  end
  assert(n > 0, "requests.lua: name request files after --")
end

local i = 0

function request()
  i = i % n + 1
  return reqs[i]
end

function done(summary, latency, requests)
  local secs = summary.duration / 1e6
  local bad = summary.errors.status + summary.errors.connect + summary.errors.read +
              summary.errors.write + summary.errors.timeout
  io.write(string.format("RESULT rps=%.0f p50_us=%d p99_us=%d p999_us=%d errors=%d requests=%d\n",
    summary.requests / secs, latency:percentile(50), latency:percentile(99),
    latency:percentile(99.9), bad, summary.requests))
end
