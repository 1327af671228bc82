//! A route's upstream health for the status page: answers and failures
//! per second over five minutes, and the time to an answer's head over the
//! last minute or two. Kept by a route across reloads that keep its name.

use serde_json::{Value, json};

use crate::decide::stats::{Latency, Rates, now_s};

/// One route's upstream health.
#[derive(Debug, Default)]
pub(crate) struct UpstreamHealth {
    /// Admitted: answered; limited: failed (unreachable, failed, late).
    answers: Rates,
    latency: Latency,
}

impl UpstreamHealth {
    /// An upstream answered (its head) after `micros` µs.
    pub(crate) fn answered(&self, micros: u64) {
        let now = now_s();
        self.answers.record(now, true);
        self.latency.record(now, micros);
    }

    /// An upstream could not be reached, failed or did not answer in time.
    pub(crate) fn failed(&self) {
        self.answers.record(now_s(), false);
    }

    /// What `/v1/stats` shows of it at second `now`: answers and failures
    /// in the last five minutes, and the time to an answer's head (p50,
    /// p99, µs) of the last minute or two.
    pub(crate) fn view(&self, now: u64) -> Value {
        let (answered, failed) = self.answers.series(now);
        let latency = self.latency.quantiles(now, &[0.5, 0.99]);
        json!({
            "answered_5m": answered.iter().map(|&n| u64::from(n)).sum::<u64>(),
            "failed_5m": failed.iter().map(|&n| u64::from(n)).sum::<u64>(),
            "latency_us": latency.map(|q| json!({ "p50": q[0], "p99": q[1] })),
        })
    }
}
