//! One `slidegate bench` task: checks in a loop until the run's bound, and
//! counts every outcome in the [`Tally`] all tasks share.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rand::Rng;
use rand::rngs::SmallRng;
use slidegate::{Limiter, Source, State, Store};

use super::entry::{self, Answer, App};
use super::pacer::Pacer;
use super::plan::{BenchPlan, Bound};
use crate::cli::Entry;
use crate::cli::KeyOrder;

/// A task yields to the scheduler every this many checks, so that checks
/// that answer without waiting (memory store, deny cache, open breaker)
/// still share the threads fairly.
const YIELD_EVERY: u32 = 64;

/// Counters the tasks share.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    /// Tickets handed out: with `--requests`, the ticket decides whether a
    /// check is still due, so the total is exact across tasks.
    pub(crate) issued: AtomicU64,
    /// Checks answered, for the progress bar.
    pub(crate) completed: AtomicU64,
    /// Decisions that admitted the request.
    pub(crate) allowed: AtomicU64,
    /// Decisions that denied it.
    pub(crate) denied: AtomicU64,
    /// Decisions (of either kind) made by the failure policy.
    pub(crate) degraded: AtomicU64,
    /// Denials from the limiter's deny cache.
    pub(crate) deny_cache_hits: AtomicU64,
    /// Checks that returned an error.
    pub(crate) errors: AtomicU64,
    /// A `--requests` run stopped at the time limit before its count.
    pub(crate) time_limited: AtomicBool,
    /// The first error's message: enough to tell what went wrong without
    /// printing thousands of the same line.
    pub(crate) first_error: Mutex<Option<String>>,
}

/// One task's share of the run.
pub(crate) struct Worker<S> {
    /// A clone of the one limiter every task shares (breaker, deny cache).
    pub(crate) limiter: Limiter<S>,
    /// The app of a layer entry point, around the same limiter.
    pub(crate) app: Option<App<S>>,
    /// What to run.
    pub(crate) plan: BenchPlan,
    /// When the run started (the open loop's schedule counts from it).
    pub(crate) started: Instant,
    /// When the run stops: the end of a `--duration` run, the time limit
    /// of a `--requests` run. No check starts after it, and no task waits
    /// for the open loop's next ticket past it.
    pub(crate) deadline: Instant,
    /// This task's own key choice, seeded so runs repeat.
    pub(crate) rng: SmallRng,
    /// This task's latencies; merged after the run so tasks never contend.
    pub(crate) latency: Histogram<u64>,
    /// The counters every task adds to.
    pub(crate) tally: Arc<Tally>,
    /// The open loop's schedule (`--rate`), shared by all tasks.
    pub(crate) pacer: Option<Arc<Pacer>>,
}

impl<S: Store> Worker<S> {
    /// Checks until the bound is reached; returns the latency of its checks.
    pub(crate) async fn run(mut self) -> Histogram<u64> {
        let (mut key, mut address) = (String::new(), String::new());
        let mut since_yield = 0;
        loop {
            // Open loop: wait for the pacer to release a ticket. Ticket n
            // is due n / rate after the start; being taken only once
            // released, it is due by now.
            let late = match &self.pacer {
                Some(pacer) => match tokio::time::timeout_at(self.deadline.into(), pacer.next()).await {
                    Ok(late) => late,
                    Err(_) => {
                        let left = matches!(self.plan.bound, Bound::Requests(total) if self.tally.issued.load(Relaxed) < total);
                        return self.stop(left);
                    }
                },
                None => false,
            };
            let ticket = self.tally.issued.fetch_add(1, Relaxed);
            let due = self.plan.rate.map(|rate| self.started + Duration::from_secs_f64(ticket as f64 / rate));
            if let Bound::Requests(total) = self.plan.bound
                && ticket >= total
            {
                return self.latency;
            }
            if due.unwrap_or_else(Instant::now) >= self.deadline {
                // A requests run is cut short: this ticket was still due.
                let left = matches!(self.plan.bound, Bound::Requests(_));
                return self.stop(left);
            }
            let index = match self.plan.key_order {
                KeyOrder::RoundRobin => ticket % self.plan.keys,
                KeyOrder::Random => self.rng.random_range(0..self.plan.keys),
            };
            key.clear();
            let _ = write!(key, "bench-{index}");

            // Latency counts from when the request was due if this task
            // was late (it waited behind slow answers: that is the
            // system's), from the release if it was waiting for the ticket
            // (the pacer's 100 µs steps are the tool's, not the system's).
            let asked_at = match due {
                Some(due) if late => due,
                _ => Instant::now(),
            };
            let result = match &self.app {
                Some(app) => {
                    let address = entry::reads_address(self.plan.entry).then_some(&mut address);
                    entry::ask(app, &key, index, address).await
                }
                None => match self.plan.entry {
                    Entry::Charge => self.limiter.charge(&self.plan.rule, &key, self.plan.cost).await,
                    Entry::Acquire => self.lease(&key).await,
                    Entry::Reserve => self.reservation(&key).await,
                    _ => self.limiter.check_n(&self.plan.rule, &key, self.plan.cost).await,
                }
                .map_or_else(
                    |error| Err(format!("{:#}", anyhow::Error::new(error))),
                    |d| {
                        Ok(Answer {
                            allowed: d.allowed,
                            degraded: d.state == State::Degraded,
                            cached: d.source == Source::DenyCache,
                        })
                    },
                ),
            };
            let micros = u64::try_from(asked_at.elapsed().as_micros()).unwrap_or(u64::MAX);
            self.latency.saturating_record(micros);
            match result {
                Ok(answer) => {
                    let verdict = if answer.allowed { &self.tally.allowed } else { &self.tally.denied };
                    verdict.fetch_add(1, Relaxed);
                    if answer.degraded {
                        self.tally.degraded.fetch_add(1, Relaxed);
                    } else if answer.cached {
                        self.tally.deny_cache_hits.fetch_add(1, Relaxed);
                    }
                }
                Err(error) => {
                    let mut first = self.tally.first_error.lock().unwrap_or_else(|p| p.into_inner());
                    first.get_or_insert(error);
                    self.tally.errors.fetch_add(1, Relaxed);
                }
            }
            self.tally.completed.fetch_add(1, Relaxed);

            since_yield += 1;
            if since_yield == YIELD_EVERY {
                since_yield = 0;
                tokio::task::yield_now().await;
            }
        }
    }

    /// Stops at the deadline; `left` says a `--requests` run had checks
    /// left, cut short by the time limit.
    /// One lease of the rule's limit at once (its window the lease's ttl),
    /// taken and given back: [`Entry::Acquire`]'s decision.
    async fn lease(&self, key: &str) -> Result<slidegate::Decision, slidegate::Error> {
        let limit = slidegate::ConcurrencyLimit::new(
            "bench-leases",
            self.plan.rule.limit(),
            self.plan.rule.window(),
        )?;
        let lease = self.limiter.acquire(&limit, key).await?;
        let decision = *lease.decision();
        lease.release().await?;
        Ok(decision)
    }

    /// The cost reserved for a minute and committed at the same cost:
    /// [`Entry::Reserve`]'s decision.
    async fn reservation(&self, key: &str) -> Result<slidegate::Decision, slidegate::Error> {
        let (rule, cost) = (&self.plan.rule, self.plan.cost);
        let reserved = self.limiter.reserve(rule, key, cost, std::time::Duration::from_secs(60)).await?;
        let decision = *reserved.decision();
        reserved.commit(cost).await?;
        Ok(decision)
    }

    fn stop(self, left: bool) -> Histogram<u64> {
        if left {
            self.tally.time_limited.store(true, Relaxed);
        }
        self.latency
    }
}
