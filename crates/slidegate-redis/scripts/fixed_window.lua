-- Fixed window aligned to multiples of the window length.
--
-- KEYS[1]  hash: w = window index, n = cost counted in it
-- ARGV     see prelude (limit, window_ms, cost, now_ms)
-- Reply    { allowed, remaining, retry_after_ms, reset_after_ms }
--
-- A clock stepping back into an earlier window keeps the later count.

local key = KEYS[1]
local now = now_ms()
local cur = math.floor(now / window)

local state = redis.call('HMGET', key, 'w', 'n')
local w = tonumber(state[1])
local n = tonumber(state[2]) or 0
if w == nil or cur > w then
  w = cur
  n = 0
end
local ends = (w + 1) * window - now

if n + cost <= limit then
  redis.call('HSET', key, 'w', string.format('%d', w), 'n', n + cost)
  redis.call('PEXPIRE', key, ends + SLACK_MS)
  return { 1, limit - n - cost, 0, ends }
end
return { 0, nonneg(limit - n), ends, ends }
