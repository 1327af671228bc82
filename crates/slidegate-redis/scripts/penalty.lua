-- Penalty escalation (see slidegate::penalty for the pure model).
--
-- viol key: the violation times, a log in the list layout of sliding_log.lua.
-- ban key:  string, the time (ms) the ban ends — a value rather than the
--           key's TTL alone, so client-clock mode (trace replay) bans in
--           trace time too. Both carry TTLs.

local PENALTY = {}

function PENALTY.ban_left(ban_key, now)
  local ends = tonumber(redis.call('GET', ban_key) or 0) or 0
  return nonneg(ends - now)
end

function PENALTY.count(viol_key, vwindow, now)
  return LIST.open(viol_key, now - vwindow, vwindow).used
end

-- Records a violation at `now`; returns the count including it.
function PENALTY.violate(viol_key, vwindow, now)
  local h = LIST.open(viol_key, now - vwindow, vwindow)
  LIST.add(h, now, 1, vwindow)
  return h.used + 1
end

function PENALTY.ban(ban_key, viol_key, now, ban_for)
  redis.call('SET', ban_key, string.format('%d', now + ban_for), 'PX', ban_for + SLACK_MS)
  redis.call('DEL', viol_key)
end
