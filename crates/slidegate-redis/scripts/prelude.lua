-- Shared prelude, prepended to every slidegate script (see src/scripts.rs).
-- The algorithm files that follow define one table each (LOG, COUNTER,
-- FIXED, GCRA) with the same three functions, so one main can drive any:
--
--   A.eval(key, r, cost, now)   -> v     reads (and prunes) the state; v.fits
--                                        tells whether `cost` fits; when it
--                                        does not, v.retry and v.reset are set.
--                                        v.remaining is the quota left now.
--   A.charge(key, r, cost, now, v)       charges a fitting request, sets the
--                 -> remaining, reset_ms, receipt   TTL; the receipt (the log's
--                                        first member number) lets release.lua
--                                        take the charge back
--   A.idle(key, r, now, v) -> reset_ms   reset time of a fitting request that
--                                        is *not* charged (another dimension
--                                        of a multi-dimension check denied)
--
-- r = { limit, window (ms), buckets }. Every write sets the key's TTL.

-- Keys live this long past the moment they hold no charge: a margin so a
-- key never vanishes while a charge in it still counts.
local SLACK_MS = 1000

-- "" = the Redis server's clock (TIME); otherwise the client's time in ms
-- (client-clock mode, trace replay).
local function now_ms(arg)
  if arg ~= '' then
    return tonumber(arg)
  end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function nonneg(x)
  if x < 0 then return 0 end
  return x
end

-- Adds `count` members scored `now` to the sorted set `key`, each unique
-- among the set's live members, and returns the receipt release.lua takes
-- the charge back by. Members of one millisecond, from any number of
-- clients, never collapse:
--   * one member when the millisecond has none yet: the member "<now>"
--     (receipt -1) — one ZADD NX, and an integer the set stores compactly;
--   * otherwise "<now>:<n>" for `count` consecutive fresh numbers n from
--     `first` on (receipt: the first number). When the millisecond holds no
--     member yet, every number is free and one ZADD does; otherwise (a busy
--     key, or numbers freed by a release) members are added one by one, and
--     a taken number restarts the run after it, taking back what this call
--     had added.
local function unique_zadd(key, now, first, count)
  if count == 1 and redis.call('ZADD', key, 'NX', now, now) == 1 then
    return -1
  end
  if count > 1 and redis.call('ZCOUNT', key, now, now) == 0 then
    local args = {}
    for i = 0, count - 1 do
      args[#args + 1] = now
      args[#args + 1] = string.format('%d:%d', now, first + i)
      if #args >= 1000 then
        redis.call('ZADD', key, unpack(args))
        args = {}
      end
    end
    if #args > 0 then
      redis.call('ZADD', key, unpack(args))
    end
    return first
  end
  local start, n, added = first, first, {}
  while #added < count do
    local member = string.format('%d:%d', now, n)
    if redis.call('ZADD', key, 'NX', now, member) == 1 then
      added[#added + 1] = member
    else
      for _, mine in ipairs(added) do
        redis.call('ZREM', key, mine)
      end
      added = {}
      start = n + 1
    end
    n = n + 1
  end
  return start
end

-- Milliseconds until the newest member of sorted set `key` leaves a
-- window of `window` ms (0 when empty).
local function newest_leaves(key, window, now)
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if newest[2] == nil then return 0 end
  return nonneg(tonumber(newest[2]) + window - now)
end
