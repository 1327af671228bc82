-- Exact sliding log.
--
-- The log of a key holds one entry per admitted unit of cost: its time in
-- ms, oldest first. Two requests of one millisecond are two entries, never
-- one. Admits iff (entries in (now - window, now]) + cost <= limit; the
-- oldest entries leave first. Denied requests add nothing (expired
-- entries are dropped whatever the decision).
--
-- Two layouts of the same log, chosen by the rule's limit:
--   packed (limit <= PACKED_MAX): a string of 6-byte big-endian times, read
--     with one GET and written with one SET .. PX (6 bytes per entry);
--   list (larger limits): a list of times, pushed and trimmed at its ends,
--     O(1) per entry however long the log (rewriting a string copies it
--     all; ~10 bytes per entry).
-- A key found in another layout (a named rule's limit changed across
-- PACKED_MAX, or the sorted set of an older slidegate) is converted, its
-- entries kept.
--
-- Entries stay in time order: a time older than the newest entry (a client
-- clock stepping back) is inserted in its place. The server's clock is
-- taken not to step back (log_fast.lua pushes without looking); if it does
-- (failover to a replica whose clock is behind), a list keeps an expired
-- entry a little longer behind a newer one: it counts more, never less.

local LOG = {}

local PACKED_MAX = 128
local ENTRY = 6
-- Times must fit the 6 bytes of a packed entry (and stay exact in Lua).
local MAX_TIME = 281474976710656

local function pack_time(t)
  if t < 0 or t >= MAX_TIME then
    error('slidegate: time ' .. string.format('%d', t) .. ' ms is outside the log (0 .. 2^48)')
  end
  return struct.pack('>I6', t)
end

-- The times of the log at `key` (layout `kind`, a TYPE answer), sorted.
local function read_times(key, kind)
  local times = {}
  if kind == 'string' then
    local s = redis.call('GET', key)
    for i = 1, #s - ENTRY + 1, ENTRY do
      times[#times + 1] = (struct.unpack('>I6', s, i))
    end
  elseif kind == 'list' then
    for _, t in ipairs(redis.call('LRANGE', key, 0, -1)) do
      times[#times + 1] = tonumber(t)
    end
  elseif kind == 'zset' then
    local flat = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
    for i = 2, #flat, 2 do
      times[#times + 1] = tonumber(flat[i])
    end
  else
    error('slidegate: key ' .. key .. ' holds a ' .. kind .. ', not a sliding log')
  end
  table.sort(times)
  return times
end

-- Appends `times` to list `key` (unpack passes at most ~8000 arguments,
-- so in slices).
local function push_all(key, times)
  for i = 1, #times, 1000 do
    redis.call('RPUSH', key, unpack(times, i, math.min(i + 999, #times)))
  end
end

-- Rewrites the log at `key` in the layout `packed` (true) or list (false),
-- keeping its entries and its TTL.
local function convert(key, packed, window)
  local kind = redis.call('TYPE', key).ok
  local times = read_times(key, kind)
  local ttl = redis.call('PTTL', key)
  if ttl < 1 then ttl = window + SLACK_MS end
  redis.call('DEL', key)
  if #times == 0 then return end
  if packed then
    local parts = {}
    for i, t in ipairs(times) do parts[i] = pack_time(t) end
    redis.call('SET', key, table.concat(parts), 'PX', ttl)
  else
    push_all(key, times)
    redis.call('PEXPIRE', key, ttl)
  end
end

-- A layout: open(key, cutoff, window) -> h, drops the entries up to
-- `cutoff`, h.used = the entries left; at(h, i) -> time of the i-th oldest
-- of them (0-based); newest(h) -> time or nil; add(h, now, count, window)
-- -> reset_ms, adds `count` entries at `now` and sets the TTL;
-- remove(key, t, count) takes back `count` entries at time `t`.
local PACKED, LIST = {}, {}

-- Keys a packed handle has written in this call: a second handle on one
-- key (two rules sharing a state, one check) reads again before writing.
local written = {}

-- Index (0-based) of the first entry of `s` later than `t`.
local function packed_after(s, t)
  local lo, hi = 0, #s / ENTRY
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if struct.unpack('>I6', s, mid * ENTRY + 1) <= t then lo = mid + 1 else hi = mid end
  end
  return lo
end

-- Stores `s` as the packed log at `key`, keeping its TTL (an empty log is
-- no key at all).
local function packed_keep(key, s)
  if #s == 0 then
    redis.call('DEL', key)
  else
    redis.call('SET', key, s, 'KEEPTTL')
  end
end

function PACKED.open(key, cutoff, window)
  local s = redis.pcall('GET', key)
  if type(s) == 'table' then
    convert(key, true, window)
    s = redis.call('GET', key)
  end
  s = s or ''
  local first = packed_after(s, cutoff)
  if first > 0 then
    -- Expired entries go now, whatever the decision (as in the model: a
    -- client clock stepping back later must not see them again).
    s = string.sub(s, first * ENTRY + 1)
    packed_keep(key, s)
  end
  return { key = key, s = s, used = #s / ENTRY, cutoff = cutoff }
end

function PACKED.at(h, i)
  return (struct.unpack('>I6', h.s, i * ENTRY + 1))
end

function PACKED.newest(h)
  if #h.s == 0 then return nil end
  return (struct.unpack('>I6', h.s, #h.s - ENTRY + 1))
end

function PACKED.add(h, now, count, window)
  if written[h.key] then h = PACKED.open(h.key, h.cutoff, window) end
  local s = h.s
  local at = packed_after(s, now)
  local s2 = string.sub(s, 1, at * ENTRY) .. string.rep(pack_time(now), count) .. string.sub(s, at * ENTRY + 1)
  local newest = struct.unpack('>I6', s2, #s2 - ENTRY + 1)
  local reset = newest + window - now
  redis.call('SET', h.key, s2, 'PX', reset + SLACK_MS)
  written[h.key] = true
  return reset
end

function PACKED.remove(key, t, count)
  local s = redis.pcall('GET', key)
  if type(s) ~= 'string' then return end
  local after = packed_after(s, t)
  local from = after
  while from > 0 and after - from < count and struct.unpack('>I6', s, (from - 1) * ENTRY + 1) == t do
    from = from - 1
  end
  if from == after then return end
  packed_keep(key, string.sub(s, 1, from * ENTRY) .. string.sub(s, after * ENTRY + 1))
end

function LIST.open(key, cutoff, window)
  local head = redis.pcall('LINDEX', key, 0)
  if type(head) == 'table' then
    convert(key, false, window)
    head = redis.call('LINDEX', key, 0)
  end
  if head and tonumber(head) <= cutoff then
    -- Count the expired entries after the head in growing slices (one in
    -- the steady state), then trim them all at once.
    local gone, slice = 1, 16
    while true do
      local items = redis.call('LRANGE', key, gone, gone + slice - 1)
      local k = 0
      while k < #items and tonumber(items[k + 1]) <= cutoff do k = k + 1 end
      gone = gone + k
      if k < slice then break end
      slice = slice * 2
    end
    redis.call('LTRIM', key, gone, -1)
  end
  return { key = key, used = redis.call('LLEN', key) }
end

function LIST.at(h, i)
  return tonumber(redis.call('LINDEX', h.key, i))
end

function LIST.newest(h)
  local t = redis.call('LINDEX', h.key, -1)
  if not t then return nil end
  return tonumber(t)
end

function LIST.add(h, now, count, window)
  local newest = LIST.newest(h)
  if newest == nil or newest <= now then
    local times = {}
    for i = 1, count do times[i] = now end
    push_all(h.key, times)
    newest = now
  else
    -- Insert before the oldest entry later than `now`: scan back from the
    -- tail in growing slices for the last entry at or before `now`.
    local later, from, slice = newest, -1, 16
    while true do
      local items = redis.call('LRANGE', h.key, from - slice + 1, from)
      local i = #items
      while i > 0 and tonumber(items[i]) > now do
        later = tonumber(items[i])
        i = i - 1
      end
      if i > 0 or #items < slice then break end
      from, slice = from - slice, slice * 2
    end
    for _ = 1, count do
      redis.call('LINSERT', h.key, 'BEFORE', later, now)
    end
  end
  local reset = newest + window - now
  redis.call('PEXPIRE', h.key, reset + SLACK_MS)
  return reset
end

function LIST.remove(key, t, count)
  if redis.call('TYPE', key).ok == 'list' then
    redis.call('LREM', key, -count, t)
  end
end

local function layout(r)
  if r.limit <= PACKED_MAX then return PACKED end
  return LIST
end

-- Milliseconds until the newest entry of `h` leaves the window (0: empty).
local function newest_leaves(L, h, window, now)
  local newest = L.newest(h)
  if newest == nil then return 0 end
  return nonneg(newest + window - now)
end

function LOG.eval(key, r, cost, now)
  local L = layout(r)
  local h = L.open(key, now - r.window, r.window)
  local used = h.used
  if used + cost <= r.limit then
    return { fits = true, used = used, remaining = r.limit - used, h = h }
  end
  -- The request fits once the `excess`-th oldest entry leaves.
  local excess = used + cost - r.limit
  return {
    fits = false,
    remaining = nonneg(r.limit - used),
    retry = nonneg(L.at(h, excess - 1) + r.window - now),
    reset = newest_leaves(L, h, r.window, now),
  }
end

function LOG.idle(key, r, now, v)
  return newest_leaves(layout(r), v.h, r.window, now)
end

-- The receipt is 1: release.lua takes back `cost` entries at the charge's
-- time (entries of one time are alike, any of them will do).
function LOG.charge(key, r, cost, now, v)
  local reset = layout(r).add(v.h, now, cost, r.window)
  return r.limit - v.used - cost, reset, 1
end

function LOG.release(key, r, now, cost)
  layout(r).remove(key, now, cost)
end
