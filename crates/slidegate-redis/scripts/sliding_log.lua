-- Exact sliding log.
--
-- KEYS[1]  sorted set: one member per admitted unit of cost, score = time ms
-- ARGV     see prelude (limit, window_ms, cost, now_ms)
-- Reply    { allowed, remaining, retry_after_ms, reset_after_ms }
--
-- Admits iff (units scored in (now - window, +inf)) + cost <= limit. Members
-- are "<ms>:<n>" with n numbering the units of the same millisecond, so
-- requests in one millisecond (from any number of clients) never collapse.
-- Denied requests write nothing.

local key = KEYS[1]
local now = now_ms()

redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
local used = redis.call('ZCARD', key)

if used + cost <= limit then
  -- Units of one millisecond are numbered 0..m-1 (pruning removes whole
  -- milliseconds), so m = ZCOUNT at this score is the next free number.
  local base = redis.call('ZCOUNT', key, now, now)
  local args = {}
  for i = 0, cost - 1 do
    args[#args + 1] = now
    args[#args + 1] = string.format('%d:%d', now, base + i)
    if #args >= 1000 then
      redis.call('ZADD', key, unpack(args))
      args = {}
    end
  end
  if #args > 0 then
    redis.call('ZADD', key, unpack(args))
  end
  local newest = tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
  local reset = newest + window - now
  redis.call('PEXPIRE', key, reset + SLACK_MS)
  return { 1, limit - used - cost, 0, reset }
end

-- The oldest units leave first: the request fits once the `excess`-th leaves.
local excess = used + cost - limit
local freeing = redis.call('ZRANGE', key, excess - 1, excess - 1, 'WITHSCORES')
local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
return {
  0,
  nonneg(limit - used),
  nonneg(tonumber(freeing[2]) + window - now),
  nonneg(tonumber(newest[2]) + window - now),
}
