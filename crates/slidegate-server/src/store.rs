//! The store a service decides with: the embedded one or Redis, chosen at
//! start (a [`Store`] returns `impl Future`, so it cannot be a trait object).

use slidegate::store::{Dimensions, Request, Store};
use slidegate::{Decision, Error, MemoryStore, MultiDecision};
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
