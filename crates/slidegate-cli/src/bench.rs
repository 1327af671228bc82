//! `slidegate bench`: concurrent tasks issue checks against a store, and
//! the run reports throughput, outcomes and latency percentiles.
//!
//! Failed checks are counted, never fatal: a benchmark of a flaky store
//! should say how flaky it is, not stop at the first timeout.

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::ValueEnum;
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use slidegate::{DEFAULT_MAX_KEYS, MemoryStore, Rule, Store};

use crate::bench_report::{BenchReport, Latency, rate};
use crate::cli::{BenchArgs, BenchBound, KeyOrder};
use crate::store_choice::{AnyStore, RedisOptions, StoreSpec, connect_redis, run_prefix};

/// Slowest latency the histograms hold exactly (60 s, in microseconds);
/// slower checks are recorded as this.
const MAX_LATENCY_US: u64 = 60_000_000;

/// A task yields to the scheduler every this many checks, so that stores
/// that answer without waiting (memory) still share the threads fairly.
const YIELD_EVERY: u32 = 64;

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
    pub fn from_args(args: &BenchBound) -> anyhow::Result<Bound> {
        match (args.requests, args.duration) {
            (Some(requests), None) => Ok(Bound::Requests(requests)),
            (None, Some(duration)) => Ok(Bound::Duration(duration)),
            _ => anyhow::bail!("give exactly one of --requests and --duration"),
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct BenchPlan {
    /// The rule every check uses.
    pub rule: Rule,
    /// Keys `bench-0` … `bench-{keys-1}`.
    pub keys: u64,
    /// Concurrent tasks.
    pub concurrency: u64,
    /// When to stop.
    pub bound: Bound,
    /// How keys are picked.
    pub key_order: KeyOrder,
    /// Seed of the random key choice (task `i` uses `seed + i`).
    pub seed: u64,
}

/// What a run measured.
#[derive(Debug, Clone)]
pub struct BenchOutcome {
    /// Admitted checks.
    pub allowed: u64,
    /// Denied checks.
    pub denied: u64,
    /// Failed checks.
    pub errors: u64,
    /// The first failure's message.
    pub first_error: Option<String>,
    /// Wall-clock time from the first check to the last.
    pub elapsed: Duration,
    /// Latency of every check, in microseconds.
    pub latency: Histogram<u64>,
}

/// Counters the tasks share.
#[derive(Debug, Default)]
struct Tally {
    issued: AtomicU64,
    completed: AtomicU64,
    allowed: AtomicU64,
    denied: AtomicU64,
    errors: AtomicU64,
    first_error: Mutex<Option<String>>,
}

/// Runs `slidegate bench`.
///
/// # Errors
///
/// An invalid rule or a store that cannot be connected to. Failed checks
/// are counted in the report instead.
pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    let plan = BenchPlan {
        rule: args.rule.to_rule()?,
        keys: args.keys,
        concurrency: args.concurrency,
        bound: Bound::from_args(&args.bound)?,
        key_order: args.key_order,
        seed: args.seed,
    };
    let store = match &args.store {
        StoreSpec::Memory => {
            let max_keys = usize::try_from(args.keys).unwrap_or(usize::MAX).max(DEFAULT_MAX_KEYS);
            AnyStore::Memory(MemoryStore::builder().max_keys(max_keys).build())
        }
        StoreSpec::Redis { url } => {
            let options = RedisOptions {
                prefix: run_prefix("bench"),
                client_clock: None,
                response_timeout: args.timeout,
            };
            AnyStore::Redis(connect_redis(url, options).await?)
        }
    };
    let show_progress = !args.json && std::io::stdout().is_terminal();
    let outcome = execute(&store, &plan, show_progress).await?;
    let report = report(&args.store, &plan, &outcome);
    if args.json {
        println!("{}", serde_json::to_string(&report).context("cannot encode the report")?);
    } else {
        print!("{}", report.render());
    }
    Ok(())
}

/// Runs `plan` against `store`, drawing a progress bar on the terminal when
/// `show_progress` is set.
///
/// # Errors
///
/// Only if a task panics; failed checks are counted.
pub async fn execute<S: Store + Clone>(
    store: &S,
    plan: &BenchPlan,
    show_progress: bool,
) -> anyhow::Result<BenchOutcome> {
    let template = Histogram::<u64>::new_with_bounds(1, MAX_LATENCY_US, 3).context("latency histogram")?;
    let tally = Arc::new(Tally::default());
    let started = Instant::now();
    let deadline = match plan.bound {
        Bound::Duration(duration) => started + duration,
        Bound::Requests(_) => started,
    };
    let progress = progress_bar(plan.bound, show_progress);
    let ticker = tokio::spawn(tick(progress.clone(), Arc::clone(&tally), plan.bound, started));

    let mut tasks = Vec::new();
    for task in 0..plan.concurrency {
        let worker = Worker {
            store: store.clone(),
            plan: plan.clone(),
            deadline,
            rng: SmallRng::seed_from_u64(plan.seed.wrapping_add(task)),
            latency: template.clone(),
            tally: Arc::clone(&tally),
        };
        tasks.push(tokio::spawn(worker.run()));
    }
    let mut latency = template;
    for task in tasks {
        let histogram = task.await.context("a benchmark task failed")?;
        latency.add(&histogram).context("cannot merge latency histograms")?;
    }
    let elapsed = started.elapsed();
    ticker.abort();
    progress.finish_and_clear();

    let first_error = tally.first_error.lock().map(|e| e.clone()).unwrap_or_else(|p| p.into_inner().clone());
    Ok(BenchOutcome {
        allowed: tally.allowed.load(Relaxed),
        denied: tally.denied.load(Relaxed),
        errors: tally.errors.load(Relaxed),
        first_error,
        elapsed,
        latency,
    })
}

/// One task's share of the run.
struct Worker<S> {
    store: S,
    plan: BenchPlan,
    deadline: Instant,
    rng: SmallRng,
    latency: Histogram<u64>,
    tally: Arc<Tally>,
}

impl<S: Store> Worker<S> {
    async fn run(mut self) -> Histogram<u64> {
        let mut key = String::new();
        let mut since_yield = 0;
        loop {
            let ticket = self.tally.issued.fetch_add(1, Relaxed);
            let done = match self.plan.bound {
                Bound::Requests(total) => ticket >= total,
                Bound::Duration(_) => Instant::now() >= self.deadline,
            };
            if done {
                return self.latency;
            }
            let index = match self.plan.key_order {
                KeyOrder::RoundRobin => ticket % self.plan.keys,
                KeyOrder::Random => self.rng.random_range(0..self.plan.keys),
            };
            key.clear();
            let _ = write!(key, "bench-{index}");

            let asked = Instant::now();
            let result = self.store.check(&self.plan.rule, &key, 1).await;
            let micros = u64::try_from(asked.elapsed().as_micros()).unwrap_or(u64::MAX);
            self.latency.saturating_record(micros);
            match result {
                Ok(decision) if decision.allowed => self.tally.allowed.fetch_add(1, Relaxed),
                Ok(_) => self.tally.denied.fetch_add(1, Relaxed),
                Err(error) => {
                    let mut first = self.tally.first_error.lock().unwrap_or_else(|p| p.into_inner());
                    first.get_or_insert_with(|| format!("{:#}", anyhow::Error::new(error)));
                    self.tally.errors.fetch_add(1, Relaxed)
                }
            };
            self.tally.completed.fetch_add(1, Relaxed);

            since_yield += 1;
            if since_yield == YIELD_EVERY {
                since_yield = 0;
                tokio::task::yield_now().await;
            }
        }
    }
}

fn progress_bar(bound: Bound, visible: bool) -> ProgressBar {
    if !visible {
        return ProgressBar::hidden();
    }
    let (length, template) = match bound {
        Bound::Requests(total) => {
            (total, "{spinner} {elapsed_precise} [{wide_bar}] {human_pos}/{human_len} decisions, {eta} left")
        }
        Bound::Duration(duration) => (
            u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
            "{spinner} {elapsed_precise} [{wide_bar}] {msg}",
        ),
    };
    let style = ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar());
    ProgressBar::new(length).with_style(style.progress_chars("=> "))
}

/// Moves the progress bar ten times a second until aborted.
async fn tick(progress: ProgressBar, tally: Arc<Tally>, bound: Bound, started: Instant) {
    let mut interval = tokio::time::interval(Duration::from_millis(100));
    loop {
        interval.tick().await;
        let completed = tally.completed.load(Relaxed);
        match bound {
            Bound::Requests(_) => progress.set_position(completed),
            Bound::Duration(_) => {
                progress.set_position(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX));
                progress.set_message(format!("{completed} decisions"));
            }
        }
    }
}

/// The report of `outcome`.
pub fn report(store: &StoreSpec, plan: &BenchPlan, outcome: &BenchOutcome) -> BenchReport {
    let requests = outcome.allowed + outcome.denied + outcome.errors;
    let key_order = plan.key_order.to_possible_value().map_or_else(String::new, |v| v.get_name().to_owned());
    BenchReport {
        store: store.to_string(),
        rule: plan.rule.to_string(),
        algorithm: plan.rule.algorithm().short_name().to_owned(),
        limit: plan.rule.limit(),
        window_ms: plan.rule.window_ms(),
        keys: plan.keys,
        key_order,
        concurrency: plan.concurrency,
        requests,
        allowed: outcome.allowed,
        denied: outcome.denied,
        errors: outcome.errors,
        elapsed_secs: outcome.elapsed.as_secs_f64(),
        decisions_per_sec: rate(requests, outcome.elapsed),
        latency_us: Latency::of(&outcome.latency),
        first_error: outcome.first_error.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(bound: Bound, key_order: KeyOrder) -> BenchPlan {
        BenchPlan {
            rule: Rule::new(10, Duration::from_secs(60)).unwrap(),
            keys: 7,
            concurrency: 4,
            bound,
            key_order,
            seed: 1,
        }
    }

    #[tokio::test]
    async fn requests_bound_is_exact() {
        let store = MemoryStore::new();
        let plan = plan(Bound::Requests(1000), KeyOrder::RoundRobin);
        let outcome = execute(&store, &plan, false).await.unwrap();
        // 7 keys × 10 allowed each within the minute; the rest denied.
        assert_eq!((outcome.allowed, outcome.denied, outcome.errors), (70, 930, 0));
        assert_eq!(outcome.latency.len(), 1000);
        let report = report(&StoreSpec::Memory, &plan, &outcome);
        assert_eq!(report.requests, 1000);
        assert_eq!(report.key_order, "round-robin");
    }

    #[tokio::test]
    async fn errors_are_counted_with_the_first_message() {
        let store = MemoryStore::builder().max_keys(1).shards(1).build();
        let outcome = execute(&store, &plan(Bound::Requests(50), KeyOrder::Random), false).await.unwrap();
        assert_eq!(outcome.allowed + outcome.denied + outcome.errors, 50);
        assert!(outcome.errors > 0);
        assert!(outcome.first_error.unwrap().contains("capacity"));
    }
}
