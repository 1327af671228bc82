-- One rule, one key, no penalty: the hot path. `A` is the algorithm's
-- table, bound by src/scripts.rs.
--
-- KEYS[1]  the state key
-- ARGV     [1] limit  [2] window_ms  [3] cost (1..=limit, checked by the
--          client)  [4] now_ms ("" = Redis TIME)  [5] buckets and
--          [6] per-field TTL "1"/"0" (counter only)
-- Reply    { allowed (1|0), remaining, retry_after_ms, reset_after_ms };
--          a fast path's admitted request may instead answer one integer,
--          remaining * (2 * window_ms + 2) + reset_after_ms, when
--          reset_after_ms < 2 * window_ms + 2 (a client clock that stepped
--          back can leave a later entry) and the whole stays below 2^53:
--          Redis answers an integer without building an array (~0.8 µs).

local r = {
  limit = tonumber(ARGV[1]),
  window = tonumber(ARGV[2]),
  buckets = tonumber(ARGV[5]),
  field_ttl = ARGV[6] == '1',
  client_clock = ARGV[4] ~= '',
}
local cost = tonumber(ARGV[3])
local now = now_ms(ARGV[4])
return decide(A, KEYS[1], r, cost, now)
