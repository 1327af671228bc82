-- Concurrency leases: at most `limit` held at once per identity, each
-- until its expiry (its ttl after it was taken or last renewed).
--
-- KEYS     [1] the identity's leases: a sorted set, member = lease id,
--          score = expiry (ms); anything else is an error, never read
-- ARGV     [1] op: "acquire", "release" or "renew"  [2] now_ms ("" =
--          Redis TIME)  [3] TTL slack ms ("" = SLACK_MS); [2] and [3] are
--          read by lib/clock.lua  [4] the lease id  [5] limit  [6] ttl ms
-- Reply    acquire: { allowed (1|0), remaining (the limit less the leases
--          held after), retry_after_ms (a refusal: until the oldest
--          expiry), reset_after_ms (until the newest expiry) };
--          release, renew: { 1 if the lease was held, else 0 }
--
-- Expired leases are dropped first, whatever the op: a killed process's
-- leases come back once their ttl has passed. Taking a lease already held
-- renews it (one lease, not two). Every write sets the key's TTL to the
-- newest expiry plus the slack; a set left empty is deleted.
--
-- Assembled by src/scripts.rs after lib/clock.lua (`now`).

local key, op, id = KEYS[1], ARGV[1], ARGV[4]
local limit, ttl = tonumber(ARGV[5]), tonumber(ARGV[6])
local kind = redis.call('TYPE', key).ok
if kind ~= 'none' and kind ~= 'zset' then
  return redis.error_reply('WRONGTYPE slidegate: key ' .. key .. ' holds a value slidegate did not write, not leases')
end
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
local held = redis.call('ZSCORE', key, id)

local function keep()
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if #newest == 0 then
    redis.call('DEL', key)
    return 0
  end
  local reset = tonumber(newest[2]) - now
  redis.call('PEXPIRE', key, reset + SLACK_MS)
  return reset
end

if op == 'release' then
  if not held then keep() return { 0 } end
  redis.call('ZREM', key, id)
  keep()
  return { 1 }
end
if op == 'renew' then
  if not held then keep() return { 0 } end
  redis.call('ZADD', key, now + ttl, id)
  keep()
  return { 1 }
end
local count = redis.call('ZCARD', key)
if not held and count >= limit then
  local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  local reset = keep()
  return { 0, 0, tonumber(oldest[2]) - now, reset }
end
redis.call('ZADD', key, now + ttl, id)
if not held then count = count + 1 end
local reset = keep()
return { 1, limit - count, 0, reset }
