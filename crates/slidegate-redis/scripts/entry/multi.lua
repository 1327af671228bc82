-- Many independent single checks in one call: the client's auto-batching
-- (src/auto_batch.rs) and explicit batches (src/batch.rs) send them as one
-- script call: one TIME, one command for Redis to parse and one reply,
-- instead of one of each per check. Each check is decided as its single
-- script would decide it (the same fast functions, then the same
-- algorithm code), in order, at the same `now`. A check whose key fails
-- (say, a key of another type) answers its error message, as a string, in
-- its place (not an error reply: clients treat an error anywhere in a
-- reply as the whole call's); the others are unaffected.
--
-- KEYS     the state key of every check (any slots: standalone servers;
--          one slot: a Cluster)
-- ARGV     [1] one flags byte (1: the server has per-field hash TTL),
--          then the checks, 17 bytes each in KEYS' order, packed
--          big-endian (struct '>BI4I6I4I2'): algorithm (1 log, 2 counter,
--          3 fixed, 4 gcra; plus 8 for a budget's charge, recorded
--          whatever remains, as entry/single.lua's flag 2), limit,
--          window_ms, cost, buckets (one argument instead of five per
--          check, and no strtod)
--          [2] now_ms in client-clock mode; absent: the Redis server's TIME
--          [3] with [2]: the TTL slack in ms; [2] and [3] are read by
--          lib/clock.lua
-- Reply    per check, entry/single.lua's reply (one integer, four, or a
--          charge's five), or the error's message (a string)
--
-- Assembled by src/scripts.rs after lib/clock.lua (`now`, `server_clock`)
-- and both fast paths:
-- shared(), which defines the shared code only when a check leaves the
-- fast paths, and answers the algorithm tables (by code) and decide.

local FAST = { log_fast, counter_fast }
local checks = ARGV[1]
local field_ttl = string.byte(checks, 1) == 1
-- The log's key TTL as text (see fast/log.lua), once per window and call.
local log_ttls = {}
local function log_ttl(window)
  local ttl = log_ttls[window]
  if ttl == nil then
    ttl = string.format('%d', window + SLACK_MS)
    log_ttls[window] = ttl
  end
  return ttl
end
-- The algorithm tables, decide and charged, from shared() once a check
-- leaves the fast paths.
local algorithms, decide, charged

local function one(key, code, limit, window, cost, buckets)
  local charge = code > 8
  if charge then code = code - 8 end
  local fast = FAST[code]
  -- A charge of 0 records nothing: the shared code answers it.
  if fast and cost > 0 then
    -- A key the fast function cannot read is left to the shared code,
    -- which says what is wrong: log_fast answers nil, counter_fast raises
    -- (before writing anything; pcall only there, as in entry/single.lua).
    local ok, reply = true, nil
    if code == 2 then
      ok, reply = pcall(fast, key, limit, window, cost, now, server_clock, buckets, field_ttl, nil, charge)
    else
      reply = fast(key, limit, window, cost, now, server_clock, buckets, field_ttl, log_ttl(window), charge)
    end
    if ok and reply then return reply end
  end
  if not algorithms then algorithms, decide, charged = shared() end
  local r = { limit = limit, window = window, buckets = buckets, field_ttl = field_ttl, charge = charge }
  local A = algorithms[code]
  if charge then
    local allowed, remaining, retry, reset, debt = charged(A, key, r, cost, now, A.eval(key, r, 1, now))
    return { allowed, remaining, retry, reset, debt }
  end
  return decide(A, key, r, cost, now)
end

if #checks ~= 1 + 17 * #KEYS then
  return redis.error_reply('multi.lua: ' .. #KEYS .. ' keys but ' .. #checks .. ' bytes of flags and checks')
end
local replies = {}
local at = 2
for i = 1, #KEYS do
  local code, limit, window, cost, buckets
  code, limit, window, cost, buckets, at = struct.unpack('>BI4I6I4I2', checks, at)
  local ok, reply = pcall(one, KEYS[i], code, limit, window, cost, buckets)
  if ok then
    replies[i] = reply
  elseif type(reply) == 'table' and reply.err then
    replies[i] = reply.err
  else
    replies[i] = tostring(reply)
  end
end
return replies
