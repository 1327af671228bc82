-- Concurrency leases: at most `limit` held at once per identity, each
-- until its expiry (its ttl after it was taken or last renewed), in a
-- sorted set per identity: member = lease id, score = expiry (ms).
--
-- lease_op(key, op, id, limit, ttl) does `op` ("acquire", "release" or
-- "renew") at `now` and answers entry/lease.lua's reply.
--
-- Taking a lease drops the expired ones first (a killed process's
-- leases come back once their ttl has passed), and taking one already held
-- renews it (one lease, not two). Releasing or renewing touches only the
-- lease named; one whose ttl has passed is dropped and not held. Taking or
-- renewing a lease raises the key's TTL to the ttl plus the slack, never
-- lowers it (a lease taken under a longer ttl — the limit's ttl changed —
-- still counts until its own expiry), so the key outlives its newest
-- lease; a set left empty goes (Redis drops it). A key of another type
-- fails every op with Redis' own WRONGTYPE error.
--
-- After lib/clock.lua (`now`, SLACK_MS).

-- The key's TTL raised to outlive a lease of `ttl` taken or renewed now;
-- answers how long until the newest lease's ttl passes.
local function lease_outlive(key, ttl)
  local left = redis.call('PTTL', key)
  if left < ttl + SLACK_MS then
    redis.call('PEXPIRE', key, ttl + SLACK_MS)
    return ttl
  end
  return left - SLACK_MS
end

local function lease_op(key, op, id, limit, ttl)
  if op ~= 'acquire' then
    local expiry = redis.call('ZSCORE', key, id)
    if not expiry then return { 0 } end
    if op == 'release' or tonumber(expiry) <= now then
      redis.call('ZREM', key, id)
      return { op == 'release' and tonumber(expiry) > now and 1 or 0 }
    end
    redis.call('ZADD', key, now + ttl, id)
    lease_outlive(key, ttl)
    return { 1 }
  end
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  local count = redis.call('ZCARD', key)
  if count >= limit and not redis.call('ZSCORE', key, id) then
    local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    return { 0, 0, tonumber(oldest[2]) - now, tonumber(newest[2]) - now }
  end
  count = count + redis.call('ZADD', key, now + ttl, id)
  return { 1, limit - count, 0, lease_outlive(key, ttl) }
end
