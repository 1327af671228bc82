-- Bucketed sliding counter.
--
-- key: hash, field = bucket index, value = cost counted in that bucket (a
-- field or value that is no number is an error, never read as a count).
-- Time t falls in bucket floor(t * B / W). At `now` every bucket holding a
-- millisecond of (now - W, now] counts in full, so the counter never admits
-- more than the exact log. Integers stay below 2^53 (t * B < 2^51 for any
-- real time).
--
-- Stale buckets are pruned here, on every server: pruning is what the pure
-- model does, so decisions match it exactly (also when a client clock steps
-- back). On servers with per-field hash TTL (Redis >= 7.4, Valkey >= 9;
-- r.field_ttl, detected by the client) every bucket also carries its own
-- TTL, ending when it stops counting plus the slack, so the server reclaims
-- buckets by itself — the key's TTL then only has to outlive the newest.

local COUNTER = {}

local function bucket_of(t, r)
  return math.floor(t * r.buckets / r.window)
end

-- First time at which bucket j no longer counts.
local function drop_time(j, r)
  return math.ceil((j + 1) * r.window / r.buckets) + r.window - 1
end

function COUNTER.eval(key, r, cost, now)
  local first = bucket_of(now - r.window + 1, r)
  local fields = redis.call('HGETALL', key)
  local used = 0
  local stale = {}
  local kept = {}
  local newest = nil
  for i = 1, #fields, 2 do
    local j = tonumber(fields[i])
    local c = tonumber(fields[i + 1])
    if not (j and c) or c ~= math.floor(c) then not_ours(key, 'a sliding counter') end
    if j < first then
      stale[#stale + 1] = fields[i]
    else
      used = used + c
      kept[#kept + 1] = { j, c }
      if newest == nil or j > newest then newest = j end
    end
  end
  if #stale > 0 then
    redis.call('HDEL', key, unpack(stale))
  end
  if used + cost <= r.limit then
    return { fits = true, used = used, remaining = r.limit - used, newest = newest }
  end

  table.sort(kept, function(a, b) return a[1] < b[1] end)
  local excess = used + cost - r.limit
  local freed = 0
  local retry_at = now
  for _, b in ipairs(kept) do
    freed = freed + b[2]
    if freed >= excess then
      retry_at = drop_time(b[1], r)
      break
    end
  end
  return {
    fits = false,
    used = used,
    newest = newest,
    remaining = nonneg(r.limit - used),
    retry = nonneg(retry_at - now),
    reset = nonneg(drop_time(newest, r) - now),
  }
end

function COUNTER.idle(key, r, now, v)
  if v.newest == nil then return 0 end
  return nonneg(drop_time(v.newest, r) - now)
end

-- A fitting request's charge: as a budget's record (it cannot pass what a
-- bucket holds).
function COUNTER.charge(key, r, cost, now, v)
  local used, reset = COUNTER.record(key, r, cost, now, v)
  return r.limit - used, reset
end

function COUNTER.record(key, r, cost, now, v)
  local cur = bucket_of(now, r)
  local field = string.format('%d', cur)
  local n = redis.call('HINCRBY', key, field, cost)
  if n > MAX_ENTRY then
    redis.call('HSET', key, field, MAX_ENTRY)
    cost = cost - (n - MAX_ENTRY)
  end
  local newest = cur
  if v.newest ~= nil and v.newest > newest then newest = v.newest end
  local reset = drop_time(newest, r) - now
  redis.call('PEXPIRE', key, reset + SLACK_MS)
  -- After the key's TTL and allowed to fail, as in counter_fast.lua.
  if r.field_ttl then
    redis.pcall('HPEXPIRE', key, drop_time(cur, r) - now + SLACK_MS, 'FIELDS', 1, field)
  end
  return v.used + cost, reset
end

-- The charge made at `at` is in bucket_of(at): taken back from it (a
-- bucket emptied by it goes). Counts add, so this is exact.
function COUNTER.release(key, r, cost, at, receipt)
  local field = string.format('%d', bucket_of(at, r))
  if redis.call('HINCRBY', key, field, -cost) <= 0 then
    redis.call('HDEL', key, field)
  end
end
