-- Generic cell rate algorithm.
--
-- key: string "<tat_ms>:<rem>:<seq>": theoretical arrival time = tat_ms +
-- rem/limit ms; seq counts the charges (and releases) the key has seen,
-- so release.lua can tell whether anything touched it since a charge. Any
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
      remaining = math.floor((cap - ahead) / r.window),
    }
  end
  return {
    fits = false,
    remaining = math.floor(nonneg(cap - ahead) / r.window),
    retry = math.ceil((ahead - room) / r.limit),
    reset = math.ceil(ahead / r.limit),
  }
end

function GCRA.idle(key, r, now, v)
  return math.ceil(v.ahead / r.limit)
end

-- The receipt is the key's charge count after this charge (at least 1; 0
-- means no charge): release.lua takes the charge back only if the key
-- still holds exactly what this charge left.
function GCRA.charge(key, r, cost, now, v)
  local whole = math.floor(v.next / r.limit)
  local rem = v.next - whole * r.limit
  local reset = math.ceil(v.next / r.limit)
  local seq = v.seq + 1
  redis.call('SET', key, string.format('%d:%d:%d', now + whole, rem, seq), 'PX', reset + SLACK_MS)
  return math.floor((r.window * r.limit - v.next) / r.window), reset, seq
end
