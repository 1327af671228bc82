-- One rule, one key, no penalty: the hot path. `A` is the algorithm's
-- table, bound by src/scripts.rs.
--
-- KEYS[1]  the state key
-- ARGV     [1] the check, packed big-endian (struct '>I4I6I4I2B'): limit,
--          window_ms, cost (1..=limit, checked by the client), buckets (1
--          unless a counter), flags (1: the server has per-field hash
--          TTL) — 17 bytes, read without strtod — then, for the sliding
--          log, its key TTL (window_ms + SLACK_MS) as decimal text, for
--          log_fast.lua (nothing for the other algorithms)
--          [2] now_ms in client-clock mode; absent: the Redis server's TIME
--          (one argument in the common case: each costs Redis ~1,100
--          instructions to parse and hand to Lua, callgrind)
--          [3] with [2]: the TTL slack in ms (SLACK_MS plus the clients'
--          clock skew; see prelude.lua)
-- Reply    { allowed (1|0), remaining, retry_after_ms, reset_after_ms };
--          a fast path's admitted request may instead answer one integer,
--          remaining * (2 * window_ms + 2) + reset_after_ms, when
--          reset_after_ms < 2 * window_ms + 2 (a client clock that stepped
--          back can leave a later entry) and the whole stays below 2^53:
--          Redis answers an integer without building an array (~0.8 µs).

local limit, window, cost, buckets, flags = struct.unpack('>I4I6I4I2B', ARGV[1])
local r = {
  limit = limit,
  window = window,
  buckets = buckets,
  field_ttl = flags % 2 == 1,
  client_clock = ARGV[2] ~= nil,
}
local now = now_ms(ARGV[2] or '')
set_slack(ARGV[3])
return decide(A, KEYS[1], r, cost, now)
