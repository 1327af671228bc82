-- Reservations: an estimate charged as a check charges it, held until it
-- is settled (committed at the real cost, or cancelled) or its ttl passes.
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
-- A reservation is admitted only if its whole estimate fits, whatever the
-- rule (also a budget), and then charged by A.charge at `now`; its receipt
-- is what A.release needs. Settling gives back what the estimate charged
-- beyond the real cost (A.release, exact where the algorithm can be) and
-- records what the real cost asks beyond the estimate whatever remains
-- (A.record, through `charged`). A reservation whose ttl passes is simply
-- forgotten: its estimate stays charged (committed at its estimate).
--
-- Assembled by src/scripts.rs, one script per algorithm, after
-- lib/clock.lua (`now`), lib/shared.lua and the algorithm's file, its
-- table bound to A.

local key, held = KEYS[1], KEYS[2]
local r = {
  limit = tonumber(ARGV[4]),
  window = tonumber(ARGV[5]),
  buckets = tonumber(ARGV[6]),
  field_ttl = ARGV[7] == '1',
}
local cost = tonumber(ARGV[8])

if ARGV[1] == 'reserve' then
  local v = A.eval(key, r, cost, now)
  if not v.fits then return { 0, v.remaining, v.retry, v.reset } end
  local remaining, reset, receipt = A.charge(key, r, cost, now, v)
  local ttl = tonumber(ARGV[9])
  redis.call('SET', held, string.format('%d:%d:%d:%d', now, cost, receipt or 0, now + ttl), 'PX', ttl + SLACK_MS)
  return { 1, remaining, 0, reset }
end

local stored = redis.call('GET', held)
if not stored then return { 0 } end
local at, estimate, receipt, expiry = string.match(stored, '^(%d+):(%d+):(%d+):(%d+)$')
at, estimate, receipt, expiry = tonumber(at), tonumber(estimate), tonumber(receipt), tonumber(expiry)
if not (at and estimate and receipt and expiry) then not_ours(held, 'a reservation') end
redis.call('DEL', held)
if expiry <= now then return { 0 } end
if cost < estimate then A.release(key, r, estimate - cost, at, receipt) end
-- Only a cost beyond the estimate is recorded as a charge (a sliding log's
-- charges take its list layout).
r.charge = cost > estimate
local allowed, remaining, retry, reset, debt = charged(A, key, r, nonneg(cost - estimate), now, A.eval(key, r, 1, now))
return { 1, allowed, remaining, retry, reset, debt }
