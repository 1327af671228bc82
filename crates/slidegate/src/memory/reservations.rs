//! Reservations in the memory store: each one's receipt (what its
//! estimate charged) until it is settled or its ttl passes, in the shard
//! of its rule's state for the identity (under that lock: charged and
//! given back atomically with the state).

use super::{MemoryStore, SWEEP_EVERY, lock};
use crate::algorithm::Receipt;
use crate::store::{ReservationRequest, validate_time};
use crate::{Decision, Error, ErrorKind};

/// A reservation held: what its estimate charged, and when its ttl passes.
#[derive(Debug)]
pub(super) struct Held {
    receipt: Receipt,
    pub(super) expires: u64,
}

/// The key of a reservation: the rule's state, the identity and the id.
fn key_of(reservation: &ReservationRequest<'_>) -> Box<str> {
    let rule = reservation.rule();
    format!(
        "{}\u{0}{}\u{0}{}\u{0}{}",
        rule.state_name(),
        rule.state_part(),
        reservation.identity().as_str(),
        reservation.id().as_str()
    )
    .into_boxed_str()
}

impl MemoryStore {
    /// [`Store::reserve`](crate::Store::reserve), synchronously.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidTime`], or [`ErrorKind::CapacityExhausted`]
    /// for a new key, or a reservation, in a full store.
    pub fn reserve_sync(
        &self,
        reservation: &ReservationRequest<'_>,
        estimate: u32,
        ttl_ms: u64,
    ) -> Result<Decision, Error> {
        let (rule, identity) = (reservation.rule(), reservation.identity().as_str());
        let now = validate_time(self.inner.clock.now_ms())?;
        let hash = self.hash(rule, identity);
        let mut shard = lock(&self.inner.shards[self.shard_of(hash)]);
        shard.ops = shard.ops.wrapping_add(1);
        if shard.ops.is_multiple_of(SWEEP_EVERY) {
            shard.sweep(now);
        }
        // Reservations held count against the store's keys: a flood of
        // unsettled ones is refused, never let grow without bound.
        if shard.holds.reservations.len() >= self.inner.max_keys_per_shard {
            shard.holds.reservations.retain(|_, held| held.expires > now);
            if shard.holds.reservations.len() >= self.inner.max_keys_per_shard {
                return Err(Error::new(
                    ErrorKind::CapacityExhausted,
                    format!("memory store holds its maximum of {} reservations", self.inner.max_keys),
                ));
            }
        }
        let (decision, receipt) =
            self.entry(&mut shard, identity, hash, rule, now)?.reserve(rule, now, estimate);
        if let Some(receipt) = receipt {
            let held = Held { receipt, expires: now.saturating_add(ttl_ms) };
            shard.holds.reservations.insert(key_of(reservation), held);
        }
        Ok(decision)
    }

    /// [`Store::settle`](crate::Store::settle), synchronously.
    ///
    /// # Errors
    ///
    /// As [`reserve_sync`](Self::reserve_sync) (the reservation is then
    /// kept).
    pub fn settle_sync(
        &self,
        reservation: &ReservationRequest<'_>,
        actual: u32,
    ) -> Result<Option<Decision>, Error> {
        let (rule, identity) = (reservation.rule(), reservation.identity().as_str());
        let now = validate_time(self.inner.clock.now_ms())?;
        let hash = self.hash(rule, identity);
        let mut shard = lock(&self.inner.shards[self.shard_of(hash)]);
        let key = key_of(reservation);
        let Some(held) = shard.holds.reservations.remove(&key) else { return Ok(None) };
        if held.expires <= now {
            return Ok(None);
        }
        match self.entry(&mut shard, identity, hash, rule, now) {
            Ok(entry) => Ok(Some(entry.settle(rule, now, &held.receipt, actual))),
            Err(error) => {
                shard.holds.reservations.insert(key, held);
                Err(error)
            }
        }
    }
}
