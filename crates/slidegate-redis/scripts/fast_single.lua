-- A single script's fast path (src/scripts.rs binds `fast` to log_fast or
-- counter_fast before this): the common case answered before any shared
-- code is defined. Anything the fast function leaves (nil) falls through to
-- single.lua, which decides from scratch (on the server's clock it reads
-- TIME again: a request decided a little later, still in one atomic call).
--
-- KEYS and ARGV as in single.lua.

do
  local limit, window, cost, buckets = struct.unpack('>I4I6I4I2', ARGV[1])
  local now
  if ARGV[2] == '' then
    local t = redis.call('TIME')
    now = t[1] * 1000 + math.floor(t[2] / 1000)
  else
    now = tonumber(ARGV[2])
  end
  local reply = fast(KEYS[1], limit, window, cost, now, ARGV[2] == '', buckets, ARGV[3] == '1')
  if reply then return reply end
end
