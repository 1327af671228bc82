-- Bucketed sliding counter.
--
-- KEYS[1]  hash: field = bucket index, value = cost counted in that bucket
-- ARGV     see prelude (limit, window_ms, cost, now_ms), plus
--          ARGV[5] buckets per window
-- Reply    { allowed, remaining, retry_after_ms, reset_after_ms }
--
-- Time t falls in bucket floor(t * B / W). At `now` every bucket holding a
-- millisecond of (now - W, now] counts in full, so the counter never admits
-- more than the exact log. Stale buckets are pruned here; every write sets
-- the key's TTL. Integers stay below 2^53 (t * B < 2^51 for any real time).

local key = KEYS[1]
local buckets = tonumber(ARGV[5])
local now = now_ms()

local function bucket_of(t)
  return math.floor(t * buckets / window)
end

-- First time at which bucket j no longer counts.
local function drop_time(j)
  return math.ceil((j + 1) * window / buckets) + window - 1
end

local first = bucket_of(now - window + 1)
local fields = redis.call('HGETALL', key)
local used = 0
local stale = {}
local kept = {}
for i = 1, #fields, 2 do
  local j = tonumber(fields[i])
  local c = tonumber(fields[i + 1])
  if j < first then
    stale[#stale + 1] = fields[i]
  else
    used = used + c
    kept[#kept + 1] = { j, c }
  end
end
if #stale > 0 then
  redis.call('HDEL', key, unpack(stale))
end

if used + cost <= limit then
  local cur = bucket_of(now)
  redis.call('HINCRBY', key, string.format('%d', cur), cost)
  local newest = cur
  for _, b in ipairs(kept) do
    if b[1] > newest then newest = b[1] end
  end
  local reset = drop_time(newest) - now
  redis.call('PEXPIRE', key, reset + SLACK_MS)
  return { 1, limit - used - cost, 0, reset }
end

table.sort(kept, function(a, b) return a[1] < b[1] end)
local excess = used + cost - limit
local freed = 0
local retry_at = now
for _, b in ipairs(kept) do
  freed = freed + b[2]
  if freed >= excess then
    retry_at = drop_time(b[1])
    break
  end
end
return {
  0,
  nonneg(limit - used),
  nonneg(retry_at - now),
  nonneg(drop_time(kept[#kept][1]) - now),
}
