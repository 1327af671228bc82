-- Fixed window aligned to multiples of the window length.
--
-- key: hash, w = window index, n = cost counted in it (both always
-- written together; anything else is an error, never read as a count). A
-- clock stepping back into an earlier window keeps the later count.

local FIXED = {}

function FIXED.eval(key, r, cost, now)
  local cur = math.floor(now / r.window)
  local state = redis.call('HMGET', key, 'w', 'n')
  local w, n = tonumber(state[1]), tonumber(state[2])
  if (state[1] or state[2]) and not (w and n) then not_ours(key, 'a fixed window') end
  -- A new key, or a hash of other fields (then HMGET found neither).
  if not w and redis.call('EXISTS', key) == 1 then not_ours(key, 'a fixed window') end
  n = n or 0
  if w == nil or cur > w then
    w = cur
    n = 0
  end
  local ends = (w + 1) * r.window - now
  if n + cost <= r.limit then
    return { fits = true, w = w, n = n, used = n, ends = ends, remaining = r.limit - n }
  end
  return { fits = false, w = w, n = n, used = n, ends = ends, remaining = nonneg(r.limit - n), retry = ends, reset = ends }
end

function FIXED.idle(key, r, now, v)
  if v.n > 0 then return v.ends end
  return 0
end

function FIXED.charge(key, r, cost, now, v)
  redis.call('HSET', key, 'w', string.format('%d', v.w), 'n', v.n + cost)
  redis.call('PEXPIRE', key, v.ends + SLACK_MS)
  return r.limit - v.n - cost, v.ends
end

function FIXED.record(key, r, cost, now, v)
  local n = math.min(v.n + cost, MAX_ENTRY)
  redis.call('HSET', key, 'w', string.format('%d', v.w), 'n', string.format('%d', n))
  redis.call('PEXPIRE', key, v.ends + SLACK_MS)
  return n, v.ends
end

-- Taken back from the window the charge was made in, if the key still
-- counts it (a later window started over from 0), never below 0 (a key
-- reset, or evicted, and counted again since holds less than the charge).
function FIXED.release(key, r, cost, at, receipt)
  local state = redis.call('HMGET', key, 'w', 'n')
  local w, n = tonumber(state[1]), tonumber(state[2])
  if w == math.floor(at / r.window) and n then
    redis.call('HSET', key, 'n', string.format('%d', math.max(0, n - cost)))
  end
end
