-- The clock and the TTL slack: the first lines of every slidegate script
-- (src/scripts.rs), so every fast path, algorithm and entry script reads
-- one clock and one slack. Every entry script takes the time of its call
-- as ARGV[2] and the slack as ARGV[3] (its header says so). These are
-- statements, not a function: a function defined and called costs every
-- call of a fast script.

-- Keys live this long past the moment they hold no charge: a margin so a
-- key never vanishes while a charge in it still counts. The same constant
-- as `SLACK_MS` in src/now.rs (a test compares them). On the client's
-- clock the call raises it by the skew the clients' clocks may have
-- (ARGV[3]): TTLs run on the server's clock, decisions on the client's.
local SLACK_MS = 1000

-- The last time (ms) the scripts decide exactly: slidegate::MAX_TIME_MS,
-- 2^43 - 1 (a counter's time * buckets stays below 2^53).
local MAX_TIME = 8796093022207

-- The time of the call: ARGV[2] absent or "" reads the Redis server's
-- clock (TIME); otherwise it is the client's time in ms (client-clock
-- mode, trace replay), and ARGV[3] (absent or "": SLACK_MS) its slack. A
-- time outside 0..MAX_TIME is an error.
local now = ARGV[2]
local server_clock = now == nil or now == ''
if server_clock then
  local t = redis.call('TIME')
  now = t[1] * 1000 + math.floor(t[2] / 1000)
else
  now = tonumber(now)
  if ARGV[3] and ARGV[3] ~= '' then SLACK_MS = tonumber(ARGV[3]) end
end
if not (now and now >= 0 and now <= MAX_TIME) then
  return redis.error_reply('slidegate: time ' .. tostring(server_clock and now or ARGV[2]) .. ' ms is outside 0..' .. MAX_TIME)
end
