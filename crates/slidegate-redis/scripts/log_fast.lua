-- The sliding log's common case, run before any shared code is defined
-- (defining the prelude's and the algorithm's functions costs about a
-- microsecond per call, measured): an admitted request whose entries are
-- the newest, in a key of its layout (see sliding_log.lua; same layouts,
-- same arithmetic). Anything else — a denial, a client time older than the
-- newest entry, a key in another layout, a list log to prune — is left
-- to the shared code, which decides from scratch (fast_single.lua,
-- multi.lua).
--
-- log_fast(key, limit, window, cost, now, server_clock) answers an
-- admitted request with one integer, remaining * (2 * window + 2) +
-- reset_after (see single.lua), reset_after being the window (the new entry
-- is the newest), and anything else with nil. The signature is
-- counter_fast's (the extra arguments are ignored): fast_single.lua and
-- multi.lua call either.

-- Numbers go to redis.call as strings made here: Redis 7.0 formats a Lua
-- number argument with "%.17g" (glibc's float printing; with strtod for
-- ARGV, a fifth of the script's instructions before this, measured with
-- callgrind). One TTL string per window and call, made when a write needs it.
local log_ttls = {}
local function log_ttl(window)
  local ttl = log_ttls[window]
  if ttl == nil then
    ttl = string.format('%d', window + 1000)
    log_ttls[window] = ttl
  end
  return ttl
end

local function log_fast(key, limit, window, cost, now, server_clock)
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
        redis.call('SET', key, s .. entry, 'PX', log_ttl(window))
        return (limit - used - cost) * m + window
      end
    end
  elseif limit > 128 and cost == 1 and server_clock and limit * m < 9007199254740992 then
    local head = redis.pcall('LINDEX', key, 0)
    if type(head) ~= 'table' and (not head or tonumber(head) > now - window) then
      local n = redis.call('RPUSH', key, string.format('%d', now))
      if n <= limit then
        redis.call('PEXPIRE', key, log_ttl(window))
        return (limit - n) * m + window
      end
      redis.call('RPOP', key)
    end
  end
  return nil
end
