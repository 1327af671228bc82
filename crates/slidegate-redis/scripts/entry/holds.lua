-- Many lease and reservation ops in one call: the client's auto-batching
-- (src/auto_batch.rs) sends them together as entry/multi.lua sends
-- checks — one TIME, one command for Redis to parse and one reply, instead
-- of one of each per op. Each op is done as its own script would do it
-- (entry/lease.lua, entry/reserve.lua: the same functions), in order, at
-- the same `now`. An op whose key fails answers its error message, as a
-- string, in its place; the others are unaffected.
--
-- KEYS     per op, in order: a lease op's key (the identity's leases), or
--          a reservation op's two (the state key, the reservation's key)
-- ARGV     [1] one flags byte (1: the server has per-field hash TTL), then
--          the ops, packed big-endian: a code (1 acquire, 2 release, 3
--          renew a lease; 4 reserve, 5 settle), then for a lease op
--          '>c32I4I6': the lease id, limit, ttl_ms; for a reservation op
--          '>BI4I6I2I4I6': algorithm (1 log, 2 counter, 3 fixed, 4 gcra),
--          limit, window_ms, buckets, the estimate or the real cost, ttl_ms
--          [2] now_ms in client-clock mode; absent: the Redis server's TIME
--          [3] with [2]: the TTL slack in ms; [2] and [3] are read by
--          lib/clock.lua
-- Reply    per op, its own script's reply, or the error's message (a string)
--
-- Assembled by src/scripts.rs after lib/clock.lua (`now`, `server_clock`),
-- both fast paths, lib/lease.lua (`lease_op`), shared() (every algorithm
-- table, defined only when an op needs one) and lib/reserve.lua
-- (`reserve_op`).

local LEASE_OPS = { 'acquire', 'release', 'renew' }
local FAST = { log_fast, counter_fast }
local ops = ARGV[1]
local field_ttl = string.byte(ops, 1) == 1
local algorithms, charged
local function table_of(code)
  return function()
    if not algorithms then
      local _
      algorithms, _, charged = shared()
    end
    return algorithms[code], charged
  end
end

-- The ops' keys counted first (a lease op's record is 43 bytes with its
-- code, a reservation op's 24): a call that does not add up does nothing.
local keys, scan = 0, 2
while scan <= #ops do
  if string.byte(ops, scan) <= 3 then
    keys, scan = keys + 1, scan + 43
  else
    keys, scan = keys + 2, scan + 24
  end
end
if keys ~= #KEYS or scan ~= #ops + 1 then
  return redis.error_reply('holds.lua: ' .. #KEYS .. ' keys but ' .. #ops .. ' bytes of flags and ops')
end

local replies = {}
local at, k = 2, 1
while at <= #ops do
  local code, ok, reply
  code, at = struct.unpack('>B', ops, at)
  if code <= 3 then
    local id, limit, ttl
    id, limit, ttl, at = struct.unpack('>c32I4I6', ops, at)
    ok, reply = pcall(lease_op, KEYS[k], LEASE_OPS[code], id, limit, ttl)
    k = k + 1
  else
    local algorithm, limit, window, buckets, cost, ttl
    algorithm, limit, window, buckets, cost, ttl, at = struct.unpack('>BI4I6I2I4I6', ops, at)
    local r = { limit = limit, window = window, buckets = buckets, field_ttl = field_ttl }
    ok, reply = pcall(reserve_op, KEYS[k], KEYS[k + 1], code == 4, r, cost, ttl, FAST[algorithm], algorithm == 2,
      table_of(algorithm))
    k = k + 2
  end
  if ok then
    replies[#replies + 1] = reply
  elseif type(reply) == 'table' and reply.err then
    replies[#replies + 1] = reply.err
  else
    replies[#replies + 1] = tostring(reply)
  end
end
return replies
