-- Generic cell rate algorithm.
--
-- key: string "<tat_ms>:<rem>": theoretical arrival time = tat_ms + rem/limit ms.
-- Time ahead of `now` is counted in 1/limit ms so the emission interval
-- window/limit stays exact. The client guarantees limit * window < 2^53.

local GCRA = {}

function GCRA.eval(key, r, cost, now)
  local cap = r.window * r.limit
  local ahead = 0
  local stored = redis.call('GET', key)
  if stored then
    local ms, rem = string.match(stored, '^(%d+):(%d+)$')
    ms = tonumber(ms)
    if ms and ms >= now then
      ahead = (ms - now) * r.limit + tonumber(rem)
    end
  end
  -- Compared with the room left rather than summed: ahead + cost * window
  -- can pass 2^53, where doubles stop being exact; both terms here stay
  -- below cap.
  local room = cap - cost * r.window
  if ahead <= room then
    return { fits = true, ahead = ahead, next = ahead + cost * r.window, remaining = math.floor((cap - ahead) / r.window) }
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

-- The receipt is the time ahead before the charge, plus one (0 means no
-- charge): release.lua needs it to take the charge back exactly.
function GCRA.charge(key, r, cost, now, v)
  local whole = math.floor(v.next / r.limit)
  local rem = v.next - whole * r.limit
  local reset = math.ceil(v.next / r.limit)
  redis.call('SET', key, string.format('%d:%d', now + whole, rem), 'PX', reset + SLACK_MS)
  return math.floor((r.window * r.limit - v.next) / r.window), reset, v.ahead + 1
end
