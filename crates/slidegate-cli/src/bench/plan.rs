//! What a `slidegate bench` run does: its plan, bound and limiter settings.

use std::time::Duration;

use slidegate::limits::DEFAULT_DEADLINE;
use slidegate::{FailurePolicy, Limiter, Rule, Store};

use crate::cli::{BenchBound, Entry, KeyOrder};

/// When a run stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// After this many checks in total.
    Requests(u64),
    /// After this much time.
    Duration(Duration),
}

impl Bound {
    /// The bound the flags name (clap guarantees exactly one).
    ///
    /// # Errors
    ///
    /// When neither or both are given.
    pub fn from_args(args: &BenchBound) -> anyhow::Result<Bound> {
        match (args.requests, args.duration) {
            (Some(requests), None) => Ok(Bound::Requests(requests)),
            (None, Some(duration)) => Ok(Bound::Duration(duration)),
            _ => anyhow::bail!("give exactly one of --requests and --duration"),
        }
    }
}

/// How the [`Limiter`] around the store is set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimiterSettings {
    /// What answers when the store fails or is too slow.
    pub policy: FailurePolicy,
    /// The longest one store call may take.
    pub deadline: Duration,
    /// Whether repeated denials are answered locally.
    pub deny_cache: bool,
    /// Whether the circuit breaker is on.
    pub breaker: bool,
}

impl Default for LimiterSettings {
    /// The library's defaults.
    fn default() -> Self {
        LimiterSettings {
            policy: FailurePolicy::default(),
            deadline: DEFAULT_DEADLINE,
            deny_cache: true,
            breaker: true,
        }
    }
}

impl LimiterSettings {
    /// A limiter on `store` with these settings.
    pub fn build<S: Store>(&self, store: S) -> Limiter<S> {
        let mut builder = Limiter::builder(store).failure_policy(self.policy).deadline(self.deadline);
        if !self.deny_cache {
            builder = builder.no_deny_cache();
        }
        if !self.breaker {
            builder = builder.no_breaker();
        }
        builder.build()
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct BenchPlan {
    /// The rule every check uses.
    pub rule: Rule,
    /// Cost of every check.
    pub cost: u32,
    /// Keys `bench-0` … `bench-{keys-1}`.
    pub keys: u64,
    /// Concurrent tasks.
    pub concurrency: u64,
    /// When to stop.
    pub bound: Bound,
    /// How keys are picked.
    pub key_order: KeyOrder,
    /// Open loop: decisions offered per second in total (see `--rate`).
    pub rate: Option<f64>,
    /// Seed of the random key choice (task `i` uses `seed + i`).
    pub seed: u64,
    /// The longest a run may take, whatever its bound: a `--requests` run
    /// stops here even if its checks are slow ([`MAX_BENCH_DURATION`](crate::cli::MAX_BENCH_DURATION)).
    pub time_limit: Duration,
    /// The limiter around the store.
    pub limiter: LimiterSettings,
    /// The entry point checks go through.
    pub entry: Entry,
}
