-- Reservations (lib/reserve.lua): one reservation made or settled.
--
-- KEYS     [1] the state key  [2] the reservation's key (the state key,
--          ":r:" and the reservation's id): a string
--          "<at>:<estimate>:<receipt>:<expiry>" (times in ms on the
--          call's clock), its key TTL the ttl plus the slack; anything
--          else is an error, never read
-- ARGV     [1] op: "reserve", or "settle"  [2] now_ms ("" = Redis
--          TIME)  [3] TTL slack ms ("" = SLACK_MS); [2] and [3] are read
--          by lib/clock.lua  [4] limit  [5] window_ms  [6] buckets (1
--          unless a counter)  [7] "1" when the server has per-field hash
--          TTL  [8] the estimate (reserve, 1..=limit) or the real cost
--          (settle: 0 cancels)  [9] the ttl in ms (reserve)
-- Reply    reserve: { allowed (1|0), remaining, retry_after_ms,
--          reset_after_ms }, a check's;
--          settle: { 0 } when the reservation is not held (settled, its
--          ttl passed, or never made), else { 1, allowed, remaining,
--          retry_after_ms, reset_after_ms, debt } (the state after, as
--          `charged` in lib/shared.lua reports it)
--
-- Assembled by src/scripts.rs, one script per algorithm, after
-- lib/clock.lua (`now`, `server_clock`), the algorithm's fast function
-- (FAST, FAST_RAISES as in entry/single.lua; nil for fixed windows and
-- GCRA), shared() — which defines the shared code and the algorithm's file
-- only when a call needs them, and answers the algorithm's table, decide
-- and charged — and lib/reserve.lua (`reserve_op`); entry/holds.lua runs
-- many such calls at once.

local r = { limit = tonumber(ARGV[4]), window = tonumber(ARGV[5]), buckets = tonumber(ARGV[6]), field_ttl = ARGV[7] == '1' }
local function load()
  local A, _, charged = shared()
  return A, charged
end
return reserve_op(KEYS[1], KEYS[2], ARGV[1] == 'reserve', r, tonumber(ARGV[8]), tonumber(ARGV[9]), FAST, FAST_RAISES, load)
