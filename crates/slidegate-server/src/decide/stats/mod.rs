//! What the service keeps for its status page (`GET /v1/stats`) and its
//! per-limit metrics: per limit, admitted and limited requests per second
//! over five minutes, and envoy ratelimit's counters ([`counters`]); per
//! edge (RLS, the HTTP API, the gateway), the same rates; the most limited
//! identities; store latency and degraded answers; domains and
//! descriptors the configuration did not know. Every part has a fixed
//! size whatever the traffic.

mod counters;
mod latency;
mod misses;
mod rates;
mod top;
mod usage;

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use slidegate::{Decision, State};

use crate::decide::request::{CheckAnswer, CheckError, Code};

pub(crate) use counters::{Labels, LimitCounters};
pub(crate) use latency::Latency;
pub(crate) use misses::Misses;
pub(crate) use rates::{Rates, SECONDS};
use top::{Denial, Descriptor, Entry};
pub(crate) use top::{Heavy, TopLimited};
pub(crate) use usage::Usage;

/// How many identities the top-limited sketch counts.
pub(crate) const TOP_K: usize = 100;

/// The service's own statistics, shared by every request.
#[derive(Debug)]
pub(crate) struct ServiceStats {
    top: Mutex<TopLimited>,
    latency: Latency,
    degraded: AtomicU64,
    /// Degraded answers per second (counted as admitted).
    degraded_rates: Rates,
    /// Answered requests per second by edge, in [`Edge`]'s order.
    edges: [Rates; 3],
    misses: Misses,
}

impl Default for ServiceStats {
    fn default() -> ServiceStats {
        ServiceStats {
            top: Mutex::new(TopLimited::new(TOP_K)),
            latency: Latency::default(),
            degraded: AtomicU64::new(0),
            degraded_rates: Rates::default(),
            edges: Default::default(),
            misses: Misses::default(),
        }
    }
}

/// Where a request came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Edge {
    /// Envoy's gRPC rate limit service.
    Rls,
    /// `/v1/check`, `/v1/peek`, `/json`.
    Http,
    Gateway,
}

impl Edge {
    const ALL: [(Edge, &'static str); 3] =
        [(Edge::Rls, "rls"), (Edge::Http, "http"), (Edge::Gateway, "gateway")];
}

/// Seconds since the UNIX epoch.
pub(crate) fn now_s() -> u64 {
    now_ms() / 1000
}

/// Milliseconds since the UNIX epoch.
pub(crate) fn now_ms() -> u64 {
    let since = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH);
    since.map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A descriptor as the most limited identities show it:
/// `domain: key=value, key=value`.
pub(crate) fn shown(domain: &str, entries: &[(String, String)]) -> String {
    let mut shown = domain.to_owned();
    for (i, (key, value)) in entries.iter().enumerate() {
        shown.push_str(if i == 0 { ": " } else { ", " });
        shown.push_str(key);
        shown.push('=');
        shown.push_str(value);
    }
    shown
}

/// The most bytes of a descriptor the sketch keys it by as it is; a
/// longer one is keyed by its digest (the sketch's memory stays bounded).
const MAX_KEY_BYTES: usize = 512;

/// The most limited identities' key of a descriptor: its domain and
/// entries, each length-prefixed, so two descriptors never share a row
/// (`user="a, b=c"` is not `user=a, b=c`); past [`MAX_KEY_BYTES`], its
/// SHA-256.
fn sketch_key(domain: &str, entries: &[(String, String)]) -> String {
    let mut key = String::new();
    let parts = std::iter::once(domain).chain(entries.iter().flat_map(|(k, v)| [k.as_str(), v.as_str()]));
    for part in parts {
        key.push_str(itoa::Buffer::new().format(part.len()));
        key.push(':');
        key.push_str(part);
    }
    if key.len() <= MAX_KEY_BYTES {
        return key;
    }
    use sha2::Digest as _;
    sha2::Sha256::digest(key.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// One limit's decision in a request, as [`ServiceStats::decided`] counts it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Counted<'a> {
    /// Which part of the request it decided (an index into `decided`'s
    /// `who`).
    pub(crate) part: usize,
    /// The limit's stats key: the metrics' `limit` label.
    pub(crate) stat_key: &'a str,
    /// Whether the stats key names request values: past the first
    /// [`MAX_VALUE_KEYS`](crate::runtime::telemetry::MAX_VALUE_KEYS) such
    /// keys it is counted as `_other`.
    pub(crate) names_values: bool,
    /// The limit's name (its rule's).
    pub(crate) name: &'a str,
    /// The limit's own counters (not used when the stats key names
    /// request values: those are counted by lookup).
    pub(crate) counters: &'a LimitCounters,
    /// The request's weight.
    pub(crate) hits: u64,
    pub(crate) decision: Decision,
}

impl ServiceStats {
    /// Counts a charged request of `domain`, whichever edge decided it —
    /// RLS, the HTTP API or the gateway all report here. `who` is its parts
    /// as the most limited identities show them (a descriptor's entries;
    /// on the gateway, the denying limits and their keys); `limits` the
    /// decision of every limit that met it.
    ///
    /// A failure policy's answer counts the request as degraded (once);
    /// each decision counts in its limit's counters (see [`counters`]);
    /// each denial counts by its limit, in
    /// `slidegate_service_over_limit_total{domain,limit,name}` or, a shadow
    /// limit's, `slidegate_shadow_over_limit_total{domain,limit,name}`; each
    /// part an enforced limit denied counts among the most limited
    /// identities, with the numbers of its longest wait.
    pub(crate) fn decided<'a, L>(&self, domain: &str, who: &[&[(String, String)]], limits: L)
    where
        L: IntoIterator<Item = Counted<'a>>,
        L::IntoIter: Clone,
    {
        let limits = limits.into_iter();
        if limits.clone().any(|c| c.decision.state == State::Degraded) {
            self.degraded.fetch_add(1, Ordering::Relaxed);
            self.degraded_rates.record(now_s(), true);
        }
        for counted in limits.clone() {
            let key = match counted.names_values {
                true => Cow::Owned(crate::runtime::telemetry::bounded_value_key(counted.stat_key.to_owned())),
                false => Cow::Borrowed(counted.stat_key),
            };
            let labels = Labels { domain, limit: &key, name: counted.name };
            if counted.names_values {
                LimitCounters::record_uncached(labels, counted.hits, &counted.decision);
            } else {
                counted.counters.record(labels, counted.hits, &counted.decision);
            }
            let name = if counted.decision.is_shadow_denial() {
                "slidegate_shadow_over_limit_total"
            } else if !counted.decision.allowed {
                "slidegate_service_over_limit_total"
            } else {
                continue;
            };
            metrics::counter!(
                name,
                "domain" => domain.to_owned(),
                "limit" => key.into_owned(),
                "name" => counted.name.to_owned()
            )
            .increment(1);
        }
        for (part, entries) in who.iter().enumerate() {
            let binding = limits
                .clone()
                .filter(|c| c.part == part && !c.decision.allowed)
                .max_by_key(|c| c.decision.retry_after);
            if let Some(binding) = binding {
                let denial = Denial {
                    remaining: binding.decision.remaining,
                    retry_after: binding.decision.retry_after,
                    limit: binding.name,
                    banned: binding.decision.state == State::Banned,
                };
                self.limited(domain, entries, denial);
            }
        }
    }

    /// Counts a limited request of the descriptor `entries` in `domain`.
    fn limited(&self, domain: &str, entries: &[(String, String)], denial: Denial<'_>) {
        let new_row = || {
            let descriptor = Descriptor {
                domain: domain.to_owned(),
                entries: entries
                    .iter()
                    .map(|(key, value)| Entry { key: key.clone(), value: value.clone() })
                    .collect(),
            };
            (shown(domain, entries), descriptor)
        };
        let key = sketch_key(domain, entries);
        self.top.lock().unwrap_or_else(PoisonError::into_inner).record(&key, new_row, denial);
    }

    /// An operator reset the counters of the descriptor `entries` in
    /// `domain`: its row among the most limited identities says so.
    pub(crate) fn reset(&self, domain: &str, entries: &[(String, String)]) {
        self.top.lock().unwrap_or_else(PoisonError::into_inner).forgot(&sketch_key(domain, entries));
    }

    /// Counts a request answered on `edge` (RLS, the HTTP API):
    /// admitted, or over the limit (an invalid or unavailable answer is
    /// neither).
    pub(crate) fn answered(&self, edge: Edge, outcome: &Result<CheckAnswer, CheckError>) {
        if let Ok(answer) = outcome {
            self.routed(edge, now_s(), answer.code == Code::Ok);
        }
    }

    /// Counts a request decided on `edge` in second `now_s`: admitted, or
    /// limited.
    pub(crate) fn routed(&self, edge: Edge, now_s: u64, admitted: bool) {
        self.edges[edge as usize].record(now_s, admitted);
    }

    /// Per edge (`rls`, `http`, `gateway`), requests admitted and limited
    /// per second over the five minutes up to `now_s`.
    pub(crate) fn edges(&self, now_s: u64) -> serde_json::Value {
        let mut edges = serde_json::Map::new();
        for (edge, name) in Edge::ALL {
            let (admitted, limited) = self.edges[edge as usize].series(now_s);
            edges.insert(name.into(), serde_json::json!({ "admitted": admitted, "limited": limited }));
        }
        edges.into()
    }

    /// Degraded answers per second over the five minutes up to `now_s`.
    pub(crate) fn degraded_series(&self, now_s: u64) -> Vec<u32> {
        self.degraded_rates.series(now_s).0
    }

    /// Counts a store call that took `took`.
    pub(crate) fn store_call(&self, took: Duration) {
        self.latency.record(now_s(), u64::try_from(took.as_micros()).unwrap_or(u64::MAX));
    }

    /// The most limited identities, most first (see [`TopLimited::top`]).
    pub(crate) fn top(&self) -> Vec<Heavy> {
        self.top.lock().unwrap_or_else(PoisonError::into_inner).top(now_ms())
    }

    /// Store latency `(p50, p99)` in µs over the last minute or two.
    pub(crate) fn store_latency(&self) -> Option<(f64, f64)> {
        let q = self.latency.quantiles(now_s(), &[0.5, 0.99])?;
        Some((q[0], q[1]))
    }

    /// The requests the configuration did not know.
    pub(crate) fn misses(&self) -> &Misses {
        &self.misses
    }

    /// Requests a failure policy answered since start.
    pub(crate) fn degraded_total(&self) -> u64 {
        self.degraded.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    static COUNTERS: LimitCounters = LimitCounters::new();

    fn counted(part: usize, decision: Decision) -> Counted<'static> {
        Counted {
            part,
            stat_key: "edge.user",
            names_values: false,
            name: "u",
            counters: &COUNTERS,
            hits: 1,
            decision,
        }
    }

    #[test]
    fn a_request_counts_each_denied_part_with_its_longest_wait() {
        let stats = ServiceStats::default();
        let (alice, bob) = (entries(&[("user", "alice")]), entries(&[("user", "bob")]));
        let second = Duration::from_secs(1);
        let limits = [
            counted(0, Decision::limited(5, 0, second, second)),
            counted(0, Decision::limited(5, 2, 3 * second, 3 * second)),
            counted(1, Decision::allowed(5, 4, second)),
        ];
        stats.decided("edge", &[&alice, &bob], limits);
        let top = stats.top();
        assert_eq!(top.len(), 1, "only the denied part: {top:?}");
        assert_eq!(top[0].identity, "edge: user=alice");
        assert_eq!((top[0].count, top[0].remaining, top[0].retry_after_ms), (1, 2, 3000));
        assert_eq!(stats.degraded_total(), 0);
    }

    #[test]
    fn descriptors_shown_alike_are_counted_apart_and_reset_each_its_own() {
        let stats = ServiceStats::default();
        let (one, two) = (entries(&[("user", "a, b=c")]), entries(&[("user", "a"), ("b", "c")]));
        let second = Duration::from_secs(1);
        for who in [&one, &two, &two] {
            stats.decided("edge", &[who], [counted(0, Decision::limited(5, 0, second, second))]);
        }
        let top = stats.top();
        assert_eq!(top.len(), 2, "two rows, though both show as `edge: user=a, b=c`: {top:?}");
        assert!(top.iter().all(|h| h.identity == "edge: user=a, b=c"));
        assert_eq!(top[0].descriptor.as_ref().map(|d| d.entries.len()), Some(2), "the one counted twice");
        assert_eq!(top[1].descriptor.as_ref().map(|d| d.entries.len()), Some(1));
        stats.reset("edge", &one);
        let top = stats.top();
        assert_eq!((top[0].state, top[1].state), ("limited", "reset"), "only its own row");
        let long = entries(&[("user", &"x".repeat(2000))]);
        assert_eq!(sketch_key("edge", &long).len(), 64, "a long descriptor is keyed by its digest");
    }

    #[test]
    fn a_shadow_denial_or_a_degraded_answer_is_no_limited_identity() {
        let stats = ServiceStats::default();
        let alice = entries(&[("user", "alice")]);
        let mut shadow = Decision::limited(0, 0, Duration::from_secs(1), Duration::from_secs(1));
        shadow.allowed = true;
        shadow.source = slidegate::Source::Shadow;
        let mut degraded = Decision::allowed(5, 5, Duration::from_secs(1));
        degraded.state = State::Degraded;
        stats.decided("edge", &[&alice], [counted(0, shadow), counted(0, degraded)]);
        assert!(stats.top().is_empty());
        assert_eq!(stats.degraded_total(), 1, "once per request");
    }
}
