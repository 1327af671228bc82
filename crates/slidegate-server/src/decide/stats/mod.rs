//! What the service keeps for its status page (`GET /v1/stats`): per
//! limit, admitted and limited requests per second over five minutes; the
//! most limited identities; store latency and degraded answers. Every part
//! has a fixed size whatever the traffic.

mod latency;
mod rates;
mod top;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime};

pub(crate) use latency::Latency;
pub(crate) use rates::{Rates, SECONDS};
pub(crate) use top::{Heavy, TopLimited};

/// How many identities the top-limited sketch counts.
pub(crate) const TOP_K: usize = 100;

/// The service's own statistics, shared by every request.
#[derive(Debug)]
pub(crate) struct ServiceStats {
    top: Mutex<TopLimited>,
    latency: Latency,
    degraded: AtomicU64,
}

impl Default for ServiceStats {
    fn default() -> ServiceStats {
        ServiceStats {
            top: Mutex::new(TopLimited::new(TOP_K)),
            latency: Latency::default(),
            degraded: AtomicU64::new(0),
        }
    }
}

/// Seconds since the UNIX epoch.
pub(crate) fn now_s() -> u64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl ServiceStats {
    /// Counts a limited request of the descriptor `entries` in `domain`,
    /// shown as `domain: key=value, key=value`.
    pub(crate) fn limited(
        &self,
        domain: &str,
        entries: &[(String, String)],
        remaining: u32,
        retry_after: Duration,
    ) {
        let mut shown = domain.to_owned();
        for (i, (key, value)) in entries.iter().enumerate() {
            shown.push_str(if i == 0 { ": " } else { ", " });
            shown.push_str(key);
            shown.push('=');
            shown.push_str(value);
        }
        self.top.lock().unwrap_or_else(PoisonError::into_inner).record(&shown, remaining, retry_after);
    }

    /// Counts a store call that took `took`.
    pub(crate) fn store_call(&self, took: Duration) {
        self.latency.record(now_s(), u64::try_from(took.as_micros()).unwrap_or(u64::MAX));
    }

    /// Counts a request a failure policy answered.
    pub(crate) fn degraded(&self) {
        self.degraded.fetch_add(1, Ordering::Relaxed);
    }

    /// The most limited identities, most first.
    pub(crate) fn top(&self) -> Vec<Heavy> {
        self.top.lock().unwrap_or_else(PoisonError::into_inner).top()
    }

    /// Store latency `(p50, p99)` in µs over the last minute or two.
    pub(crate) fn store_latency(&self) -> Option<(f64, f64)> {
        let q = self.latency.quantiles(now_s(), &[0.5, 0.99])?;
        Some((q[0], q[1]))
    }

    /// Requests a failure policy answered since start.
    pub(crate) fn degraded_total(&self) -> u64 {
        self.degraded.load(Ordering::Relaxed)
    }
}
