-- One wrk script for every scenario of the benchmark (bench/loadgen.py runs it).
--   wrk ... -s bench/wrk.lua URL -- MODE TOKEN PREFIX RANGE [SIGNATURE]
-- MODE: noop | claim | replay | hot | lookup | cycle | batch | ingest
-- TOKEN: a client bearer token (ingest: the source's ingest id); PREFIX: makes new keys
-- (and event ids) unique to this run; SIGNATURE (ingest): the body's X-Signature;
-- RANGE: how many preloaded keys g-1 .. g-RANGE exist (replay, lookup).
-- `done` prints one line `BENCH_JSON {...}` with the counts per HTTP status, for the harness.

local threads = {}

function setup(thread)
  thread:set("id", #threads + 1)
  table.insert(threads, thread)
end

-- A claim body of about 200 bytes: the same bytes go to the no-op endpoint (the ceiling).
local function claim_body(key)
  return '{"scope":"bench","key":"' .. key .. '","lease_seconds":300,"payload":' ..
    '{"order":"ORD-2026-000042","amount":1250,"currency":"EUR",' ..
    '"customer":"cus_9f8e7d6c5b","note":"bench"}}'
end

function init(args)
  mode, token, prefix = args[1], args[2], args[3]
  range = tonumber(args[4] or "1")
  signature = args[5] or ""
  ingest_body = '{"type":"invoice.paid","payload":' ..
    '{"order":"ORD-2026-000042","amount":1250,"currency":"EUR",' ..
    '"customer":"cus_9f8e7d6c5b","note":"bench"}}'
  counts, queue, n = {}, {}, 0
  math.randomseed(id * 7919 + os.time())
  json_headers = {["Content-Type"] = "application/json",
                  ["Authorization"] = "Bearer " .. token}
end

local function post(path, body)
  return wrk.format("POST", path, json_headers, body)
end

local function next_key()
  n = n + 1
  return prefix .. "-" .. id .. "-" .. n
end

local function batch_body()
  local items = {}
  local base = next_key()
  for i = 1, 1000 do
    items[i] = '{"key":"' .. base .. "-" .. i .. '","fingerprint":"fp-' .. i .. '"}'
  end
  return '{"scope":"bench","items":[' .. table.concat(items, ",") .. ']}'
end

function request()
  if mode == "noop" then
    return post("/bench/noop", claim_body(next_key()))
  elseif mode == "claim" then
    return post("/v1/claim", claim_body(next_key()))
  elseif mode == "replay" then
    return post("/v1/claim", claim_body(string.format("g-%08d", math.random(1, range))))
  elseif mode == "hot" then
    return post("/v1/claim", claim_body(prefix .. "-hot-" .. math.random(1, 100)))
  elseif mode == "lookup" then
    return wrk.format("GET", string.format("/v1/keys?scope=bench&key=g-%08d", math.random(1, range)),
                      json_headers)
  elseif mode == "ingest" then
    -- a provider's delivery: no bearer token, the event id in a header, one signed body
    -- (bench/gateway.py's BODY and SIGNATURE: the signature covers the body only)
    return wrk.format("POST", "/hooks/" .. token,
                      {["Content-Type"] = "application/json", ["X-Event-Id"] = next_key(),
                       ["X-Signature"] = signature}, ingest_body)
  elseif mode == "batch" then
    return post("/v1/claim/batch", batch_body())
  elseif mode == "cycle" then
    -- Complete a record this thread acquired, else claim a new key. The queue keeps the
    -- pairing right although the connections of a thread share this Lua state.
    local held = table.remove(queue)
    if held then
      return post("/v1/complete", '{"scope":"bench","key":"' .. held[1] ..
        '","lease_token":"' .. held[2] ..
        '","state":"succeeded","result":{"resource_id":"inv-1","status_code":201}}')
    end
    return post("/v1/claim", claim_body(next_key()))
  end
end

function response(status, headers, body)
  counts[status] = (counts[status] or 0) + 1
  if mode == "cycle" and status == 201 then
    local token = string.match(body, '"lease_token":"([^"]+)"')
    local key = string.match(body, '"key":"([^"]+)"')
    if token and key then
      table.insert(queue, {key, token})
    end
  end
end

function done(summary, latency, requests)
  local codes = {}
  for _, t in ipairs(threads) do
    for status, c in pairs(t:get("counts")) do
      codes[status] = (codes[status] or 0) + c
    end
  end
  local parts = {}
  for status, c in pairs(codes) do
    table.insert(parts, string.format('"%d":%d', status, c))
  end
  local e = summary.errors
  io.write(string.format(
    'BENCH_JSON {"duration_us":%d,"requests":%d,"bytes":%d,' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"latency_us":{"p50":%d,"p90":%d,"p99":%d,"max":%d,"mean":%.1f},"status":{%s}}\n',
    summary.duration, summary.requests, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
    latency.mean, table.concat(parts, ",")))
end
