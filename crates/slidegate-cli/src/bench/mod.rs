//! `slidegate bench`: concurrent tasks issue checks through a
//! [`Limiter`](slidegate::Limiter) (deadline, failure policy, circuit breaker, deny cache) on a
//! store, and the run reports throughput, outcomes and latency percentiles.
//!
//! A failing store does not stop the run: the limiter answers by its
//! failure policy, and the report counts those `degraded` decisions and the
//! breaker's transitions — a benchmark of a flaky store should say how
//! flaky it is. Only invalid input is an error, counted the same way.

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::ValueEnum;
use hdrhistogram::Histogram;
use rand::SeedableRng;
use rand::rngs::SmallRng;
use slidegate::limits::{DEFAULT_DEADLINE, DEFAULT_MAX_KEYS};
use slidegate::store::validate_cost;
use slidegate::{MemoryStore, Store};
use tokio::sync::oneshot;

use pacer::Pacer;
use report::{BenchReport, Latency, rate};
use watch::{BreakerWatch, Watched, progress_bar, watch};
use worker::{Tally, Worker};

mod entry;
mod pacer;
mod plan;
pub mod report;
pub mod target;
pub mod watch;
mod worker;

pub use plan::{BenchPlan, Bound, LimiterSettings};

use crate::baselines::{NaiveZset, Ping};
use crate::cli::{Baseline, BenchArgs, MAX_BENCH_DURATION};
use crate::redis_stats::StatsConnection;
use slidegate_server::ServiceStore;

use crate::store_choice::{AnyStore, RedisOptions, StoreSpec, connect_redis, run_prefix};

/// Slowest latency the histograms hold exactly (60 s, in microseconds);
/// slower checks are recorded as this.
const MAX_LATENCY_US: u64 = 60_000_000;

/// What a run measured.
#[derive(Debug, Clone)]
pub struct BenchOutcome {
    /// Admitted checks.
    pub allowed: u64,
    /// Denied checks.
    pub denied: u64,
    /// Checks (allowed or denied) answered by the failure policy because
    /// the store failed, was too slow, or the breaker was open.
    pub degraded: u64,
    /// Denials answered by the limiter's deny cache, without the store.
    pub deny_cache_hits: u64,
    /// Checks that returned an error (invalid input only).
    pub errors: u64,
    /// The run hit [`BenchPlan::time_limit`] before its `--requests`.
    pub time_limited: bool,
    /// The first failure's message.
    pub first_error: Option<String>,
    /// Breaker transitions seen, and its final state.
    pub breaker: BreakerWatch,
    /// Wall-clock time from the first check to the last.
    pub elapsed: Duration,
    /// Latency of every check, in microseconds.
    pub latency: Histogram<u64>,
}

/// Runs `slidegate bench`.
///
/// # Errors
///
/// An invalid rule, cost or flag combination, or a store that cannot be
/// connected to. Failed checks are counted in the report instead.
pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    if let Some(target) = args.service.target.clone() {
        return target::run(target, args).await;
    }
    let given = args.service.given_without_target();
    if !given.is_empty() {
        anyhow::bail!(
            "{} only {} with --target",
            given.join(", "),
            if given.len() == 1 { "applies" } else { "apply" }
        );
    }
    let rule = args
        .rule
        .as_ref()
        .context("give the rule to check (--limit and --window), or --target to drive a running service")?
        .to_rule()?;
    validate_cost(&rule, args.cost).context("invalid --cost")?;
    let plan = BenchPlan {
        rule,
        cost: args.cost,
        keys: args.keys,
        concurrency: args.concurrency,
        bound: Bound::from_args(&args.bound)?,
        key_order: args.key_order,
        rate: args.rate,
        seed: args.seed,
        time_limit: MAX_BENCH_DURATION,
        limiter: LimiterSettings {
            policy: args.policy,
            deadline: args.deadline.unwrap_or(DEFAULT_DEADLINE),
            deny_cache: !args.no_deny_cache,
            breaker: !args.no_breaker,
        },
        entry: args.entry,
    };
    let prefix = args.prefix.clone().unwrap_or_else(|| run_prefix("bench"));
    let spec = StoreSpec::from_many(&args.stores)?;
    let stats_url = match (&spec, args.redis_stats) {
        (StoreSpec::Redis { url }, true) if url.starts_with("redis://") => Some(url.clone()),
        (_, true) => anyhow::bail!("--redis-stats needs a standalone redis:// store"),
        _ => None,
    };
    let store = match (&spec, args.baseline) {
        (StoreSpec::Redis { url }, Some(Baseline::NaiveZset)) => {
            AnyStore::Naive(NaiveZset::connect(url, &prefix).await?)
        }
        (StoreSpec::Redis { url }, Some(Baseline::Ping)) => AnyStore::Ping(Ping::connect(url).await?),
        (StoreSpec::Memory, Some(_)) => anyhow::bail!("--baseline runs on Redis: give --store redis://…"),
        (StoreSpec::Memory, None) => {
            if args.prefix.is_some() {
                anyhow::bail!("--prefix only applies to a Redis store: the memory store is never shared");
            }
            let max_keys = usize::try_from(args.keys).unwrap_or(usize::MAX).max(DEFAULT_MAX_KEYS);
            AnyStore::Service(ServiceStore::Memory(MemoryStore::builder().max_keys(max_keys).build()))
        }
        (StoreSpec::Redis { url }, None) => {
            let options = RedisOptions {
                prefix: Some(prefix.clone()),
                response_timeout: args.timeout,
                no_auto_batch: args.no_auto_batch,
                ..RedisOptions::default()
            };
            AnyStore::Service(ServiceStore::Redis(connect_redis(url, options).await?))
        }
    };
    let stats = match &stats_url {
        Some(url) => Some(StatsConnection::reset(url).await.context("cannot reset the Redis statistics")?),
        None => None,
    };
    let show_progress = !args.json && std::io::stdout().is_terminal();
    let outcome = execute(store, &plan, show_progress).await?;
    // Every check but the deny cache's and the degraded ones asked Redis.
    let store_checks =
        (outcome.allowed + outcome.denied).saturating_sub(outcome.deny_cache_hits + outcome.degraded);
    let mut report = report(&spec, &plan, &outcome);
    report.baseline = args.baseline.and_then(|b| b.to_possible_value()).map(|v| v.get_name().to_owned());
    if let Some(stats) = stats {
        report.redis = Some(
            stats
                .read(&format!("{prefix}*"), 200, store_checks)
                .await
                .context("cannot read the Redis statistics")?,
        );
    }
    if args.json {
        println!("{}", serde_json::to_string(&report).context("cannot encode the report")?);
    } else {
        print!("{}", report.render());
    }
    Ok(())
}

/// Runs `plan` through a limiter on `store`, drawing a progress bar on the
/// terminal when `show_progress` is set.
///
/// # Errors
///
/// Only if a task panics; failed checks are counted.
pub async fn execute<S: Store>(
    store: S,
    plan: &BenchPlan,
    show_progress: bool,
) -> anyhow::Result<BenchOutcome> {
    let limiter = plan.limiter.build(store);
    let template = Histogram::<u64>::new_with_bounds(1, MAX_LATENCY_US, 3).context("latency histogram")?;
    let tally = Arc::new(Tally::default());
    let started = Instant::now();
    // A duration run stops at its end; a requests run at its count, or at
    // the time limit if that comes first.
    let deadline = match plan.bound {
        Bound::Duration(duration) => started + duration.min(plan.time_limit),
        Bound::Requests(_) => started + plan.time_limit,
    };
    let progress = progress_bar(plan.bound, show_progress);
    let (stop, stopped) = oneshot::channel();
    let watched = Watched {
        progress: progress.clone(),
        bound: plan.bound,
        started,
        breaker: {
            let limiter = limiter.clone();
            move || limiter.breaker_state()
        },
        completed: {
            let tally = Arc::clone(&tally);
            move || tally.completed.load(Relaxed)
        },
    };
    let watcher = tokio::spawn(watch(watched, stopped));

    let app = entry::app(&limiter, plan)?;
    let pacer = plan.rate.map(|rate| Pacer::start(rate, started).map(Arc::new)).transpose()?;
    let mut tasks = Vec::new();
    for task in 0..plan.concurrency {
        let worker = Worker {
            limiter: limiter.clone(),
            app: app.clone(),
            plan: plan.clone(),
            started,
            deadline,
            rng: SmallRng::seed_from_u64(plan.seed.wrapping_add(task)),
            latency: template.clone(),
            tally: Arc::clone(&tally),
            pacer: pacer.clone(),
        };
        tasks.push(tokio::spawn(worker.run()));
    }
    let mut latency = template;
    for task in tasks {
        let histogram = task.await.context("a benchmark task failed")?;
        latency.add(&histogram).context("cannot merge latency histograms")?;
    }
    let elapsed = started.elapsed();
    drop(pacer);
    // The watcher polls once more after this, so a breaker still open at
    // the end is counted even in a run shorter than one poll.
    let _ = stop.send(());
    let breaker = watcher.await.context("the breaker watcher failed")?;
    progress.finish_and_clear();

    let first_error = tally.first_error.lock().map(|e| e.clone()).unwrap_or_else(|p| p.into_inner().clone());
    Ok(BenchOutcome {
        allowed: tally.allowed.load(Relaxed),
        denied: tally.denied.load(Relaxed),
        degraded: tally.degraded.load(Relaxed),
        deny_cache_hits: tally.deny_cache_hits.load(Relaxed),
        errors: tally.errors.load(Relaxed),
        time_limited: tally.time_limited.load(Relaxed),
        first_error,
        breaker,
        elapsed,
        latency,
    })
}

/// The report of `outcome`.
pub fn report(store: &StoreSpec, plan: &BenchPlan, outcome: &BenchOutcome) -> BenchReport {
    let requests = outcome.allowed + outcome.denied + outcome.errors;
    let key_order = plan.key_order.to_possible_value().map_or_else(String::new, |v| v.get_name().to_owned());
    let breaker_state = if plan.limiter.breaker { outcome.breaker.last.as_str() } else { "off" };
    BenchReport {
        store: store.to_string(),
        rule: plan.rule.to_string(),
        algorithm: plan.rule.algorithm().short_name().to_owned(),
        limit: plan.rule.limit(),
        window_ms: plan.rule.window_ms(),
        cost: plan.cost,
        keys: plan.keys,
        key_order,
        concurrency: plan.concurrency,
        offered_per_sec: plan.rate,
        policy: plan.limiter.policy.to_string(),
        requests,
        allowed: outcome.allowed,
        denied: outcome.denied,
        degraded: outcome.degraded,
        deny_cache_hits: outcome.deny_cache_hits,
        errors: outcome.errors,
        stopped_at_time_limit: outcome.time_limited,
        breaker_transitions: outcome.breaker.transitions,
        breaker_state: breaker_state.to_owned(),
        elapsed_secs: outcome.elapsed.as_secs_f64(),
        decisions_per_sec: rate(requests, outcome.elapsed),
        latency_us: Latency::of(&outcome.latency),
        first_error: outcome.first_error.clone(),
        baseline: None,
        redis: None,
    }
}

#[cfg(test)]
mod tests;
