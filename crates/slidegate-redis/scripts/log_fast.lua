-- The sliding log's common case, run before any shared code is defined
-- (defining the prelude's and the algorithm's functions costs about a
-- microsecond per call, measured): an admitted request whose entries are
-- the newest, in a key of its layout (see sliding_log.lua; same layouts,
-- same arithmetic). Anything else — a denial, a client time older than the
-- newest entry, a key in another layout, a list log to prune — is left
-- to the shared code, which decides from scratch (fast_single.lua,
-- multi.lua).
--
-- log_fast(key, limit, window, cost, now, server_clock, buckets, field_ttl,
-- ttl) answers an admitted request with one integer, remaining * (2 *
-- window + 2) + reset_after (see single.lua), reset_after being the window
-- (the new entry is the newest), and anything else with nil. `ttl` is the
-- key's TTL, window + SLACK_MS, as decimal text: numbers go to redis.call
-- as strings, since Redis 7.0 formats a Lua number argument with "%.17g"
-- (glibc's float printing), and the text comes made — from the client for
-- a single script, once per window and call in multi.lua — because
-- string.format here cost ~3,000 instructions per call (callgrind). The
-- signature is counter_fast's (the arguments one does not use are
-- ignored): fast_single.lua and multi.lua call either.

local function log_fast(key, limit, window, cost, now, server_clock, buckets, field_ttl, ttl)
  -- 128 = PACKED_MAX, 6 = ENTRY, 2^48 = MAX_TIME, 1000 = SLACK_MS.
  local m = 2 * window + 2
  if limit <= 128 and now >= 0 and now < 281474976710656 and limit * m < 9007199254740992 then
    local s = redis.pcall('GET', key)
    if type(s) ~= 'table' then
      s = s or ''
      local n = #s / 6
      local first = 0
      if n > 0 and struct.unpack('>I6', s) <= now - window then
        local hi = n
        while first < hi do
          local mid = math.floor((first + hi) / 2)
          if struct.unpack('>I6', s, mid * 6 + 1) <= now - window then first = mid + 1 else hi = mid end
        end
      end
      local used = n - first
      if used + cost <= limit and (n == 0 or struct.unpack('>I6', s, #s - 5) <= now) then
        local entry = struct.pack('>I6', now)
        if cost > 1 then entry = string.rep(entry, cost) end
        if first > 0 then s = string.sub(s, first * 6 + 1) end
        redis.call('SET', key, s .. entry, 'PX', ttl)
        return (limit - used - cost) * m + window
      end
    end
  elseif limit > 128 and now >= 0 and now < 281474976710656 and limit * m < 9007199254740992 then
    -- The list layout (see sliding_log.lua: items '>I6I4I7' of 17 bytes,
    -- time, cost, running total; 2^50 = TOTAL_MAX): a new newest item, or
    -- this millisecond's item grown, when nothing has expired.
    local head = redis.pcall('LINDEX', key, 0)
    if type(head) ~= 'table' and (not head or (#head == 17 and struct.unpack('>I6', head) > now - window)) then
      local used, tail_t, tail_cost, total = 0, nil, 0, 0
      if head then
        local _, head_cost, head_total = struct.unpack('>I6I4I7', head)
        tail_t, tail_cost, total = struct.unpack('>I6I4I7', redis.call('LINDEX', key, -1))
        used = total - head_total + head_cost
      end
      if used + cost <= limit and (tail_t == nil or tail_t <= now) and total + cost < 1125899906842624 then
        if tail_t == now then
          redis.call('LSET', key, -1, struct.pack('>I6I4I7', now, tail_cost + cost, total + cost))
        else
          redis.call('RPUSH', key, struct.pack('>I6I4I7', now, cost, total + cost))
        end
        redis.call('PEXPIRE', key, ttl)
        return (limit - used - cost) * m + window
      end
    end
  end
  return nil
end
