-- Any number of dimensions (rule + key) for one request, each with an
-- optional penalty: admitted only if every dimension admits, and then
-- every one is charged; if any denies, none is charged (denying
-- dimensions with a penalty record a violation). All keys must share a
-- Cluster slot (the client groups them).
--
-- KEYS     per dimension i (1-based), 3 keys: [3i-2] state, [3i-1] violations, [3i] ban
-- ARGV     [1] "peek" to charge nothing and count no violation (a
--          read-only verdict), else ""  [2] now_ms ("" = Redis TIME)  [3] TTL slack ms
--          ("" = SLACK_MS; client-clock mode adds the clients' clock
--          skew); [2] and [3] are read by lib/clock.lua
--          [4] D = number of dimensions, [5] per-field hash TTL available "1"/"0",
--          then per dimension 11 values from 5 + 11(i-1) + 1: the cost
--          charged there, algorithm (1 log, 2 counter, 3 fixed, 4 gcra), limit, window_ms,
--          buckets, violation window ms (0 = no penalty), warn_after (0 = none),
--          ban_after (0 = none), ban_for_ms, violations kept (the penalty's cap),
--          charge (1: a budget's, recorded whatever remains and whatever
--          the other dimensions decide, unless banned — see `charged` in
--          lib/shared.lua; it admits while something remains)
-- Reply    per dimension 8 integers: allowed (1|0; 1 = this dimension had
--          room, charged only if all did), remaining, retry_after_ms,
--          reset_after_ms, state (0 allowed, 1 warned, 2 limited, 3 banned),
--          violations, receipt (what release.lua needs to take the charge
--          back: 1 for a log, a GCRA key's charge count, else 0; see the
--          algorithms' charge; 0 for a charge, never taken back), debt (a
--          charge's, else 0);
--          then `now` (ms), so a charge can be released (entry/release.lua)
--
-- Assembled by src/scripts.rs after lib/clock.lua (`now`), lib/shared.lua, the
-- four algorithm files and lib/penalty.lua.

local ALGORITHMS = { LOG, COUNTER, FIXED, GCRA }
local peek = ARGV[1] == 'peek'
local count = tonumber(ARGV[4])
local field_ttl = ARGV[5] == '1'

local dims = {}
local all_fit = true
for i = 1, count do
  local o = 6 + 11 * (i - 1)
  local charge = ARGV[o + 10] == '1'
  local d = {
    cost = tonumber(ARGV[o]),
    charge = charge,
    algorithm = ALGORITHMS[tonumber(ARGV[o + 1])],
    r = {
      limit = tonumber(ARGV[o + 2]),
      window = tonumber(ARGV[o + 3]),
      buckets = tonumber(ARGV[o + 4]),
      field_ttl = field_ttl,
      charge = charge,
    },
    vwindow = tonumber(ARGV[o + 5]),
    warn_after = tonumber(ARGV[o + 6]),
    ban_after = tonumber(ARGV[o + 7]),
    ban_for = tonumber(ARGV[o + 8]),
    cap = tonumber(ARGV[o + 9]),
    key = KEYS[3 * i - 2],
    viol = KEYS[3 * i - 1],
    ban = KEYS[3 * i],
    banned = 0,
  }
  if d.ban_after > 0 then
    d.banned = PENALTY.ban_left(d.ban, now)
  end
  if d.banned > 0 then
    all_fit = false
  else
    -- A charge admits while anything remains: weight 1.
    d.v = d.algorithm.eval(d.key, d.r, d.charge and 1 or d.cost, now)
    if not d.v.fits then all_fit = false end
  end
  dims[i] = d
end

local reply = {}
for _, d in ipairs(dims) do
  local allowed, remaining, retry, reset, state, violations, receipt, debt = 0, 0, 0, 0, 0, 0, 0, 0
  if d.banned > 0 then
    remaining, retry, reset, state, violations = 0, d.banned, d.banned, 3, d.ban_after
  else
    if d.charge then
      -- A peek is a charge of 0: it records nothing and reports the debt.
      local cost = d.cost
      if peek then cost = 0 end
      allowed, remaining, retry, reset, debt = charged(d.algorithm, d.key, d.r, cost, now, d.v)
    elseif d.v.fits then
      allowed = 1
      if all_fit and not peek then
        remaining, reset, receipt = d.algorithm.charge(d.key, d.r, d.cost, now, d.v)
        receipt = receipt or 0
      else
        remaining, reset = d.v.remaining, d.algorithm.idle(d.key, d.r, now, d.v)
      end
    else
      remaining, retry, reset = d.v.remaining, d.v.retry, d.v.reset
    end
    if allowed == 1 then
      if d.vwindow > 0 then
        violations = PENALTY.count(d.viol, d.vwindow, now)
        if d.warn_after > 0 and violations >= d.warn_after then state = 1 end
      end
    else
      state = 2
      if d.vwindow > 0 and peek then
        violations = PENALTY.count(d.viol, d.vwindow, now)
      elseif d.vwindow > 0 then
        violations = PENALTY.violate(d.viol, d.vwindow, now, d.cap)
        if d.ban_after > 0 and violations >= d.ban_after then
          PENALTY.ban(d.ban, d.viol, now, d.ban_for)
          state = 3
          if d.ban_for > retry then retry = d.ban_for end
          if d.ban_for > reset then reset = d.ban_for end
        end
      end
    end
  end
  reply[#reply + 1] = allowed
  reply[#reply + 1] = remaining
  reply[#reply + 1] = retry
  reply[#reply + 1] = reset
  reply[#reply + 1] = state
  reply[#reply + 1] = violations
  reply[#reply + 1] = receipt
  reply[#reply + 1] = debt
end
reply[#reply + 1] = now
return reply
