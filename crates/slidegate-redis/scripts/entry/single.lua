-- One rule, one key, no penalty: the hot path (a script per algorithm).
--
-- KEYS     [1] the state key
-- ARGV     [1] the check, packed big-endian (struct '>I4I6I4I2B'): limit,
--          window_ms, cost (1..=limit, checked by the client; any for a
--          charge), buckets (1 unless a counter), flags (1: the server has
--          per-field hash TTL, 2: a charge, recorded whatever remains) —
--          17 bytes, read without strtod — then, for the sliding
--          log, its key TTL (window_ms + SLACK_MS) as decimal text, for
--          its fast path (nothing for the other algorithms)
--          [2] now_ms in client-clock mode; absent: the Redis server's
--          TIME (one argument in the common case)
--          [3] with [2]: the TTL slack in ms (SLACK_MS plus the clients'
--          clock skew); [2] and [3] are read by lib/clock.lua
-- Reply    { allowed (1|0), remaining, retry_after_ms, reset_after_ms },
--          and for a charge a fifth, the debt (see `charged` in
--          lib/shared.lua);
--          a fast path's admitted request may instead answer one integer,
--          remaining * (2 * window_ms + 2) + reset_after_ms, when
--          reset_after_ms < 2 * window_ms + 2 (a client clock that stepped
--          back can leave a later entry) and the whole stays below 2^53:
--          Redis answers an integer without building an array.
--
-- Assembled by src/scripts.rs after lib/clock.lua (`now`,
-- `server_clock`) and FAST, the
-- algorithm's fast function or nil, with FAST_RAISES, whether it may
-- raise. The fast path answers first; what it leaves is decided from
-- scratch by the algorithm's table, at the same `now`: the shared code and
-- the algorithm's file, binding it to A, take the place of the line
-- "-- @shared" below, so an answered call defines nothing it does not use.

local check = ARGV[1]
local limit, window, cost, buckets, flags = struct.unpack('>I4I6I4I2B', check)
local field_ttl = flags % 2 == 1
local charge = flags >= 2
-- A charge of 0 records nothing: the shared code answers it.
if FAST and cost > 0 then
  -- Only a fast function that may raise runs under pcall (pcall has a
  -- cost): a key it cannot read is then left to the shared code.
  local ok, reply = true, nil
  if FAST_RAISES then
    ok, reply = pcall(FAST, KEYS[1], limit, window, cost, now, server_clock, buckets, field_ttl, nil, charge)
  else
    reply = FAST(KEYS[1], limit, window, cost, now, server_clock, buckets, field_ttl, string.sub(check, 18), charge)
  end
  if ok and reply then return reply end
end
-- @shared
local r = { limit = limit, window = window, buckets = buckets, field_ttl = field_ttl, charge = charge }
if charge then
  local allowed, remaining, retry, reset, debt = charged(A, KEYS[1], r, cost, now, A.eval(KEYS[1], r, 1, now))
  return { allowed, remaining, retry, reset, debt }
end
return decide(A, KEYS[1], r, cost, now)
