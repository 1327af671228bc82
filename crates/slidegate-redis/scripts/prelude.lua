-- Shared prelude, prepended to every slidegate script (see src/scripts.rs).
--
-- ARGV conventions common to all scripts:
--   ARGV[1] limit       positive integer
--   ARGV[2] window_ms   positive integer
--   ARGV[3] cost        1..=limit (validated by the client)
--   ARGV[4] now_ms      "" = use the Redis server clock (TIME); otherwise the
--                       client's time in ms (client-clock mode, trace replay)
-- Reply shape common to all scripts:
--   { allowed (1|0), remaining, retry_after_ms, reset_after_ms }

local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])

-- Keys live this long past the moment they hold no charge: a margin so a
-- key never vanishes while a charge in it still counts.
local SLACK_MS = 1000

local function now_ms()
  if ARGV[4] ~= '' then
    return tonumber(ARGV[4])
  end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function nonneg(x)
  if x < 0 then return 0 end
  return x
end
