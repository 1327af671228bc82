-- The shared code of the algorithms, after lib/clock.lua (src/scripts.rs
-- assembles the scripts). The algorithm files that follow define one table
-- each (LOG, COUNTER, FIXED, GCRA) with the same four functions, so one
-- entry script can drive any:
--
--   A.eval(key, r, cost, now) -> v    reads (and prunes) the state; v.fits
--                                     tells whether `cost` fits; when it
--                                     does not, v.retry and v.reset are
--                                     set. v.remaining is the quota left.
--   A.charge(key, r, cost, now, v)    charges a fitting request and sets
--     -> remaining, reset_ms, receipt the TTL; the receipt is what
--                                     A.release needs (0: nothing)
--   A.idle(key, r, now, v) -> reset   the reset time of a fitting request
--                                     that is *not* charged (another
--                                     dimension of the request denied)
--   A.record(key, r, cost, now, v)    records `cost` (> 0) whatever v says
--     -> used, reset_ms               (a charge, see `charged` below) and
--                                     sets the TTL: the cost now counted
--   A.release(key, r, cost, at, receipt)
--                                     takes back a charge of `cost` made
--                                     at time `at` (entry/release.lua),
--                                     or leaves it when that could hand
--                                     out capacity nobody released
--
-- r = { limit, window (ms), buckets, field_ttl, client_clock, charge }.
-- With r.charge (a charge: a budget's check, Limiter::charge) A.eval
-- leaves in v what A.record needs whether or not the cost fits, and
-- v.used, the cost counted. Every write sets the key's TTL (now + what
-- the state needs + SLACK_MS).

-- Raises the error of a key holding a value slidegate did not write, with
-- Redis' own code for a key of the wrong kind: never read as state.
local function not_ours(key, what)
  error({ err = 'WRONGTYPE slidegate: key ' .. key .. ' holds a value slidegate did not write, not ' .. what })
end

local function nonneg(x)
  if x < 0 then return 0 end
  return x
end

-- One request decided from scratch by algorithm table A (the reply of
-- entry/single.lua): charged when it fits.
local function decide(A, key, r, cost, now)
  local v = A.eval(key, r, cost, now)
  if v.fits then
    local remaining, reset = A.charge(key, r, cost, now, v)
    return { 1, remaining, 0, reset }
  end
  return { 0, v.remaining, v.retry, v.reset }
end

-- The most a one-millisecond log item, a counter bucket or a fixed window
-- counts (u32): a charge beyond it is recorded up to it, as in the model.
local MAX_ENTRY = 4294967295

-- A charge of `cost` recorded whatever remains, by algorithm table A at
-- `now`, where `v` is A.eval at weight 1 (with r.charge): allowed (1 when
-- something was left before it, what a budget's check answers), remaining,
-- retry_after_ms (until a request of weight 1 fits), reset_after_ms, debt
-- (how far past the limit the cost now counted is).
local function charged(A, key, r, cost, now, v)
  local used, reset = v.used, nil
  if cost > 0 then
    used, reset = A.record(key, r, cost, now, v)
  elseif v.fits then
    reset = A.idle(key, r, now, v)
  else
    reset = v.reset
  end
  local retry = 0
  if used >= r.limit then retry = A.eval(key, r, 1, now).retry end
  local allowed = 0
  if v.fits then allowed = 1 end
  return allowed, nonneg(r.limit - used), retry, reset, nonneg(used - r.limit)
end
