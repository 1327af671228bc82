//! Per-limit counters, as envoy ratelimit keeps them per descriptor, so
//! its dashboards port by name:
//!
//! | slidegate | envoy ratelimit (statsd → Prometheus) | counts |
//! |---|---|---|
//! | `slidegate_rate_limit_total_hits_total` | `ratelimit_service_rate_limit_total_hits` | every hit |
//! | `slidegate_rate_limit_over_limit_total` | `…_over_limit` | hits the limit denied (shadow ones too) |
//! | `slidegate_rate_limit_near_limit_total` | `…_near_limit` | admitted hits that take the count above 80 % of the limit |
//! | `slidegate_rate_limit_within_limit_total` | `…_within_limit` | admitted hits |
//! | `slidegate_rate_limit_shadow_mode_total` | `…_shadow_mode` | hits a shadow limit would have denied |
//!
//! Labelled `domain`, `limit` (the stats key, envoy's `key1`: the
//! descriptor path) and `name` (the limit's rule's name: the one
//! configured, or else its stats key, in the characters a rule name
//! takes). A hit is one unit of a request's weight.

use std::sync::OnceLock;

use metrics::Counter;
use slidegate::Decision;

/// The counters' names, in [`Handles`]' order.
const NAMES: [&str; 5] = [
    "slidegate_rate_limit_total_hits_total",
    "slidegate_rate_limit_over_limit_total",
    "slidegate_rate_limit_near_limit_total",
    "slidegate_rate_limit_within_limit_total",
    "slidegate_rate_limit_shadow_mode_total",
];

const TOTAL: usize = 0;
const OVER: usize = 1;
const NEAR: usize = 2;
const WITHIN: usize = 3;
const SHADOW: usize = 4;

/// What labels a limit's counters.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Labels<'a> {
    pub(crate) domain: &'a str,
    /// The stats key.
    pub(crate) limit: &'a str,
    pub(crate) name: &'a str,
}

/// One limit's counters, registered on its first decision after the
/// server's recorder is installed, and then recorded without a lookup.
#[derive(Debug)]
pub(crate) struct LimitCounters(OnceLock<[Counter; 5]>);

impl Default for LimitCounters {
    fn default() -> LimitCounters {
        LimitCounters::new()
    }
}

impl Clone for LimitCounters {
    /// A fresh cell: the clone registers the same series again when it
    /// first counts.
    fn clone(&self) -> LimitCounters {
        LimitCounters::default()
    }
}

impl PartialEq for LimitCounters {
    /// Not part of what a limit is.
    fn eq(&self, _: &LimitCounters) -> bool {
        true
    }
}

impl Eq for LimitCounters {}

impl LimitCounters {
    /// Counters not yet registered.
    pub(crate) const fn new() -> LimitCounters {
        LimitCounters(OnceLock::new())
    }

    /// Counts a decision of `hits` under the limit `labels` names.
    pub(crate) fn record(&self, labels: Labels<'_>, hits: u64, decision: &Decision) {
        if crate::runtime::telemetry::recorder_is_installed() {
            count(self.0.get_or_init(|| handles(labels)), hits, decision);
        } else {
            // Handles taken before the server's recorder is installed would
            // record nowhere; the facade's lookup finds whatever recorder
            // there is.
            count(&handles(labels), hits, decision);
        }
    }

    /// Counts a decision of a limit whose stats key the request's values
    /// name (looked up each time: such keys are many and bounded).
    pub(crate) fn record_uncached(labels: Labels<'_>, hits: u64, decision: &Decision) {
        count(&handles(labels), hits, decision);
    }
}

fn handles(labels: Labels<'_>) -> [Counter; 5] {
    NAMES.map(|name| {
        metrics::counter!(
            name,
            "domain" => labels.domain.to_owned(),
            "limit" => labels.limit.to_owned(),
            "name" => labels.name.to_owned()
        )
    })
}

fn count(counters: &[Counter; 5], hits: u64, decision: &Decision) {
    counters[TOTAL].increment(hits);
    if decision.is_shadow_denial() {
        counters[OVER].increment(hits);
        counters[SHADOW].increment(hits);
    } else if !decision.allowed {
        counters[OVER].increment(hits);
    } else {
        counters[WITHIN].increment(hits);
        let near = near_limit_hits(decision.limit, decision.remaining, hits);
        if near > 0 {
            counters[NEAR].increment(near);
        }
    }
}

/// How many of `hits` just admitted under `limit`, leaving `remaining`,
/// took the count above 80 % of the limit (`floor(0.8 × limit)`), as
/// envoy ratelimit counts them.
fn near_limit_hits(limit: u32, remaining: u32, hits: u64) -> u64 {
    let (limit, remaining) = (u64::from(limit), u64::from(remaining));
    if remaining > limit {
        return 0;
    }
    let used = limit - remaining;
    hits.min(used.saturating_sub(limit * 4 / 5))
}

#[cfg(test)]
mod tests {
    use super::near_limit_hits;

    #[test]
    fn near_limit_counts_the_hits_past_eighty_percent_as_envoy_ratelimit_does() {
        // Limit 10: the 9th and 10th hits take the count above 8.
        let near: Vec<u64> = (1..=10).map(|used| near_limit_hits(10, 10 - used, 1)).collect();
        assert_eq!(near, [0, 0, 0, 0, 0, 0, 0, 0, 1, 1]);
        // A weight of 5 taking the count from 5 to 10: its last two hits.
        assert_eq!(near_limit_hits(10, 0, 5), 2);
        assert_eq!(near_limit_hits(10, 1, 5), 1);
        assert_eq!(near_limit_hits(1, 0, 1), 1);
        assert_eq!(near_limit_hits(0, 0, 1), 0);
        assert_eq!(near_limit_hits(u32::MAX, u32::MAX, 1), 0);
        assert_eq!(near_limit_hits(5, 9, 1), 0, "a remaining above the limit is not near it");
    }
}
