-- Concurrency leases: at most `limit` held at once per identity, each
-- until its expiry (its ttl after it was taken or last renewed), in a
-- sorted set per identity: member = lease id, score = expiry (ms).
--
-- lease_op(key, op, id, limit, ttl) does `op` ("acquire", "release" or
-- "renew") at `now` and answers entry/lease.lua's reply.
--
-- Only leases whose expiry is later than now count (ZCOUNT), so a killed
-- process's leases stop counting once their ttl has passed. Expired
-- leases are dropped when the limit is reached and by one acquisition in
-- sixteen (its random id starts with "0"), which keeps a busy key from
-- gathering them; an idle key goes with its TTL. Taking a lease already
-- held renews it (one lease, not two). Releasing or renewing touches only
-- the lease named; one whose ttl has passed is dropped and not held.
-- Taking or renewing a lease makes the key outlive it: when its TTL is
-- below ttl + slack it is set to twice the ttl plus the slack (so it is
-- raised once per ttl, not per lease, and never lowered: a lease taken
-- under a longer ttl — the limit's ttl changed — counts until its own
-- expiry). A key of another type fails every op with Redis' own WRONGTYPE
-- error.
--
-- After lib/clock.lua (`now`, SLACK_MS).

-- Makes the key outlive a lease of `ttl` taken or renewed now.
local function lease_outlive(key, ttl)
  if redis.call('PTTL', key) < ttl + SLACK_MS then
    redis.call('PEXPIRE', key, 2 * ttl + SLACK_MS)
  end
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
  local live = redis.call('ZCOUNT', key, '(' .. now, '+inf')
  if live >= limit then
    local mine = redis.call('ZSCORE', key, id)
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
    if not (mine and tonumber(mine) > now) then
      local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
      local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
      return { 0, 0, tonumber(oldest[2]) - now, tonumber(newest[2]) - now }
    end
  elseif string.byte(id, 1) == 48 then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  end
  -- A new lease adds one; one held is renewed. (An id taken again after
  -- its ttl, which slidegate's clients never do, is admitted as a new
  -- one but left out of the remaining answered.)
  local added = redis.call('ZADD', key, now + ttl, id)
  if live == 0 then
    -- No lease counts: the key's TTL need only outlive this one.
    redis.call('PEXPIRE', key, 2 * ttl + SLACK_MS)
  else
    lease_outlive(key, ttl)
  end
  return { 1, limit - live - added, 0, ttl }
end
