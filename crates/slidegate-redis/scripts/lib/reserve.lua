-- Reservations: an estimate charged as a check charges it, held until it
-- is settled (committed at the real cost, or cancelled) or its ttl passes.
-- The reservation's own key (the state key, ":r:" and its id) is a string
-- "<at>:<estimate>:<receipt>:<expiry>" (times in ms on the call's clock;
-- the receipt a number, or GCRA's "<tat_ms>:<rem>"),
-- its key TTL the ttl plus the slack; anything else is an error, never
-- read.
--
-- reserve_op(key, held, reserving, r, cost, ttl, fast, fast_raises, load)
-- reserves `cost` for `ttl` ms (`reserving`) or settles at `cost`, on the
-- state `key` of rule `r` and the reservation's key `held`, and answers
-- entry/reserve.lua's reply. `fast` is the algorithm's fast function (or
-- nil) and `fast_raises` whether it may raise; load() answers the
-- algorithm's table and `charged`, defining the shared code on first use.
--
-- A reservation is admitted only if its whole estimate fits, whatever the
-- rule (also a budget), and then charged as a check charges it at `now`:
-- by the fast function when it answers (its receipt is then 1: the sliding
-- log's, and the counter reads none), else by A.charge, whose receipt is
-- what A.release needs (GCRA's is A.receipt, for A.give_back). Settling
-- gives back what the estimate charged beyond the real cost (A.release or
-- A.give_back, exact where the algorithm can be) and
-- records what the real cost asks beyond the estimate whatever remains
-- (A.record, through `charged`). A reservation whose ttl passes is simply
-- forgotten: its estimate stays charged (committed at its estimate).
--
-- After lib/clock.lua (`now`, `server_clock`, SLACK_MS).

local function reserve_op(key, held, reserving, r, cost, ttl, fast, fast_raises, load)
  if reserving then
    local reply, receipt = nil, 1
    if fast then
      local ok = true
      if fast_raises then
        ok, reply = pcall(fast, key, r.limit, r.window, cost, now, server_clock, r.buckets, r.field_ttl, nil, false)
      else
        local log_ttl = string.format('%d', r.window + SLACK_MS)
        reply = fast(key, r.limit, r.window, cost, now, server_clock, r.buckets, r.field_ttl, log_ttl, false)
      end
      if not ok then reply = nil end
    end
    if not reply then
      local A = load()
      local v = A.eval(key, r, cost, now)
      if not v.fits then return { 0, v.remaining, v.retry, v.reset } end
      local remaining, reset, charged_receipt = A.charge(key, r, cost, now, v)
      reply, receipt = { 1, remaining, 0, reset }, charged_receipt or 0
      if A.receipt then receipt = A.receipt(key) end
    end
    redis.call('SET', held, string.format('%d:%d:%s:%d', now, cost, receipt, now + ttl), 'PX', ttl + SLACK_MS)
    return reply
  end
  local stored = redis.call('GET', held)
  if not stored then return { 0 } end
  local at, estimate, receipt, expiry = string.match(stored, '^(%d+):(%d+):([%d:]*):(%d+)$')
  at, estimate, expiry = tonumber(at), tonumber(estimate), tonumber(expiry)
  if not (at and estimate and expiry) then
    error({ err = 'WRONGTYPE slidegate: key ' .. held .. ' holds a value slidegate did not write, not a reservation' })
  end
  redis.call('DEL', held)
  if expiry <= now then return { 0 } end
  local A, charged = load()
  if cost < estimate then
    if A.give_back then
      A.give_back(key, r, estimate - cost, at, receipt)
    else
      A.release(key, r, estimate - cost, at, tonumber(receipt) or 0)
    end
  end
  -- Only a cost beyond the estimate is recorded as a charge (a sliding
  -- log's charges take its list layout).
  r.charge = cost > estimate
  local v = A.eval(key, r, 1, now)
  local allowed, remaining, retry, reset, debt = charged(A, key, r, math.max(0, cost - estimate), now, v)
  return { 1, allowed, remaining, retry, reset, debt }
end
