//! One caller's loop, closed or open, and the run's per-second timeline.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use hdrhistogram::Histogram;
use rand::Rng as _;
use rand::rngs::SmallRng;

use super::{Answer, Caller, Run, Second, SecondTally, YIELD_EVERY};
use crate::bench::plan::Bound;
use crate::bench::report::Latency;
use crate::cli::KeyOrder;

/// One caller's loop: calls until the bound, recording every outcome.
pub(super) async fn drive(
    mut caller: Caller,
    run: Arc<Run>,
    mut rng: SmallRng,
    mut latency: Histogram<u64>,
) -> anyhow::Result<Histogram<u64>> {
    // This second's latencies, handed to the timeline when the second ends.
    let mut second = latency.clone();
    let (mut second_index, mut second_errors) = (0usize, 0u64);
    let mut since_yield = 0;
    loop {
        let late = match &run.pacer {
            Some(pacer) => match tokio::time::timeout_at(run.deadline.into(), pacer.next()).await {
                Ok(late) => late,
                Err(_) => break,
            },
            None => false,
        };
        let ticket = run.issued.fetch_add(1, Relaxed);
        if let Bound::Requests(total) = run.bound
            && ticket >= total
        {
            break;
        }
        let due = run.rate.map(|rate| run.started + Duration::from_secs_f64(ticket as f64 / rate));
        if due.unwrap_or_else(Instant::now) >= run.deadline {
            if matches!(run.bound, Bound::Requests(_)) {
                run.time_limited.store(true, Relaxed);
            }
            break;
        }
        let key = match run.key_order {
            KeyOrder::RoundRobin => ticket % run.keys,
            KeyOrder::Random => rng.random_range(0..run.keys),
        };
        // As in the library's bench: a late caller counts from when its
        // request was due (it waited behind slow answers).
        let asked_at = match due {
            Some(due) if late => due,
            _ => Instant::now(),
        };
        let result = caller.call(key).await;
        let micros = u64::try_from(asked_at.elapsed().as_micros()).unwrap_or(u64::MAX);
        latency.saturating_record(micros);
        let index =
            usize::try_from(asked_at.saturating_duration_since(run.started).as_secs()).unwrap_or(usize::MAX);
        if index != second_index {
            hand_over(&run, second_index, &mut second, &mut second_errors)?;
            second_index = index;
        }
        second.saturating_record(micros);
        match result {
            Ok(Answer::Allowed) => {
                run.allowed.fetch_add(1, Relaxed);
            }
            Ok(Answer::Denied) => {
                run.denied.fetch_add(1, Relaxed);
            }
            Err(failure) => {
                run.errors.fetch_add(1, Relaxed);
                second_errors += 1;
                let mut failures = run.failures.lock().unwrap_or_else(|p| p.into_inner());
                failures.entry(failure.kind).or_insert((0, failure.message)).0 += 1;
            }
        }
        run.completed.fetch_add(1, Relaxed);
        since_yield += 1;
        if since_yield == YIELD_EVERY {
            since_yield = 0;
            tokio::task::yield_now().await;
        }
    }
    hand_over(&run, second_index, &mut second, &mut second_errors)?;
    Ok(latency)
}

/// Adds one caller's figures for second `index` to the timeline.
fn hand_over(run: &Run, index: usize, second: &mut Histogram<u64>, errors: &mut u64) -> anyhow::Result<()> {
    if second.is_empty() && *errors == 0 {
        return Ok(());
    }
    let mut timeline = run.timeline.lock().unwrap_or_else(|p| p.into_inner());
    while timeline.len() <= index {
        timeline.push(SecondTally { errors: 0, latency: Histogram::new_from(second) });
    }
    timeline[index].latency.add(&*second).context("cannot merge latency histograms")?;
    timeline[index].errors += *errors;
    second.reset();
    *errors = 0;
    Ok(())
}

/// The run's per-second figures.
pub(super) fn seconds(run: &Run) -> Vec<Second> {
    let timeline = run.timeline.lock().unwrap_or_else(|p| p.into_inner());
    timeline
        .iter()
        .enumerate()
        .map(|(second, tally)| Second {
            second: second as u64,
            requests: tally.latency.len(),
            errors: tally.errors,
            latency_us: Latency::of(&tally.latency),
        })
        .collect()
}
