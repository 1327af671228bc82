//! What `slidegate bench` reports: the JSON object of `--json`, and the
//! human summary.

use std::fmt::Write;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

/// Latency percentiles, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Latency {
    /// Median.
    pub p50: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Slowest decision.
    pub max: u64,
    /// Arithmetic mean.
    pub mean: f64,
}

impl Latency {
    /// The percentiles of `histogram` (recorded in microseconds).
    pub fn of(histogram: &Histogram<u64>) -> Latency {
        Latency {
            p50: histogram.value_at_quantile(0.5),
            p99: histogram.value_at_quantile(0.99),
            p999: histogram.value_at_quantile(0.999),
            max: histogram.max(),
            mean: histogram.mean(),
        }
    }
}

use crate::redis_stats::RedisStats;

/// The outcome of one benchmark run; serialised as-is by `--json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BenchReport {
    /// `memory`, or the Redis URL with any password hidden.
    pub store: String,
    /// The rule, e.g. `100 per 1s (sliding log)`.
    pub rule: String,
    /// Algorithm short name: `log`, `counter`, `fixed`, `gcra`.
    pub algorithm: String,
    /// The rule's limit.
    pub limit: u32,
    /// The rule's window in milliseconds.
    pub window_ms: u64,
    /// Cost of every request.
    pub cost: u32,
    /// Distinct keys.
    pub keys: u64,
    /// How keys were picked: `random` or `round-robin`.
    pub key_order: String,
    /// Concurrent tasks.
    pub concurrency: u64,
    /// Open-loop runs (`--rate`): the decisions per second offered.
    pub offered_per_sec: Option<f64>,
    /// The limiter's failure policy: `fail_open`, `fail_closed` or `fallback`.
    pub policy: String,
    /// Decisions attempted (allowed + denied + errors).
    pub requests: u64,
    /// Decisions that admitted the request.
    pub allowed: u64,
    /// Decisions that denied it.
    pub denied: u64,
    /// Of `allowed` + `denied`, the decisions the failure policy made because
    /// the store failed, missed the deadline, or the breaker was open.
    pub degraded: u64,
    /// Of `denied`, the denials the limiter's deny cache answered without
    /// asking the store (always 0 on the memory store, which has none).
    pub deny_cache_hits: u64,
    /// Checks that returned an error: invalid input only, since the limiter
    /// answers store failures by its policy.
    pub errors: u64,
    /// A `--requests` run stopped at the 10-minute time limit before it
    /// made all its decisions (`requests` says how many it made).
    pub stopped_at_time_limit: bool,
    /// Circuit-breaker state changes seen by polling every 10 ms (a lower
    /// bound: a state held for less than one poll can be missed).
    pub breaker_transitions: u64,
    /// The breaker's state at the end: `closed`, `open`, `half_open`, or
    /// `off` with `--no-breaker`.
    pub breaker_state: String,
    /// Wall-clock time of the run, in seconds.
    pub elapsed_secs: f64,
    /// `requests / elapsed_secs`.
    pub decisions_per_sec: f64,
    /// Latency of each check, including failed ones.
    pub latency_us: Latency,
    /// The first error's message, if any check failed.
    pub first_error: Option<String>,
    /// The baseline run instead of slidegate (`naive-zset`), if any.
    pub baseline: Option<String>,
    /// The Redis server's figures, with `--redis-stats`.
    pub redis: Option<RedisStats>,
}

/// Decisions per second, 0 when nothing could be timed.
pub fn rate(requests: u64, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 { requests as f64 / secs } else { 0.0 }
}

impl BenchReport {
    /// The summary for a terminal.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "slidegate bench: {} on {}", self.rule, self.store);
        let _ = write!(
            out,
            "  {} keys ({}), {} concurrent tasks, cost {}, policy {}",
            self.keys, self.key_order, self.concurrency, self.cost, self.policy
        );
        match self.offered_per_sec {
            Some(rate) => {
                let _ =
                    writeln!(out, ", open loop at {} decisions/s\n", group_thousands(rate.round() as u64));
            }
            None => out.push_str("\n\n"),
        }
        let rows = [
            ("decisions", format!("{} in {:.3} s", self.requests, self.elapsed_secs)),
            ("throughput", format!("{} decisions/s", group_thousands(self.decisions_per_sec.round() as u64))),
            ("allowed", self.allowed.to_string()),
            ("denied", self.denied.to_string()),
            ("degraded", self.degraded.to_string()),
            ("deny cache", format!("{} hits", self.deny_cache_hits)),
            ("errors", self.errors.to_string()),
            ("breaker", format!("{} transitions, ends {}", self.breaker_transitions, self.breaker_state)),
            (
                "latency (µs)",
                format!(
                    "p50 {}  p99 {}  p99.9 {}  max {}  mean {:.1}",
                    self.latency_us.p50,
                    self.latency_us.p99,
                    self.latency_us.p999,
                    self.latency_us.max,
                    self.latency_us.mean
                ),
            ),
        ];
        for (name, value) in rows {
            let _ = writeln!(out, "  {name:<13} {value}");
        }
        if self.stopped_at_time_limit {
            let _ =
                writeln!(out, "  {:<13} stopped at the time limit before all --requests were made", "note");
        }
        if let Some(baseline) = &self.baseline {
            let _ = writeln!(out, "  {:<13} {baseline} (not slidegate's script)", "baseline");
        }
        if let Some(redis) = &self.redis {
            let _ = writeln!(
                out,
                "  {:<13} {:.2} µs per check, {:.2} µs per EVALSHA ({} calls); server busy {:.0} % of a core; \
                 {:.0} bytes per key ({} keys sampled)",
                "redis side",
                redis.usec_per_check,
                redis.usec_per_call,
                redis.evalsha_calls,
                redis.server_cpu_share * 100.0,
                redis.memory_per_key,
                redis.keys_sampled
            );
        }
        if let Some(error) = &self.first_error {
            let _ = writeln!(out, "  first error   {error}");
        }
        out
    }
}

/// `1234567` as `1,234,567`.
fn group_thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_thousands() {
        assert_eq!(group_thousands(0), "0");
        assert_eq!(group_thousands(999), "999");
        assert_eq!(group_thousands(1000), "1,000");
        assert_eq!(group_thousands(1_234_567), "1,234,567");
    }

    #[test]
    fn latency_from_histogram() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
        for v in 1..=1000 {
            h.record(v).unwrap();
        }
        let latency = Latency::of(&h);
        assert_eq!((latency.p50, latency.max), (500, 1000));
        assert!(latency.p99 >= 990 && latency.p999 >= latency.p99);
        assert_eq!(rate(10, Duration::from_secs(2)), 5.0);
        assert_eq!(rate(10, Duration::ZERO), 0.0);
    }
}
