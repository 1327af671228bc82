-- The sliding counter's fast path. Must agree with COUNTER (algorithms/
-- sliding_counter.lua): bucket_of, drop_time, the pruning of stale
-- buckets, the per-field TTL when available (tests/model.rs compares
-- both clocks with the model).
--
-- It runs before the shared code is defined, as log_fast (fast/log.lua):
-- an admitted request, on either clock. A denied request answers nil and
-- is left to COUNTER, which decides from scratch and computes retry_after
-- (the stale buckets are gone by then). A field that is no number raises
-- before anything is written, so the callers run it under pcall and leave
-- the key to COUNTER, which says what is wrong.
--
-- counter_fast(key, limit, window, cost, now, server_clock, buckets,
-- field_ttl, ttl, charge): the reply of an admitted request (as
-- log_fast's, whose signature it shares; `ttl` is not used), or nil; with
-- `charge`, only of a charge that leaves something (as log_fast).

local function counter_fast(key, limit, window, cost, now, server_clock, buckets, field_ttl, ttl, charge)
  local first = math.floor((now - window + 1) * buckets / window)
  local fields = redis.call('HGETALL', key)
  -- Strings become numbers by arithmetic, not tonumber(): tonumber runs
  -- strtod twice (lua_isnumber, then lua_tonumber), arithmetic once.
  local used, newest, newest_field, stale = 0, nil, nil, nil
  for i = 1, #fields, 2 do
    local j = fields[i] + 0
    if j < first then
      stale = stale or {}
      stale[#stale + 1] = fields[i]
    else
      used = used + fields[i + 1]
      if newest == nil or j > newest then newest, newest_field = j, fields[i] end
    end
  end
  if stale then
    redis.call('HDEL', key, unpack(stale))
  end
  local room = limit - used
  if room > cost or (room == cost and not charge) then
    local cur = math.floor(now * buckets / window)
    -- The newest bucket's own field name when charging it (most calls):
    -- no string to format.
    local field = newest == cur and newest_field or string.format('%d', cur)
    -- Numbers as strings, as in fast/log.lua.
    redis.call('HINCRBY', key, field, cost == 1 and '1' or string.format('%d', cost))
    -- The key's TTL ends drop_time(newest) + SLACK_MS after the charge
    -- that first filled the newest bucket set it. On the server's clock
    -- (TIME and PEXPIRE share it) a charge to that same bucket would set
    -- the same moment again: skipped, a command saved on most calls.
    local same = server_clock and newest == cur
    if newest == nil or cur > newest then newest = cur end
    local reset = math.ceil((newest + 1) * window / buckets) + window - 1 - now
    if not same then
      redis.call('PEXPIRE', key, string.format('%d', reset + SLACK_MS))
    end
    -- After the key's TTL, and allowed to fail (a failover to a server
    -- without HPEXPIRE): the key is never left without a TTL, and the
    -- pruning above keeps decisions exact without field TTLs.
    -- drop_time(j) = ceil((j + 1) W / B) + W - 1.
    if field_ttl then
      redis.pcall('HPEXPIRE', key, string.format('%d', math.ceil((cur + 1) * window / buckets) + window - 1 - now + SLACK_MS),
        'FIELDS', 1, field)
    end
    local m = 2 * window + 2
    if reset < m and limit * m < 9007199254740992 then
      return (room - cost) * m + reset
    end
    return { 1, room - cost, 0, reset }
  end
  return nil
end
