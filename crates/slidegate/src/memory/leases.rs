//! Concurrency leases in the memory store: per identity, the leases held
//! and when each one's ttl passes, in the identity's shard (under its
//! lock: a lease is counted and taken in one step).

use std::time::Duration;

use super::{MemoryStore, lock};
use crate::store::{LeaseRequest, validate_time};
use crate::{Decision, Error, ErrorKind, LeaseId};

/// The leases one identity holds under one limit: id and expiry (ms),
/// at most the limit's number.
#[derive(Debug, Default)]
pub(super) struct Leases(Vec<(LeaseId, u64)>);

impl Leases {
    /// Drops the leases whose ttl has passed at `now`.
    fn prune(&mut self, now: u64) {
        self.0.retain(|&(_, expires)| expires > now);
    }

    /// When the last lease's ttl passes (0 when none is held).
    pub(super) fn expires_at(&self) -> u64 {
        self.0.iter().map(|&(_, expires)| expires).max().unwrap_or(0)
    }
}

/// The key of a lease table: the limit's name and the identity.
fn key_of(lease: &LeaseRequest<'_>) -> Box<str> {
    format!("{}\u{0}{}", lease.limit().name(), lease.identity().as_str()).into_boxed_str()
}

impl MemoryStore {
    fn leases_shard(&self, key: &str) -> usize {
        use std::hash::BuildHasher as _;
        (self.inner.hasher.hash_one(key) >> 32) as usize & (self.inner.shards.len() - 1)
    }

    /// [`Store::acquire`](crate::Store::acquire), synchronously.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidTime`], or [`ErrorKind::CapacityExhausted`] for
    /// a new identity in a full store.
    pub fn acquire_sync(&self, lease: &LeaseRequest<'_>) -> Result<Decision, Error> {
        let now = validate_time(self.inner.clock.now_ms())?;
        let key = key_of(lease);
        let mut shard = lock(&self.inner.shards[self.leases_shard(&key)]);
        let leases = &mut shard.holds.leases;
        if !leases.contains_key(&key) && leases.len() >= self.inner.max_keys_per_shard {
            leases.retain(|_, held| held.expires_at() > now);
            if leases.len() >= self.inner.max_keys_per_shard {
                return Err(Error::new(
                    ErrorKind::CapacityExhausted,
                    format!("memory store holds its maximum of {} keys", self.inner.max_keys),
                ));
            }
        }
        let held = leases.entry(key).or_default();
        held.prune(now);
        let (limit, ttl) = (lease.limit().limit(), lease.limit().ttl_ms());
        let expires = now.saturating_add(ttl);
        let ms = |at: u64| Duration::from_millis(at.saturating_sub(now));
        if let Some(mine) = held.0.iter_mut().find(|(id, _)| id == lease.id()) {
            mine.1 = expires;
        } else if held.0.len() < limit as usize {
            held.0.push((lease.id().clone(), expires));
        } else {
            let oldest = held.0.iter().map(|&(_, e)| e).min().unwrap_or(now);
            return Ok(Decision::limited(limit, 0, ms(oldest), ms(held.expires_at())));
        }
        let remaining = limit.saturating_sub(u32::try_from(held.0.len()).unwrap_or(u32::MAX));
        Ok(Decision::allowed(limit, remaining, ms(held.expires_at())))
    }

    /// [`Store::release`](crate::Store::release), synchronously.
    pub fn release_sync(&self, lease: &LeaseRequest<'_>) -> bool {
        self.with_leases(lease, |held, _| {
            let before = held.0.len();
            held.0.retain(|(id, _)| id != lease.id());
            held.0.len() < before
        })
    }

    /// [`Store::renew`](crate::Store::renew), synchronously.
    pub fn renew_sync(&self, lease: &LeaseRequest<'_>) -> bool {
        self.with_leases(lease, |held, now| match held.0.iter_mut().find(|(id, _)| id == lease.id()) {
            Some(mine) => {
                mine.1 = now.saturating_add(lease.limit().ttl_ms());
                true
            }
            None => false,
        })
    }

    /// Runs `change` on the leases of `lease`'s identity, pruned at now
    /// (false when it holds none); an identity left with none is dropped.
    fn with_leases(&self, lease: &LeaseRequest<'_>, change: impl FnOnce(&mut Leases, u64) -> bool) -> bool {
        let Ok(now) = validate_time(self.inner.clock.now_ms()) else { return false };
        let key = key_of(lease);
        let mut shard = lock(&self.inner.shards[self.leases_shard(&key)]);
        let Some(held) = shard.holds.leases.get_mut(&key) else { return false };
        held.prune(now);
        let changed = change(held, now);
        if held.0.is_empty() {
            shard.holds.leases.remove(&key);
        }
        changed
    }
}
