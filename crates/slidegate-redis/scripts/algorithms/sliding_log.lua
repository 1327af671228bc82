-- Exact sliding log.
--
-- The log of a key holds every admitted request: its time in ms and its
-- cost, oldest first. Two requests of one millisecond are both counted,
-- never collapsed into one. Admits iff (cost in (now - window, now]) +
-- cost <= limit; the oldest charges leave first. Denied requests add
-- nothing (expired entries are dropped whatever the decision).
--
-- Two layouts of the same log:
--   packed (new keys of rules with limit <= PACKED_MAX, but for charges):
--     a string of
--     6-byte big-endian times, one per admitted unit of cost, read with
--     one GET and written with one SET .. PX (6 bytes per unit);
--   list (larger limits): a list of items, one per request (requests of
--     one millisecond share one), each its time, its cost and the running
--     total of cost (see ITEM): the cost in the window is a difference of
--     two totals, so a request costs O(1) however large its cost or the
--     log — pushed and trimmed at the ends (rewriting a string copies it
--     all); ~20 bytes per item.
-- A packed log whose rule's limit rises past PACKED_MAX, or that is
-- charged (a charge may take it past its limit, see LOG.record), becomes
-- a list, every entry kept. A list becomes packed again only once it holds no
-- charge: it keeps every charge still in the window, also when the limit
-- falls back (adaptive limits, a named rule changed) and rises again
-- within the window, so no charge is ever forgotten. Decisions are the
-- same in either layout, whatever the limit.
--
-- Entries stay in time order: a time older than the newest entry (a client
-- clock stepping back) is inserted in its place. A value slidegate did not
-- write (wrong type, a string that is no whole number of entries, times out
-- of order or out of range, list items of another size) is an error, never
-- read as a log.

local LOG = {}

local PACKED_MAX = 128
local ENTRY = 6

-- A list item: time (6 bytes), cost (4), running total of cost (7) up to
-- and including this item, big-endian. Totals restart from the oldest item
-- (renumber) before they leave the 2^53 that doubles hold exactly.
local ITEM = '>I6I4I7'
local ITEM_LEN = 17
local TOTAL_MAX = 1125899906842624

local function foreign(key)
  not_ours(key, 'a sliding log')
end

local function pack_time(t)
  return struct.pack('>I6', t)
end

local function pack_item(t, cost, total)
  return struct.pack(ITEM, t, cost, total)
end

-- time, cost, total of a list item.
local function unpack_item(s)
  local t, cost, total = struct.unpack(ITEM, s)
  return t, cost, total
end

-- Raises unless `s` reads as a packed log: whole entries, the oldest no
-- later than the newest, the newest within MAX_TIME. (Entries between are
-- not read: a check reads only the few it needs.)
local function check_packed(key, s)
  if #s % ENTRY ~= 0 then foreign(key) end
  if #s > 0 then
    local oldest = struct.unpack('>I6', s)
    local newest = struct.unpack('>I6', s, #s - ENTRY + 1)
    if oldest > newest or newest > MAX_TIME then foreign(key) end
  end
end

-- Raises unless `item` reads as a list item.
local function check_item(key, item)
  if #item ~= ITEM_LEN or struct.unpack('>I6', item) > MAX_TIME then foreign(key) end
end

-- Appends `items` to list `key` (unpack passes at most ~8000 arguments,
-- so in slices).
local function push_all(key, items)
  for i = 1, #items, 1000 do
    redis.call('RPUSH', key, unpack(items, i, math.min(i + 999, #items)))
  end
end

-- Keys whose layout or content a handle changed in this call: a second
-- handle on one key (two rules sharing a state in one multi-dimension
-- check) reads again before writing.
local written = {}

-- Rewrites the packed log `s` at `key` as a list, every entry kept (runs
-- of one time become one item), keeping its TTL.
local function to_list(key, s, window)
  local ttl = redis.call('PTTL', key)
  if ttl < 1 then ttl = window + SLACK_MS end
  redis.call('DEL', key)
  written[key] = true
  local items, total, i = {}, 0, 1
  while i <= #s do
    local t = struct.unpack('>I6', s, i)
    local n = 1
    while i + n * ENTRY <= #s and struct.unpack('>I6', s, i + n * ENTRY) == t do n = n + 1 end
    total = total + n
    items[#items + 1] = pack_item(t, n, total)
    i = i + n * ENTRY
  end
  if #items > 0 then
    push_all(key, items)
    redis.call('PEXPIRE', key, ttl)
  end
end

-- A layout: open(key, cutoff, window, limit) -> h, drops the entries up to
-- `cutoff`, h.used = the cost left; at(h, i) -> time of the i-th oldest
-- unit of it (0-based); newest(h) -> time or nil; add(h, now, cost,
-- window) -> reset_ms, records `cost` at `now` and sets the TTL;
-- remove(key, t, cost) takes back `cost` recorded at time `t`.
local PACKED, LIST = {}, {}

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

-- nil when `key` holds a list: a list log stays a list (see above).
function PACKED.open(key, cutoff, window, limit)
  local s = redis.pcall('GET', key)
  if type(s) == 'table' then
    if redis.call('TYPE', key).ok == 'list' then return nil end
    foreign(key)
  end
  s = s or ''
  check_packed(key, s)
  local first = packed_after(s, cutoff)
  if first > 0 then
    -- Expired entries go now, whatever the decision (as in the model: a
    -- client clock stepping back later must not see them again).
    s = string.sub(s, first * ENTRY + 1)
    packed_keep(key, s)
  end
  return { key = key, s = s, used = #s / ENTRY, cutoff = cutoff, limit = limit }
end

function PACKED.at(h, i)
  return (struct.unpack('>I6', h.s, i * ENTRY + 1))
end

function PACKED.newest(h)
  if #h.s == 0 then return nil end
  return (struct.unpack('>I6', h.s, #h.s - ENTRY + 1))
end

function PACKED.add(h, now, count, window)
  if written[h.key] then
    local again = PACKED.open(h.key, h.cutoff, window, h.limit)
    if not again then return LIST.add(LIST.open(h.key, h.cutoff, window), now, count, window) end
    h = again
  end
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

-- The items of list `key` later than `t`, oldest first (scanned back from
-- the tail in growing slices; few unless a client clock stepped back).
local function items_after(key, t)
  local found, from, slice = {}, -1, 16
  while true do
    local items = redis.call('LRANGE', key, from - slice + 1, from)
    local i = #items
    while i > 0 and struct.unpack(ITEM, items[i]) > t do
      found[#found + 1] = items[i]
      i = i - 1
    end
    if i > 0 or #items < slice then break end
    from, slice = from - slice, slice * 2
  end
  local later = {}
  for i = #found, 1, -1 do later[#later + 1] = found[i] end
  return later
end

-- Pushes `items` after list `key` was cut back, their totals moved by
-- `delta`, and restores the TTL `ttl` (a list cut to nothing is deleted).
local function push_shifted(key, first, items, delta, ttl)
  local out = {}
  if first then out[1] = first end
  for _, s in ipairs(items) do
    local t, c, total = unpack_item(s)
    out[#out + 1] = pack_item(t, c, total + delta)
  end
  if #out > 0 then
    push_all(key, out)
    redis.call('PEXPIRE', key, ttl)
  end
end

-- Restarts the running totals of list `key` from its oldest item.
local function renumber(key)
  local items = redis.call('LRANGE', key, 0, -1)
  local _, c, total = unpack_item(items[1])
  -- The caller sets the TTL again right after.
  local ttl = math.max(redis.call('PTTL', key), 1)
  redis.call('DEL', key)
  push_shifted(key, nil, items, c - total, ttl)
end

function LIST.open(key, cutoff, window)
  local head = redis.pcall('LINDEX', key, 0)
  if type(head) == 'table' then
    -- A packed log of a rule whose limit rose past PACKED_MAX.
    local s = redis.pcall('GET', key)
    if type(s) ~= 'string' then foreign(key) end
    check_packed(key, s)
    to_list(key, s, window)
    head = redis.call('LINDEX', key, 0)
  end
  if not head then return { key = key, used = 0, len = 0 } end
  check_item(key, head)
  if struct.unpack(ITEM, head) <= cutoff then
    -- Count the expired items after the head in growing slices (one in
    -- the steady state), then trim them all at once.
    local gone, slice, first = 1, 16, nil
    while true do
      local items = redis.call('LRANGE', key, gone, gone + slice - 1)
      local k = 0
      while k < #items and struct.unpack(ITEM, items[k + 1]) <= cutoff do k = k + 1 end
      gone = gone + k
      if k < #items then first = items[k + 1] end
      if first or #items < slice then break end
      slice = slice * 2
    end
    if not first then
      redis.call('DEL', key)
      return { key = key, used = 0, len = 0 }
    end
    redis.call('LTRIM', key, gone, -1)
    head = first
  end
  local len = redis.call('LLEN', key)
  local _, head_cost, head_total = unpack_item(head)
  local base = head_total - head_cost
  local tail = len == 1 and head or redis.call('LINDEX', key, -1)
  check_item(key, tail)
  local _, _, tail_total = unpack_item(tail)
  return { key = key, used = tail_total - base, len = len, base = base }
end

-- Time of the i-th oldest unit: the oldest item whose total passes
-- base + i (binary search; an item of cost 1 each is found at once).
function LIST.at(h, i)
  local target = h.base + i + 1
  local lo, hi = 0, h.len - 1
  if i < h.len then
    local t, _, total = unpack_item(redis.call('LINDEX', h.key, i))
    if total == target then return t end
    hi = i
  end
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    local _, _, total = unpack_item(redis.call('LINDEX', h.key, mid))
    if total >= target then hi = mid else lo = mid + 1 end
  end
  return (unpack_item(redis.call('LINDEX', h.key, lo)))
end

function LIST.newest(h)
  if h.len == 0 then return nil end
  return (unpack_item(redis.call('LINDEX', h.key, -1)))
end

-- Returns the reset time and the cost added: all of it, but for what
-- would take one millisecond's item past MAX_ENTRY (only a charge can).
function LIST.add(h, now, cost, window)
  -- The tail read again: another dimension of this call may have added.
  local tail = redis.call('LINDEX', h.key, -1)
  local newest = now
  local total
  if not tail then
    total = cost
    redis.call('RPUSH', h.key, pack_item(now, cost, total))
  else
    local t, c, tail_total = unpack_item(tail)
    if t == now then cost = math.min(cost, MAX_ENTRY - c) end
    total = tail_total + cost
    if t == now then
      redis.call('LSET', h.key, -1, pack_item(now, c + cost, total))
    elseif t < now then
      redis.call('RPUSH', h.key, pack_item(now, cost, total))
    else
      -- A client clock stepped back: cut off the later items, add this
      -- request (to the item of its millisecond, if there is one) and
      -- push them back, their totals moved by `cost`.
      newest = t
      local later = items_after(h.key, now)
      local before = redis.call('LINDEX', h.key, -#later - 1)
      local first
      if before and struct.unpack(ITEM, before) == now then
        local _, bc, btotal = unpack_item(before)
        cost = math.min(cost, MAX_ENTRY - bc)
        total = tail_total + cost
        redis.call('LTRIM', h.key, 0, -#later - 2)
        first = pack_item(now, bc + cost, btotal + cost)
      else
        local _, lc, ltotal = unpack_item(later[1])
        redis.call('LTRIM', h.key, 0, -#later - 1)
        first = pack_item(now, cost, ltotal - lc + cost)
      end
      push_shifted(h.key, first, later, cost, window + SLACK_MS)
    end
  end
  if total >= TOTAL_MAX then renumber(h.key) end
  local reset = newest + window - now
  redis.call('PEXPIRE', h.key, reset + SLACK_MS)
  written[h.key] = true
  return reset, cost
end

-- Keeps the newest `n` units of list `key` (n >= 1), dropping the oldest:
-- whole items, then part of the oldest item kept.
function LIST.keep_newest(key, n)
  local _, _, tail_total = unpack_item(redis.call('LINDEX', key, -1))
  -- Units are numbered by the running totals: those up to `drop` go.
  local drop = tail_total - n
  while true do
    local t, c, total = unpack_item(redis.call('LINDEX', key, 0))
    if total <= drop then
      redis.call('LPOP', key)
    else
      if total - c < drop then redis.call('LSET', key, 0, pack_item(t, total - drop, total)) end
      return
    end
  end
end

-- Takes back `cost` of the item at time `t` (one item per millisecond:
-- a request's charge is in it), moving the later items' totals.
function LIST.remove(key, t, cost)
  if redis.call('TYPE', key).ok ~= 'list' then return end
  local tail = redis.call('LINDEX', key, -1)
  if #tail ~= ITEM_LEN then return end
  local later = items_after(key, t)
  local at = redis.call('LINDEX', key, -#later - 1)
  if not at then return end
  local at_t, at_cost, at_total = unpack_item(at)
  local ttl = redis.call('PTTL', key)
  if at_t ~= t or at_cost < cost or ttl < 1 then return end
  redis.call('LTRIM', key, 0, -#later - 2)
  local first
  if at_cost > cost then first = pack_item(t, at_cost - cost, at_total - cost) end
  push_shifted(key, first, later, -cost, ttl)
end

-- The log at `key` for rule `r`, opened at `now` (entries up to
-- now - window dropped): its layout and handle. A list found empty (no
-- charge left: LIST.open deleted it) under a limit the packed layout
-- holds starts over packed.
local function open_log(key, r, now)
  local cutoff = now - r.window
  if r.limit <= PACKED_MAX and not r.charge then
    local h = PACKED.open(key, cutoff, r.window, r.limit)
    if h then return PACKED, h end
    h = LIST.open(key, cutoff, r.window)
    if h.len > 0 then return LIST, h end
    return PACKED, PACKED.open(key, cutoff, r.window, r.limit)
  end
  return LIST, LIST.open(key, cutoff, r.window)
end

-- Milliseconds until the newest entry of `h` leaves the window (0: empty).
local function newest_leaves(L, h, window, now)
  local newest = L.newest(h)
  if newest == nil then return 0 end
  return nonneg(newest + window - now)
end

function LOG.eval(key, r, cost, now)
  local L, h = open_log(key, r, now)
  local used = h.used
  if used + cost <= r.limit then
    return { fits = true, used = used, remaining = r.limit - used, L = L, h = h }
  end
  -- The request fits once the `excess`-th oldest entry leaves.
  local excess = used + cost - r.limit
  return {
    fits = false,
    used = used,
    L = L,
    h = h,
    remaining = nonneg(r.limit - used),
    retry = nonneg(L.at(h, excess - 1) + r.window - now),
    reset = newest_leaves(L, h, r.window, now),
  }
end

function LOG.idle(key, r, now, v)
  return newest_leaves(v.L, v.h, r.window, now)
end

-- The receipt is 1: LOG.release takes back `cost` entries at the
-- charge's time (entries of one time are alike, any of them will do).
function LOG.charge(key, r, cost, now, v)
  local reset = v.L.add(v.h, now, cost, r.window)
  return r.limit - v.used - cost, reset, 1
end

-- The log holds at most MAX_LOGGED (2^49, as the model): totals stay
-- below TOTAL_MAX once renumbered.
local MAX_LOGGED = 562949953421312

function LOG.record(key, r, cost, now, v)
  cost = math.min(cost, MAX_LOGGED - v.used)
  if cost <= 0 then return v.used, newest_leaves(v.L, v.h, r.window, now) end
  local reset, added = v.L.add(v.h, now, cost, r.window)
  return v.used + added, reset
end

function LOG.release(key, r, cost, at, receipt)
  if receipt == 0 then return end
  local kind = redis.call('TYPE', key).ok
  if kind == 'string' then
    PACKED.remove(key, at, cost)
  elseif kind == 'list' then
    LIST.remove(key, at, cost)
  end
end
