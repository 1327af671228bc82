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
-- key never vanishes while a charge in it still counts (src/now.rs
-- SLACK_MS). On the client's clock the entry script raises it by the skew
-- the clients' clocks may have (set_slack): TTLs run on the server's clock,
-- decisions on the client's.
local SLACK_MS = 1000

-- The last time (ms) the scripts decide exactly: slidegate::MAX_TIME_MS,
-- 2^43 - 1 (a counter's time * buckets stays below 2^53).
local MAX_TIME = 8796093022207

-- "" = the Redis server's clock (TIME); otherwise the client's time in ms
-- (client-clock mode, trace replay). A time out of range is an error.
local function now_ms(arg)
  local now
  if arg ~= '' then
    now = tonumber(arg)
  else
    local t = redis.call('TIME')
    now = t[1] * 1000 + math.floor(t[2] / 1000)
  end
  if not now or now < 0 or now > MAX_TIME then
    error('slidegate: time ' .. tostring(arg ~= '' and arg or now) .. ' ms is outside 0..' .. MAX_TIME)
  end
  return now
end

-- The slack of client-clock mode (an argument; nil or "" keeps SLACK_MS).
local function set_slack(arg)
  if arg and arg ~= '' then SLACK_MS = tonumber(arg) end
end

-- Raises the error of a key holding a value slidegate did not write, with
-- Redis' own code for a key of the wrong kind: never read as state.
local function not_ours(key, what)
  error({ err = 'WRONGTYPE slidegate: key ' .. key .. ' holds a value slidegate did not write, not ' .. what })
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
