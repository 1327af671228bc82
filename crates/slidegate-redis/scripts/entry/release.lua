-- Takes back charges made by entry/check.lua: used when a multi-dimension
-- check spans Cluster slots, one slot's dimensions were charged, and
-- another slot denied. Each algorithm's release says what it can take back
-- exactly (lib/shared.lua, A.release).
--
-- KEYS     per dimension i, [i] the state key
-- ARGV     [1] unused ("")  [2] now_ms the charge was made at (check.lua's last
--          reply value; read by lib/clock.lua as the call's time)  [3] ""
--          [4] D, then per dimension 6 values from 4 + 6(i-1) + 1:
--          algorithm (1 log, 2 counter, 3 fixed, 4 gcra), limit, window_ms,
--          buckets, receipt, the cost charged
-- Reply    { D } (the number of dimensions released; an array like every
--          slidegate script's reply)
--
-- Assembled by src/scripts.rs after lib/clock.lua (`now`: the charge's
-- time), lib/shared.lua and the
-- four algorithm files.

local ALGORITHMS = { LOG, COUNTER, FIXED, GCRA }
local count = tonumber(ARGV[4])
for i = 1, count do
  local o = 4 + 6 * (i - 1)
  local r = { limit = tonumber(ARGV[o + 2]), window = tonumber(ARGV[o + 3]), buckets = tonumber(ARGV[o + 4]) }
  ALGORITHMS[tonumber(ARGV[o + 1])].release(KEYS[i], r, tonumber(ARGV[o + 6]), now, tonumber(ARGV[o + 5]))
end
return { count }
