-- The baseline: the ZSET sliding window of the source articles, for
-- comparison only. Its defects are kept on
-- purpose — client timestamps, a member of "<ts>-<random>" made by the
-- client, EXPIRE in seconds — because it is what people copy.
--
-- KEYS[1]  the sorted set
-- ARGV     [1] now ms (client clock)  [2] window ms  [3] limit  [4] member
-- Reply    1 admitted, 0 denied

local key = KEYS[1]
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', key, 0, now - window)
if redis.call('ZCARD', key) < tonumber(ARGV[3]) then
  redis.call('ZADD', key, now, ARGV[4])
  redis.call('EXPIRE', key, math.ceil(window / 1000))
  return 1
end
return 0
