-- Concurrency leases (lib/lease.lua): one op on one identity's leases.
--
-- KEYS     [1] the identity's leases: a sorted set, member = lease id,
--          score = expiry (ms); anything else is an error, never read
-- ARGV     [1] op: "acquire", "release" or "renew"  [2] now_ms ("" =
--          Redis TIME)  [3] TTL slack ms ("" = SLACK_MS); [2] and [3] are
--          read by lib/clock.lua  [4] the lease id  [5] limit  [6] ttl ms
-- Reply    acquire: { allowed (1|0), remaining (the limit less the leases
--          held after), retry_after_ms (a refusal: until the oldest
--          expiry), reset_after_ms (until the newest expiry) };
--          release, renew: { 1 if the lease was held, else 0 }
--
-- Assembled by src/scripts.rs after lib/clock.lua (`now`) and
-- lib/lease.lua (`lease_op`); entry/holds.lua runs many such ops at once.

return lease_op(KEYS[1], ARGV[1], ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6]))
