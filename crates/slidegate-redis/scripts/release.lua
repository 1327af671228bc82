-- Takes back charges made by check.lua: used when a multi-dimension check
-- spans Cluster slots, one slot's dimensions were charged, and another
-- slot denied. Preceded by the prelude and sliding_log.lua (src/scripts.rs).
--
-- KEYS     per dimension i, [i] the state key
-- ARGV     [1] now_ms the charge was made at (check.lua's last reply value)
--          [2] cost  [3] D, then per dimension 5 values from 3 + 5(i-1) + 1:
--          algorithm (1 log, 2 counter, 3 fixed, 4 gcra), limit, window_ms,
--          buckets, receipt
-- Reply    { D } (the number of dimensions released; an array like every
--          slidegate script's reply)

local now = tonumber(ARGV[1])
local cost = tonumber(ARGV[2])
local count = tonumber(ARGV[3])

-- GCRA is not additive: a charge to a bucket ahead of its own time adds
-- its cost, but one to an idle bucket starts from its time, so a later
-- charge (or another release) may already have absorbed part of ours, and
-- taking it all back could hand out capacity nobody released (found by
-- review: a release after an idle gap over-admitted). So the charge is
-- taken back only when the key still holds exactly what it left — its
-- charge count (`receipt`) unchanged, so nothing touched it since — which
-- undoes it exactly. Otherwise it stays, drains within cost * window /
-- limit ms, and errs on the side of the limit, never over-admits.
local function release_gcra(key, limit, window, receipt)
  local stored = redis.call('GET', key)
  if not stored or receipt < 1 then return end
  local ms, rem, seq = string.match(stored, '^(%d+):(%d+):(%d+)$')
  ms, rem, seq = tonumber(ms), tonumber(rem), tonumber(seq)
  if not ms or seq ~= receipt or ms < now then return end
  -- What the key held at the charge's time, before it: exact (both terms
  -- are at most limit * window < 2^53, as the charge left them).
  local before = (ms - now) * limit + rem - cost * window
  if before < 0 then return end
  local whole = math.floor(before / limit)
  local ttl = redis.call('PTTL', key)
  if ttl < 1 then ttl = 1 end
  redis.call('SET', key, string.format('%d:%d:%d', now + whole, before - whole * limit, seq + 1), 'PX', ttl)
end

for i = 1, count do
  local o = 3 + 5 * (i - 1)
  local algorithm = tonumber(ARGV[o + 1])
  local limit = tonumber(ARGV[o + 2])
  local window = tonumber(ARGV[o + 3])
  local buckets = tonumber(ARGV[o + 4])
  local receipt = tonumber(ARGV[o + 5])
  local key = KEYS[i]
  if algorithm == 1 then
    -- `cost` entries at the charge's time (see LOG.release).
    if receipt ~= 0 then
      LOG.release(key, { limit = limit, window = window }, now, cost)
    end
  elseif algorithm == 2 then
    local field = string.format('%d', math.floor(now * buckets / window))
    if redis.call('HINCRBY', key, field, -cost) <= 0 then
      redis.call('HDEL', key, field)
    end
  elseif algorithm == 3 then
    local w = tonumber(redis.call('HGET', key, 'w'))
    if w == math.floor(now / window) then
      redis.call('HINCRBY', key, 'n', -cost)
    end
  else
    release_gcra(key, limit, window, receipt)
  end
end
return { count }
