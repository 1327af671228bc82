//! The store a service decides with: the embedded one or Redis, chosen at
//! start (a [`Store`] returns `impl Future`, so it cannot be a trait object).

use std::time::Duration;

use slidegate::store::{Dimensions, LeaseRequest, Request, ReservationRequest, Store};
use slidegate::{Decision, Error, Limiter, MemoryStore, MultiDecision};
use slidegate_redis::RedisStore;

/// The embedded store or a Redis store (standalone, Sentinel or Cluster).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ServiceStore {
    /// The embedded in-memory store: one process, no Redis.
    Memory(MemoryStore),
    /// Redis: every service sharing it shares the limits.
    Redis(RedisStore),
}

impl ServiceStore {
    /// `memory` or `redis`.
    pub fn kind(&self) -> &'static str {
        match self {
            ServiceStore::Memory(_) => "memory",
            ServiceStore::Redis(_) => "redis",
        }
    }

    /// Whether the store has reached its servers (always, for the
    /// embedded store; see [`RedisStore::is_connected`]).
    pub fn is_connected(&self) -> bool {
        match self {
            ServiceStore::Memory(_) => true,
            ServiceStore::Redis(store) => store.is_connected(),
        }
    }

    /// Why a Redis store has not connected yet (see
    /// [`RedisStore::waiting_for`]).
    pub fn waiting_for(&self) -> Option<String> {
        match self {
            ServiceStore::Memory(_) => None,
            ServiceStore::Redis(store) => store.waiting_for(),
        }
    }

    /// What the Redis servers hold (memory, keys), `None` for the embedded store.
    pub async fn server_stats(&self) -> Option<Result<slidegate_redis::ServerStats, Error>> {
        match self {
            ServiceStore::Memory(_) => None,
            ServiceStore::Redis(store) => Some(store.server_stats().await),
        }
    }
}

impl Store for ServiceStore {
    async fn check(&self, request: &Request<'_>) -> Result<Decision, Error> {
        match self {
            ServiceStore::Memory(store) => store.check(request).await,
            ServiceStore::Redis(store) => store.check(request).await,
        }
    }

    async fn check_all(&self, dimensions: &Dimensions<'_>) -> Result<MultiDecision, Error> {
        match self {
            ServiceStore::Memory(store) => store.check_all(dimensions).await,
            ServiceStore::Redis(store) => store.check_all(dimensions).await,
        }
    }

    async fn peek_all(&self, dimensions: &Dimensions<'_>) -> Result<MultiDecision, Error> {
        match self {
            ServiceStore::Memory(store) => store.peek_all(dimensions).await,
            ServiceStore::Redis(store) => store.peek_all(dimensions).await,
        }
    }

    async fn reset(&self, request: &Request<'_>) -> Result<bool, Error> {
        match self {
            ServiceStore::Memory(store) => store.reset(request).await,
            ServiceStore::Redis(store) => store.reset(request).await,
        }
    }

    async fn check_batch(&self, requests: &[Request<'_>]) -> Vec<Result<Decision, Error>> {
        match self {
            ServiceStore::Memory(store) => store.check_batch(requests).await,
            ServiceStore::Redis(store) => store.check_batch(requests).await,
        }
    }

    async fn acquire(&self, lease: &LeaseRequest<'_>) -> Result<Decision, Error> {
        match self {
            ServiceStore::Memory(store) => store.acquire(lease).await,
            ServiceStore::Redis(store) => store.acquire(lease).await,
        }
    }

    async fn release(&self, lease: &LeaseRequest<'_>) -> Result<bool, Error> {
        match self {
            ServiceStore::Memory(store) => store.release(lease).await,
            ServiceStore::Redis(store) => store.release(lease).await,
        }
    }

    async fn renew(&self, lease: &LeaseRequest<'_>) -> Result<bool, Error> {
        match self {
            ServiceStore::Memory(store) => store.renew(lease).await,
            ServiceStore::Redis(store) => store.renew(lease).await,
        }
    }

    async fn reserve(
        &self,
        reservation: &ReservationRequest<'_>,
        estimate: u32,
        ttl_ms: u64,
    ) -> Result<Decision, Error> {
        match self {
            ServiceStore::Memory(store) => store.reserve(reservation, estimate, ttl_ms).await,
            ServiceStore::Redis(store) => store.reserve(reservation, estimate, ttl_ms).await,
        }
    }

    async fn settle(
        &self,
        reservation: &ReservationRequest<'_>,
        actual: u32,
    ) -> Result<Option<Decision>, Error> {
        match self {
            ServiceStore::Memory(store) => store.settle(reservation, actual).await,
            ServiceStore::Redis(store) => store.settle(reservation, actual).await,
        }
    }

    fn is_local(&self) -> bool {
        match self {
            ServiceStore::Memory(store) => store.is_local(),
            ServiceStore::Redis(store) => store.is_local(),
        }
    }

    fn releases_charges(&self) -> bool {
        match self {
            ServiceStore::Memory(store) => store.releases_charges(),
            ServiceStore::Redis(store) => store.releases_charges(),
        }
    }
}

/// How often the service lets its store's breaker probe without traffic.
const PROBE_EVERY: Duration = Duration::from_millis(500);

/// Lets the breaker probe the store twice a second while it is open
/// ([`Limiter::probe_store`]), until dropped: a service that its load
/// balancer stopped sending traffic to, not ready while its store failed,
/// would otherwise never find the store back.
pub(crate) struct Probing(tokio::task::JoinHandle<()>);

impl Probing {
    pub(crate) fn start(limiter: Limiter<ServiceStore>) -> Probing {
        Probing(tokio::spawn(async move {
            let mut every = tokio::time::interval(PROBE_EVERY);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                limiter.probe_store().await;
            }
        }))
    }
}

impl Drop for Probing {
    fn drop(&mut self) {
        self.0.abort();
    }
}
