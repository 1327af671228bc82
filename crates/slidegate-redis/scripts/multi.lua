-- Many independent single checks in one call: the client's auto-batching
-- (src/auto_batch.rs) sends the checks that callers made while earlier
-- calls were in flight as one script call — one TIME, one command for
-- Redis to parse and one reply, instead of one of each per check. Each
-- check is decided as its single script would decide it (the same fast
-- functions, then the same algorithm code), in order, at the same `now`.
-- A check whose key fails (say, a key of another type) answers its error
-- message, as a string, in its place (not an error reply: clients treat
-- an error anywhere in a reply as the whole call's); the others are
-- unaffected.
--
-- KEYS     the state key of every check (any slots: standalone servers only)
-- ARGV     [1] now_ms ("" = Redis TIME)  [2] per-field hash TTL "1"/"0"
--          [3] the checks, 17 bytes each in KEYS' order, packed big-endian
--          (struct '>BI4I6I4I2'): algorithm (1 log, 2 counter, 3 fixed,
--          4 gcra), limit, window_ms, cost, buckets (one argument instead of
--          five per check, and no strtod: ~15 % of a check, measured)
--          [4] with a client's now_ms: the TTL slack in ms (see prelude.lua)
-- Reply    per check, single.lua's reply (one integer or four), or the
--          error's message (a string)

local FAST = { log_fast, counter_fast }
local server_clock = ARGV[1] == ''
local now
if server_clock then
  local t = redis.call('TIME')
  now = t[1] * 1000 + math.floor(t[2] / 1000)
else
  now = tonumber(ARGV[1])
end
-- 8796093022207 = MAX_TIME of the prelude.
if not now or now < 0 or now > 8796093022207 then
  return redis.error_reply('slidegate: time ' .. tostring(ARGV[1] ~= '' and ARGV[1] or now) .. ' ms is outside 0..8796093022207')
end
-- The TTL slack: SLACK_MS of the prelude (1000), or client-clock mode's.
local slack = server_clock and 1000 or tonumber(ARGV[4])
local field_ttl = ARGV[2] == '1'
-- The log's key TTL as text (see log_fast.lua), once per window and call.
local log_ttls = {}
local function log_ttl(window)
  local ttl = log_ttls[window]
  if ttl == nil then
    ttl = string.format('%d', window + slack)
    log_ttls[window] = ttl
  end
  return ttl
end
-- The algorithm tables and the prelude's decide, from general() (see
-- src/scripts.rs) once a check leaves the fast paths.
local algorithms, decide

local function one(key, code, limit, window, cost, buckets)
  local fast = FAST[code]
  if fast then
    -- A key the fast function cannot read is left to the shared code,
    -- which says what is wrong: log_fast answers nil, counter_fast raises
    -- (before writing anything; pcall only there, see fast_single.lua).
    local ok, reply = true, nil
    if code == 2 then
      ok, reply = pcall(fast, key, limit, window, cost, now, server_clock, buckets, field_ttl, nil, slack)
    else
      reply = fast(key, limit, window, cost, now, server_clock, buckets, field_ttl, log_ttl(window))
    end
    if ok and reply then return reply end
  end
  if not algorithms then algorithms, decide = general(slack) end
  local r = { limit = limit, window = window, buckets = buckets, field_ttl = field_ttl, client_clock = not server_clock }
  return decide(algorithms[code], key, r, cost, now)
end

local checks = ARGV[3]
if #checks ~= 17 * #KEYS then
  return redis.error_reply('multi.lua: ' .. #KEYS .. ' keys but ' .. #checks .. ' bytes of checks')
end
local replies = {}
local at = 1
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
