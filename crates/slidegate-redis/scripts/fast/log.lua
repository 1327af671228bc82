-- The sliding log's fast path. Must agree with LOG (algorithms/
-- sliding_log.lua): the same layouts and the same arithmetic, for the
-- case it answers (tests/model.rs compares both clocks with the model).
--
-- It runs before the shared code is defined (entry/single.lua,
-- entry/multi.lua): an admitted request whose entries are the newest, in
-- a key of its layout. Anything else (a denial, a client time older than
-- the newest entry, a key in another layout, a list log to prune) answers
-- nil and is left to LOG, which decides from scratch. It never raises,
-- and writes nothing before it answers nil.
--
-- log_fast(key, limit, window, cost, now, server_clock, buckets, field_ttl,
-- ttl, charge) answers an admitted request with one integer, remaining * (2 *
-- window + 2) + reset_after (entry/single.lua's reply), reset_after being
-- the window (the new entry is the newest). `now` is within 0..MAX_TIME.
-- `ttl` is the key's TTL, window + SLACK_MS, as decimal text: numbers go
-- to redis.call as strings (Redis 7.0 formats a Lua number argument with
-- "%.17g"), and the text comes made (from the client for a single check,
-- once per window and call in multi.lua), since formatting it here is the
-- costliest step left (docs/benchmark-notes.md). The signature is
-- counter_fast's (the arguments one does not use are ignored).

-- With `charge` (a budget's charge, recorded whatever remains) it answers
-- only a charge that leaves something: then it is an admitted check's
-- (the charge's debt 0, its retry_after 0); LOG.record takes the others.
local function log_fast(key, limit, window, cost, now, server_clock, buckets, field_ttl, ttl, charge)
  -- 128 = PACKED_MAX, 6 = ENTRY.
  local m = 2 * window + 2
  if limit * m >= 9007199254740992 then return nil end
  if limit <= 128 then
    local s = redis.pcall('GET', key)
    if type(s) ~= 'table' then
      if s and #s % 6 ~= 0 then return nil end
      s = s or ''
      local n = #s / 6
      local oldest, newest = 0, 0
      if n > 0 then
        oldest, newest = struct.unpack('>I6', s), struct.unpack('>I6', s, #s - 5)
      end
      -- In order up to now (otherwise a client clock stepped back, or the
      -- value is no log).
      if oldest > newest or newest > now then return nil end
      local first = 0
      if n > 0 and oldest <= now - window then
        local hi = n
        while first < hi do
          local mid = math.floor((first + hi) / 2)
          if struct.unpack('>I6', s, mid * 6 + 1) <= now - window then first = mid + 1 else hi = mid end
        end
      end
      local used = n - first
      if used + cost > limit or (charge and used + cost == limit) then return nil end
      local entry = struct.pack('>I6', now)
      if cost > 1 then entry = string.rep(entry, cost) end
      if first > 0 then s = string.sub(s, first * 6 + 1) end
      redis.call('SET', key, s .. entry, 'PX', ttl)
      return (limit - used - cost) * m + window
    end
    -- Not a string: a list log of a limit that was above 128 (it stays a
    -- list while it holds charges), read below like any list.
  end
  -- The list layout (LIST of sliding_log.lua: items '>I6I4I7' of 17 bytes,
  -- time, cost, running total; 2^50 = TOTAL_MAX): a new newest item, or
  -- this millisecond's item grown, when nothing has expired.
  local head = redis.pcall('LINDEX', key, 0)
  if type(head) == 'table' or (head and (#head ~= 17 or struct.unpack('>I6', head) <= now - window)) then
    return nil
  end
  local used, tail_t, tail_cost, total = 0, nil, 0, 0
  if head then
    local _, head_cost, head_total = struct.unpack('>I6I4I7', head)
    local tail = redis.call('LINDEX', key, -1)
    if #tail ~= 17 then return nil end
    tail_t, tail_cost, total = struct.unpack('>I6I4I7', tail)
    used = total - head_total + head_cost
  end
  if used + cost > limit or (charge and used + cost == limit) or (tail_t and tail_t > now)
    or total + cost >= 1125899906842624 then
    return nil
  end
  if tail_t == now then
    redis.call('LSET', key, -1, struct.pack('>I6I4I7', now, tail_cost + cost, total + cost))
  else
    redis.call('RPUSH', key, struct.pack('>I6I4I7', now, cost, total + cost))
  end
  redis.call('PEXPIRE', key, ttl)
  return (limit - used - cost) * m + window
end
