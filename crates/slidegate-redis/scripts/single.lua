-- One rule, one key, no penalty: the hot path. `A` is the algorithm's
-- table, bound by src/scripts.rs.
--
-- KEYS[1]  the state key
-- ARGV     [1] the check, packed big-endian (struct '>I4I6I4I2'): limit,
--          window_ms, cost (1..=limit, checked by the client), buckets (1
--          unless a counter) — 16 bytes, read without strtod
--          [2] now_ms ("" = Redis TIME)  [3] per-field TTL "1"/"0"
-- Reply    { allowed (1|0), remaining, retry_after_ms, reset_after_ms };
--          a fast path's admitted request may instead answer one integer,
--          remaining * (2 * window_ms + 2) + reset_after_ms, when
--          reset_after_ms < 2 * window_ms + 2 (a client clock that stepped
--          back can leave a later entry) and the whole stays below 2^53:
--          Redis answers an integer without building an array (~0.8 µs).

local limit, window, cost, buckets = struct.unpack('>I4I6I4I2', ARGV[1])
local r = {
  limit = limit,
  window = window,
  buckets = buckets,
  field_ttl = ARGV[3] == '1',
  client_clock = ARGV[2] ~= '',
}
local now = now_ms(ARGV[2])
return decide(A, KEYS[1], r, cost, now)
