//! The memory store behind the [`Store`] trait: every call answered
//! synchronously, under the shard locks.

use super::MemoryStore;
use crate::store::{Dimensions, LeaseRequest, Request, ReservationRequest};
use crate::{Decision, Error, MultiDecision, Store};

impl Store for MemoryStore {
    async fn check(&self, request: &Request<'_>) -> Result<Decision, Error> {
        self.check_sync(request)
    }

    async fn check_all(&self, dimensions: &Dimensions<'_>) -> Result<MultiDecision, Error> {
        self.check_all_sync(dimensions)
    }

    async fn peek_all(&self, dimensions: &Dimensions<'_>) -> Result<MultiDecision, Error> {
        self.peek_all_sync(dimensions)
    }

    async fn reset(&self, request: &Request<'_>) -> Result<bool, Error> {
        Ok(self.reset_sync(request))
    }

    async fn acquire(&self, lease: &LeaseRequest<'_>) -> Result<Decision, Error> {
        self.acquire_sync(lease)
    }

    async fn release(&self, lease: &LeaseRequest<'_>) -> Result<bool, Error> {
        Ok(self.release_sync(lease))
    }

    async fn renew(&self, lease: &LeaseRequest<'_>) -> Result<bool, Error> {
        Ok(self.renew_sync(lease))
    }

    async fn reserve(
        &self,
        reservation: &ReservationRequest<'_>,
        estimate: u32,
        ttl_ms: u64,
    ) -> Result<Decision, Error> {
        self.reserve_sync(reservation, estimate, ttl_ms)
    }

    async fn settle(
        &self,
        reservation: &ReservationRequest<'_>,
        actual: u32,
    ) -> Result<Option<Decision>, Error> {
        self.settle_sync(reservation, actual)
    }

    fn is_local(&self) -> bool {
        true
    }
}
