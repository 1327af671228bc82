-- Takes back charges made by check.lua: used when a multi-dimension check
-- spans Cluster slots, one slot's dimensions were charged, and another
-- slot denied. Preceded by the prelude and sliding_log.lua (src/scripts.rs).
--
-- KEYS     per dimension i, [i] the state key
-- ARGV     [1] now_ms the charge was made at (check.lua's last reply value)
--          [2] now_ms of this release ("" = Redis TIME)
--          [3] cost  [4] D, then per dimension 5 values from 4 + 5(i-1) + 1:
--          algorithm (1 log, 2 counter, 3 fixed, 4 gcra), limit, window_ms,
--          buckets, receipt
-- Reply    { D } (the number of dimensions released; an array like every
--          slidegate script's reply)

local now = tonumber(ARGV[1])
local released_at = now_ms(ARGV[2])
local cost = tonumber(ARGV[3])
local count = tonumber(ARGV[4])

-- GCRA: the key held `before` (time ahead of `now`, in 1/limit ms) when the
-- charge added cost * window to it. Taking that back is exact only while
-- no later charge could have been absorbed by an idle bucket — in GCRA a
-- charge to a bucket ahead of its own time adds its cost, but one to an
-- idle bucket starts from its time, so part of ours may already be gone:
--   * nothing charged since (the key holds what the charge left, and its
--     time was still ahead at the release, so no charge after an idle gap
--     can look the same): back to `before`;
--   * the bucket was ahead of the release time even without our charge:
--     every later charge added its full cost, so subtract ours;
--   * otherwise keep it: it errs on the side of the limit (a charge kept
--     until it drains), never over-admits.
local function release_gcra(key, limit, window, receipt)
  local stored = redis.call('GET', key)
  if not stored or receipt < 1 then return end
  local ms, rem = string.match(stored, '^(%d+):(%d+)$')
  ms, rem = tonumber(ms), tonumber(rem)
  if not ms or ms < now then return end
  local before = receipt - 1
  local charged = before + cost * window
  local held = (ms - now) * limit + rem
  local passed = (released_at - now) * limit
  local ahead
  if held == charged and passed < charged then
    ahead = before
  elseif before >= passed then
    ahead = held - cost * window
  else
    return
  end
  local whole = math.floor(ahead / limit)
  local ttl = redis.call('PTTL', key)
  if ttl < 1 then ttl = 1 end
  redis.call('SET', key, string.format('%d:%d', now + whole, ahead - whole * limit), 'PX', ttl)
end

for i = 1, count do
  local o = 4 + 5 * (i - 1)
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
