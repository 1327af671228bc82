-- A single script's fast path (src/scripts.rs binds `fast` to log_fast or
-- counter_fast, and `fast_raises`, before this): the common case answered
-- before any shared code is defined. Anything the fast function leaves
-- (nil, or an error it raised) falls through to single.lua, which decides
-- from scratch (on the server's clock it reads TIME again: a request
-- decided a little later, still in one atomic call).
--
-- KEYS and ARGV as in single.lua.

do
  local check = ARGV[1]
  local limit, window, cost, buckets, flags = struct.unpack('>I4I6I4I2B', check)
  local now = ARGV[2]
  local server_clock = now == nil
  -- The TTL slack: SLACK_MS of the prelude, or client-clock mode's.
  local slack = 1000
  if server_clock then
    local t = redis.call('TIME')
    now = t[1] * 1000 + math.floor(t[2] / 1000)
  else
    now = tonumber(now)
    slack = tonumber(ARGV[3])
  end
  -- A time beyond MAX_TIME of the prelude (2^43 - 1), like a key the fast
  -- function cannot read, is left to single.lua, which says what is wrong.
  if now and now >= 0 and now <= 8796093022207 then
    local ok, reply = true, nil
    -- Only a fast function that may raise is called under pcall (bound
    -- with it by src/scripts.rs: log_fast never raises), which costs
    -- Redis ~400 instructions per call (callgrind).
    if fast_raises then
      ok, reply = pcall(fast, KEYS[1], limit, window, cost, now, server_clock, buckets, flags % 2 == 1, nil, slack)
    else
      reply = fast(KEYS[1], limit, window, cost, now, server_clock, buckets, flags % 2 == 1, string.sub(check, 18))
    end
    if ok and reply then return reply end
  end
end
