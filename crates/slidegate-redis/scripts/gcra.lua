-- Generic cell rate algorithm.
--
-- KEYS[1]  string "<tat_ms>:<rem>": theoretical arrival time = tat_ms + rem/limit ms
-- ARGV     see prelude (limit, window_ms, cost, now_ms)
-- Reply    { allowed, remaining, retry_after_ms, reset_after_ms }
--
-- Time ahead of `now` is counted in 1/limit ms so the emission interval
-- window/limit stays exact. The client guarantees limit * window < 2^53.

local key = KEYS[1]
local now = now_ms()
local cap = window * limit

local ahead = 0
local stored = redis.call('GET', key)
if stored then
  local ms, rem = string.match(stored, '^(%d+):(%d+)$')
  ms = tonumber(ms)
  if ms and ms >= now then
    ahead = (ms - now) * limit + tonumber(rem)
  end
end

local function ceil_ms(units)
  return math.ceil(units / limit)
end

local next_ahead = ahead + cost * window
if next_ahead <= cap then
  local whole = math.floor(next_ahead / limit)
  local rem = next_ahead - whole * limit
  redis.call('SET', key, string.format('%d:%d', now + whole, rem), 'PX', ceil_ms(next_ahead) + SLACK_MS)
  return { 1, math.floor((cap - next_ahead) / window), 0, ceil_ms(next_ahead) }
end
return {
  0,
  math.floor(nonneg(cap - ahead) / window),
  ceil_ms(next_ahead - cap),
  ceil_ms(ahead),
}
