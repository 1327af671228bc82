-- The sliding log's common case, run before any shared code is defined
-- (defining the prelude's and the algorithm's functions costs about a
-- microsecond per call, measured): one unit of cost, admitted, this
-- millisecond's member "<now>" still free — one ZADD NX (see unique_zadd
-- in the prelude) — and, on a client clock, no entry later than now (the
-- entry is then the newest). Anything else falls through to the
-- single-check code after it, which decides from scratch: pruning twice is
-- a no-op, and on the server's clock that code reads TIME again (a request
-- decided a little later, still in one atomic call).
--
-- KEYS and ARGV as in single.lua; the same reply.

if ARGV[3] == '1' then
  local key, window, client = KEYS[1], tonumber(ARGV[2]), ARGV[4] ~= ''
  local now = tonumber(ARGV[4])
  if not client then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  local room = tonumber(ARGV[1]) - redis.call('ZCARD', key)
  if room >= 1
    and not (client and redis.call('ZCOUNT', key, string.format('(%d', now), '+inf') > 0)
    and redis.call('ZADD', key, 'NX', now, now) == 1
  then
    -- The server's clock is taken not to step back (see LOG.charge), so
    -- the entry is the newest; 1000 = SLACK_MS of the prelude.
    redis.call('PEXPIRE', key, window + 1000)
    return { 1, room - 1, 0, window }
  end
end
