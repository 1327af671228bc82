//! The local deny cache: after the store denies a request with
//! `retry_after = r`, the same (rule, identity) is answered here until `r`
//! passes, without a round trip.
//!
//! **Exact.** For every algorithm slidegate offers, nothing but time frees
//! capacity: other requests can only add charge. So a request of cost `c`
//! denied at `t` with `retry_after = r` is denied again until `t + r`,
//! whatever else happens, and with the same `retry_after` counted down
//! (unless this process itself admits more for the key; see below). Only
//! requests of the *same* cost are answered from the cache: a smaller one
//! may fit earlier, and a larger one has a later `retry_after`, which only
//! the store knows. The entry is timed from when the request was
//! *sent* (before the store decided), so round-trip latency only ever makes
//! it expire early, never late. A ban (penalty) is cached the same way.
//! When a smaller request of the same (rule, identity) is admitted, the
//! entry is dropped: that charge moves the time the larger cost fits, and
//! the cache only ever repeats the store's own `retry_after`.
//!
//! A store that can release charges (a Redis Cluster's multi-dimension
//! checks across slots reserve and release; [`Store::releases_charges`])
//! can lift a denial early, so its denials are not cached, bans apart. A
//! clock found to have stepped back drops the entries it meets (a wall
//! clock set back would otherwise stretch them).
//!
//! **Invalidated by rule changes**: entries are keyed by the whole rule
//! (limit, window, algorithm, name), so a changed rule never hits an entry
//! of the old one. **Bounded**: at most `capacity` entries; when full, expired
//! entries are dropped, and if none has expired the new denial is simply
//! not cached.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

#[cfg(doc)]
use crate::Store;
use crate::{Decision, Rule, Source};

const SHARDS: usize = 64;

struct Entry {
    rule: Rule,
    identity: Box<str>,
    /// Cost of the cached denial; only requests of this cost are answered.
    cost: u32,
    /// Time (ms) the denied request was sent: a clock found earlier than
    /// this stepped back, and the entry is no longer trusted.
    sent: u64,
    /// Time (ms) at which the denial may no longer hold.
    until: u64,
    decision: Decision,
}

/// Entries keyed by a hash of (rule, identity); the entry holds the full
/// key, so a collision is a miss, never a wrong answer.
#[derive(Default)]
struct Shard {
    map: HashMap<u64, Entry, foldhash::fast::RandomState>,
}

pub(crate) struct DenyCache {
    shards: Box<[Mutex<Shard>]>,
    hasher: foldhash::fast::RandomState,
    per_shard: usize,
    /// Entries in all shards, changed under a shard's lock: while there are
    /// none, reads and forgets need neither a hash nor a lock.
    entries: AtomicUsize,
}

impl std::fmt::Debug for DenyCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DenyCache").field("capacity", &(self.per_shard * SHARDS)).finish()
    }
}

impl DenyCache {
    pub(crate) fn new(capacity: usize) -> DenyCache {
        DenyCache {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            hasher: foldhash::fast::RandomState::default(),
            per_shard: capacity.div_ceil(SHARDS).max(1),
            entries: AtomicUsize::new(0),
        }
    }

    fn slot(&self, rule: &Rule, identity: &str) -> (u64, &Mutex<Shard>) {
        let hash = self.hasher.hash_one((rule, identity));
        (hash, &self.shards[(hash as usize) % SHARDS])
    }

    /// Whether the cache holds no denial (a hint: an entry being inserted
    /// at the same time may not show yet).
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.load(Ordering::Relaxed) == 0
    }

    /// The cached denial for a request of `cost`, with its times counted
    /// down to `now`, if one still holds.
    pub(crate) fn get(&self, rule: &Rule, identity: &str, cost: u32, now: u64) -> Option<Decision> {
        if self.is_empty() {
            return None;
        }
        let (hash, shard) = self.slot(rule, identity);
        let mut shard = lock(shard);
        let entry = shard.map.get(&hash)?;
        if entry.rule != *rule || *entry.identity != *identity {
            return None;
        }
        // Expired, or the clock stepped back (a wall clock set back would
        // otherwise stretch the denial).
        if now >= entry.until || now < entry.sent {
            shard.map.remove(&hash);
            self.entries.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        if cost != entry.cost {
            return None;
        }
        let left = Duration::from_millis(entry.until - now);
        let mut decision = entry.decision.from(Source::DenyCache);
        decision.retry_after = left;
        // Both count down by the time passed since the denial.
        decision.reset_after =
            decision.reset_after.saturating_sub(entry.decision.retry_after.saturating_sub(left));
        Some(decision)
    }

    /// Remembers `decision` (a denial of `cost` for a request sent at `sent`).
    pub(crate) fn insert(&self, rule: &Rule, identity: &str, cost: u32, sent: u64, decision: &Decision) {
        let until = sent.saturating_add(u64::try_from(decision.retry_after.as_millis()).unwrap_or(u64::MAX));
        if decision.allowed || until <= sent {
            return;
        }
        let (hash, shard) = self.slot(rule, identity);
        let mut shard = lock(shard);
        if shard.map.len() >= self.per_shard && !shard.map.contains_key(&hash) {
            let before = shard.map.len();
            shard.map.retain(|_, e| e.until > sent);
            self.entries.fetch_sub(before - shard.map.len(), Ordering::Relaxed);
            if shard.map.len() >= self.per_shard {
                return;
            }
        }
        let entry =
            Entry { rule: rule.clone(), identity: identity.into(), cost, sent, until, decision: *decision };
        if shard.map.insert(hash, entry).is_none() {
            self.entries.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Forgets the entry of (rule, identity): a smaller request was just
    /// admitted, which moves the time the cached cost fits again.
    pub(crate) fn forget(&self, rule: &Rule, identity: &str) {
        if self.is_empty() {
            return;
        }
        let (hash, shard) = self.slot(rule, identity);
        let mut shard = lock(shard);
        if shard.map.get(&hash).is_some_and(|e| e.rule == *rule && *e.identity == *identity) {
            shard.map.remove(&hash);
            self.entries.fetch_sub(1, Ordering::Relaxed);
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        let len = self.shards.iter().map(|s| lock(s).map.len()).sum();
        assert_eq!(self.entries.load(Ordering::Relaxed), len, "the count of entries is exact");
        len
    }
}

/// A poisoned shard holds plain values that are still consistent.
fn lock(shard: &Mutex<Shard>) -> std::sync::MutexGuard<'_, Shard> {
    shard.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroU32;

    use super::*;

    fn rule(limit: u32) -> Rule {
        Rule::per_second(NonZeroU32::new(limit).unwrap())
    }

    fn denial(retry_ms: u64) -> Decision {
        Decision::limited(10, 0, Duration::from_millis(retry_ms), Duration::from_millis(900))
    }

    #[test]
    fn holds_until_retry_after_for_the_same_cost() {
        let cache = DenyCache::new(100);
        cache.insert(&rule(10), "alice", 2, 1000, &denial(300));
        let hit = cache.get(&rule(10), "alice", 2, 1100).expect("cached");
        assert_eq!(hit.retry_after, Duration::from_millis(200));
        assert_eq!(hit.reset_after, Duration::from_millis(800));
        assert!(cache.get(&rule(10), "alice", 5, 1100).is_none(), "a larger cost has a later retry: ask");
        assert!(cache.get(&rule(10), "alice", 1, 1100).is_none(), "a smaller cost may fit: ask the store");
        assert!(cache.get(&rule(10), "bob", 2, 1100).is_none());
        assert!(cache.get(&rule(11), "alice", 2, 1100).is_none(), "a changed rule never hits");
        assert!(cache.get(&rule(10), "alice", 2, 1300).is_none(), "expired at sent + retry_after");
        assert_eq!(cache.len(), 0, "expired entries are dropped when met");
        cache.insert(&rule(10), "alice", 2, 1000, &denial(300));
        assert!(cache.get(&rule(10), "alice", 2, 999).is_none(), "a clock stepped back is not trusted");
        assert_eq!(cache.len(), 0);
    }

    #[test]
    fn bounded_and_ignores_admissions() {
        let cache = DenyCache::new(SHARDS);
        cache.insert(&rule(10), "x", 1, 0, &Decision::allowed(10, 9, Duration::ZERO));
        assert_eq!(cache.len(), 0);
        for i in 0..10_000 {
            cache.insert(&rule(10), &format!("k{i}"), 1, 0, &denial(1000));
        }
        assert!(cache.len() <= SHARDS, "{} entries", cache.len());
        // Once they expire, new denials are cached again.
        cache.insert(&rule(10), "late", 1, 5000, &denial(1000));
        assert!(cache.get(&rule(10), "late", 1, 5001).is_some());
    }
}
