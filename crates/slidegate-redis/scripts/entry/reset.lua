-- Forgets one rule's state for one identity: an operator's reset.
--
-- KEYS     [1] state  [2] violations  [3] ban (one hash tag: one slot)
-- ARGV     none
-- Reply    { the number of keys that existed }

return { redis.call('DEL', KEYS[1], KEYS[2], KEYS[3]) }
