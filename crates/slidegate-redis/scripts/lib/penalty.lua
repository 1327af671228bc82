-- Penalty escalation (see slidegate::penalty for the pure model).
--
-- viol key: the newest violation times, at most the penalty's cap
--           (slidegate::Penalty::violation_cap), a log in the list layout
--           of sliding_log.lua.
-- ban key:  string, the time (ms) the ban ends — a value rather than the
--           key's TTL alone, so client-clock mode (trace replay) bans in
--           trace time too. Both carry TTLs.

local PENALTY = {}

function PENALTY.ban_left(ban_key, now)
  local stored = redis.call('GET', ban_key)
  if not stored then return 0 end
  local ends = tonumber(stored)
  if not ends then not_ours(ban_key, 'a ban') end
  return nonneg(ends - now)
end

function PENALTY.count(viol_key, vwindow, now)
  return LIST.open(viol_key, now - vwindow, vwindow).used
end

-- Records a violation at `now`, keeping the newest `cap` (the violations
-- in the window are the newest, so whether their count reaches a
-- threshold no higher than `cap` is unchanged); returns the count
-- including it, at most `cap`.
function PENALTY.violate(viol_key, vwindow, now, cap)
  local h = LIST.open(viol_key, now - vwindow, vwindow)
  LIST.add(h, now, 1, vwindow)
  if h.used + 1 > cap then
    LIST.keep_newest(viol_key, cap)
    return cap
  end
  return h.used + 1
end

function PENALTY.ban(ban_key, viol_key, now, ban_for)
  redis.call('SET', ban_key, string.format('%d', now + ban_for), 'PX', ban_for + SLACK_MS)
  redis.call('DEL', viol_key)
end
