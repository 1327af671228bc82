-- Shared prelude, prepended to every slidegate script (see src/scripts.rs).
-- The algorithm files that follow define one table each (LOG, COUNTER,
-- FIXED, GCRA) with the same three functions, so one main can drive any:
--
--   A.eval(key, r, cost, now)   -> v     reads (and prunes) the state; v.fits
--                                        tells whether `cost` fits; when it
--                                        does not, v.retry and v.reset are set.
--                                        v.remaining is the quota left now.
--   A.charge(key, r, cost, now, v)       charges a fitting request, sets the
--                 -> remaining, reset_ms, receipt   TTL; a receipt (the log's,
--                                        GCRA's) lets release.lua take it back
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
  return t[1] * 1000 + math.floor(t[2] / 1000)
end

local function nonneg(x)
  if x < 0 then return 0 end
  return x
end

-- One request decided from scratch by algorithm table A (single.lua's
-- reply): charged when it fits.
local function decide(A, key, r, cost, now)
  local v = A.eval(key, r, cost, now)
  if v.fits then
    local remaining, reset = A.charge(key, r, cost, now, v)
    return { 1, remaining, 0, reset }
  end
  return { 0, v.remaining, v.retry, v.reset }
end
