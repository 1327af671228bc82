//! A store double for the limiter's tests: it stands in for a *remote*
//! store and can be told to fail or hang (the same behaviour against real,
//! killed and paused Redis processes is tested in
//! `slidegate-redis/tests/faults.rs`).
#![allow(dead_code, unreachable_pub, missing_docs)]

use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::time::Duration;

use slidegate::store::{Dimensions, LeaseRequest, Request, ReservationRequest};
use slidegate::{
    BreakerConfig, Decision, Error, ErrorKind, FailurePolicy, Limiter, ManualClock, MemoryStore,
    MultiDecision, Rule, Store,
};

pub const ANSWER: u8 = 0;
pub const FAIL: u8 = 1;
pub const HANG: u8 = 2;

/// A "remote" store: decides with a memory store, fails or hangs on demand,
/// and counts the calls that reach it.
#[derive(Debug, Clone)]
pub struct Remote {
    pub state: MemoryStore,
    pub mode: Arc<AtomicU8>,
    pub calls: Arc<AtomicU64>,
    /// Says it releases charges (as a Redis Cluster does).
    pub releases: Arc<AtomicBool>,
}

impl Remote {
    pub fn new(clock: &ManualClock) -> Remote {
        Remote {
            state: MemoryStore::builder().clock(clock.clone()).build(),
            mode: Arc::new(AtomicU8::new(ANSWER)),
            calls: Arc::new(AtomicU64::new(0)),
            releases: Arc::new(AtomicBool::new(false)),
        }
    }

    pub fn set(&self, mode: u8) {
        self.mode.store(mode, Ordering::SeqCst);
    }

    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }
}

impl Remote {
    /// Fails or hangs as told, after counting the call.
    async fn reach(&self) -> Result<(), Error> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        match self.mode.load(Ordering::SeqCst) {
            FAIL => Err(Error::new(ErrorKind::Unavailable, "connection refused")),
            HANG => std::future::pending().await,
            _ => Ok(()),
        }
    }
}

impl Store for Remote {
    async fn check(&self, request: &Request<'_>) -> Result<Decision, Error> {
        self.reach().await?;
        self.state.check(request).await
    }

    async fn check_all(&self, dimensions: &Dimensions<'_>) -> Result<MultiDecision, Error> {
        self.reach().await?;
        self.state.check_all(dimensions).await
    }

    async fn peek_all(&self, dimensions: &Dimensions<'_>) -> Result<MultiDecision, Error> {
        self.reach().await?;
        self.state.peek_all(dimensions).await
    }

    async fn reset(&self, request: &Request<'_>) -> Result<bool, Error> {
        self.reach().await?;
        self.state.reset(request).await
    }

    async fn reserve(
        &self,
        reservation: &ReservationRequest<'_>,
        estimate: u32,
        ttl_ms: u64,
    ) -> Result<Decision, Error> {
        self.reach().await?;
        self.state.reserve(reservation, estimate, ttl_ms).await
    }

    async fn settle(
        &self,
        reservation: &ReservationRequest<'_>,
        actual: u32,
    ) -> Result<Option<Decision>, Error> {
        self.reach().await?;
        self.state.settle(reservation, actual).await
    }

    async fn acquire(&self, lease: &LeaseRequest<'_>) -> Result<Decision, Error> {
        self.reach().await?;
        self.state.acquire(lease).await
    }

    async fn release(&self, lease: &LeaseRequest<'_>) -> Result<bool, Error> {
        self.reach().await?;
        self.state.release(lease).await
    }

    async fn renew(&self, lease: &LeaseRequest<'_>) -> Result<bool, Error> {
        self.reach().await?;
        self.state.renew(lease).await
    }

    fn releases_charges(&self) -> bool {
        self.releases.load(Ordering::SeqCst)
    }
}

pub fn rule(limit: u32) -> Rule {
    Rule::per_second(NonZeroU32::new(limit).unwrap())
}

pub fn setup(policy: FailurePolicy) -> (Limiter<Remote>, Remote, ManualClock) {
    let clock = ManualClock::new(1_000_000);
    let remote = Remote::new(&clock);
    let limiter = Limiter::builder(remote.clone())
        .failure_policy(policy)
        .breaker(BreakerConfig::default().failure_threshold(3).open_for(Duration::from_millis(100)))
        .clock(clock.clone())
        .build();
    (limiter, remote, clock)
}
