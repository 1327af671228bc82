-- Penalty escalation (see slidegate::penalty for the pure model).
--
-- viol key: sorted set of violation times (unique members, as the log).
-- ban key:  string, the time (ms) the ban ends — a value rather than the
--           key's TTL alone, so client-clock mode (trace replay) bans in
--           trace time too. Both carry TTLs.

local PENALTY = {}

function PENALTY.ban_left(ban_key, now)
  local ends = tonumber(redis.call('GET', ban_key) or 0) or 0
  return nonneg(ends - now)
end

function PENALTY.count(viol_key, vwindow, now)
  redis.call('ZREMRANGEBYSCORE', viol_key, '-inf', now - vwindow)
  return redis.call('ZCARD', viol_key)
end

-- Records a violation at `now`; returns the count including it.
function PENALTY.violate(viol_key, vwindow, now)
  local count = PENALTY.count(viol_key, vwindow, now)
  unique_zadd(viol_key, now, count, 1)
  redis.call('PEXPIRE', viol_key, newest_leaves(viol_key, vwindow, now) + SLACK_MS)
  return count + 1
end

function PENALTY.ban(ban_key, viol_key, now, ban_for)
  redis.call('SET', ban_key, string.format('%d', now + ban_for), 'PX', ban_for + SLACK_MS)
  redis.call('DEL', viol_key)
end
