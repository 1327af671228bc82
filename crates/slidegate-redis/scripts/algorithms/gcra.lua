-- Generic cell rate algorithm.
--
-- key: string "<tat_ms>:<rem>:<seq>": theoretical arrival time = tat_ms +
-- rem/limit ms; seq counts the charges (and releases) the key has seen,
-- so GCRA.release can tell whether anything touched it since a charge. Any
-- other value is an error, never read as a bucket.
-- Time ahead of `now` is counted in 1/limit ms so the emission interval
-- window/limit stays exact. The client guarantees limit * window < 2^53.

local GCRA = {}

function GCRA.eval(key, r, cost, now)
  local cap = r.window * r.limit
  local ahead, seq = 0, 0
  local stored = redis.call('GET', key)
  if stored then
    local ms, rem, n = string.match(stored, '^(%d+):(%d+):(%d+)$')
    ms, rem, seq = tonumber(ms), tonumber(rem), tonumber(n)
    if not (ms and rem and seq) then not_ours(key, 'a GCRA bucket') end
    if ms >= now then
      ahead = (ms - now) * r.limit + rem
    end
  end
  -- Compared with the room left rather than summed: ahead + cost * window
  -- can pass 2^53, where doubles stop being exact; both terms here stay
  -- below cap.
  local room = cap - cost * r.window
  if ahead <= room then
    return {
      fits = true,
      ahead = ahead,
      next = ahead + cost * r.window,
      seq = seq,
      used = math.ceil(ahead / r.window),
      remaining = math.floor((cap - ahead) / r.window),
    }
  end
  return {
    fits = false,
    ahead = ahead,
    seq = seq,
    used = math.ceil(ahead / r.window),
    remaining = math.floor(nonneg(cap - ahead) / r.window),
    retry = math.ceil((ahead - room) / r.limit),
    reset = math.ceil(ahead / r.limit),
  }
end

function GCRA.idle(key, r, now, v)
  return math.ceil(v.ahead / r.limit)
end

-- The receipt is the key's charge count after this charge (at least 1; 0
-- means no charge): GCRA.release takes the charge back only if the key
-- still holds exactly what this charge left.
function GCRA.charge(key, r, cost, now, v)
  local whole = math.floor(v.next / r.limit)
  local rem = v.next - whole * r.limit
  local reset = math.ceil(v.next / r.limit)
  local seq = v.seq + 1
  redis.call('SET', key, string.format('%d:%d:%d', now + whole, rem, seq), 'PX', reset + SLACK_MS)
  return math.floor((r.window * r.limit - v.next) / r.window), reset, seq
end

-- A debt is kept up to GCRA_MAX_AHEAD units ahead (as the model; exact
-- in doubles: a value rounded up to 2^53 still compares above it).
local GCRA_MAX_AHEAD = 9007199254740991

function GCRA.record(key, r, cost, now, v)
  local next = math.min(v.ahead + cost * r.window, GCRA_MAX_AHEAD)
  local whole = math.floor(next / r.limit)
  local reset = math.ceil(next / r.limit)
  redis.call('SET', key, string.format('%d:%d:%d', now + whole, next - whole * r.limit, v.seq + 1), 'PX', reset + SLACK_MS)
  return math.ceil(next / r.window), reset
end

-- Takes back `cost` of a charge made at `at` from a bucket holding
-- tat_ms `ms`, remainder `rem` and count `seq`, when what it held then
-- stays whole; the count moves on.
local function undo(key, r, cost, at, ms, rem, seq)
  if ms < at then return end
  -- What the key held at the charge's time, before it: exact (both terms
  -- are at most limit * window < 2^53, as the charge left them).
  local before = (ms - at) * r.limit + rem - cost * r.window
  if before < 0 then return end
  local whole = math.floor(before / r.limit)
  local ttl = redis.call('PTTL', key)
  if ttl < 1 then ttl = 1 end
  redis.call('SET', key, string.format('%d:%d:%d', at + whole, before - whole * r.limit, seq + 1), 'PX', ttl)
end

local function bucket_of(key)
  local stored = redis.call('GET', key)
  if not stored then return nil end
  local ms, rem, seq = string.match(stored, '^(%d+):(%d+):(%d+)$')
  return tonumber(ms), tonumber(rem), tonumber(seq)
end

-- GCRA is not additive: a charge to a bucket ahead of its own time adds
-- its cost, but one to an idle bucket starts from its time, so a later
-- charge (or another release) may already have absorbed part of ours, and
-- taking it all back could hand out capacity nobody released. So the
-- charge is taken back only when the key still holds exactly what it
-- left — its charge count (`receipt`) unchanged, so nothing touched it
-- since — which undoes it exactly. Otherwise it stays, drains within
-- cost * window / limit ms, and errs on the side of the limit, never
-- over-admits.
function GCRA.release(key, r, cost, at, receipt)
  if receipt < 1 then return end
  local ms, rem, seq = bucket_of(key)
  if ms and seq == receipt then undo(key, r, cost, at, ms, rem, seq) end
end

-- A reservation's receipt: the arrival time its charge left,
-- "<tat_ms>:<rem>" (the memory store's too).
function GCRA.receipt(key)
  local ms, rem = bucket_of(key)
  if not ms then return '' end
  return string.format('%d:%d', ms, rem)
end

-- A reservation's give-back: as GCRA.release, when the bucket holds the
-- arrival time its charge left (`receipt`) — nothing charged since, or
-- what was has been given back — whatever its count.
function GCRA.give_back(key, r, cost, at, receipt)
  local ms, rem, seq = bucket_of(key)
  if ms and string.format('%d:%d', ms, rem) == receipt then undo(key, r, cost, at, ms, rem, seq) end
end
