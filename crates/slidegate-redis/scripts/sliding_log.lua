-- Exact sliding log.
--
-- key: sorted set, one member per admitted unit of cost, score = time (ms),
-- member "<ms>" or "<ms>:<n>" (see unique_zadd in the prelude).
-- Admits iff (units scored in (now - window, now]) + cost <= limit; the
-- oldest units leave first. Denied requests write nothing.

local LOG = {}

function LOG.eval(key, r, cost, now)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - r.window)
  local used = redis.call('ZCARD', key)
  if used + cost <= r.limit then
    return { fits = true, used = used, remaining = r.limit - used }
  end
  -- The request fits once the `excess`-th oldest unit leaves.
  local excess = used + cost - r.limit
  local freeing = redis.call('ZRANGE', key, excess - 1, excess - 1, 'WITHSCORES')
  return {
    fits = false,
    remaining = nonneg(r.limit - used),
    retry = nonneg(tonumber(freeing[2]) + r.window - now),
    reset = newest_leaves(key, r.window, now),
  }
end

function LOG.idle(key, r, now, v)
  return newest_leaves(key, r.window, now)
end

function LOG.charge(key, r, cost, now, v)
  local receipt = unique_zadd(key, now, v.used, cost)
  -- The newest entry is this one unless the clock stepped back (entries
  -- later than now). A client clock may (trace replay, skewed nodes): ask.
  -- The server's clock is taken not to step back: a failover to a replica
  -- whose clock is behind can make this reset short by the difference,
  -- never the admission.
  local reset = r.window
  if r.client_clock and redis.call('ZCOUNT', key, string.format('(%d', now), '+inf') > 0 then
    reset = newest_leaves(key, r.window, now)
  end
  redis.call('PEXPIRE', key, reset + SLACK_MS)
  return r.limit - v.used - cost, reset, receipt
end
