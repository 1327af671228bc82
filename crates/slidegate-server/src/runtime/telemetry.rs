//! The service's own metrics, through the `metrics` facade (the server
//! installs the Prometheus recorder; the library's metrics join them).
//!
//! * `slidegate_service_requests_total{api, code}` — `api` is `rls`,
//!   `json`, `check` or `peek`; `code` is `ok`, `over_limit`, `invalid`
//!   or `unavailable`;
//! * `slidegate_service_request_duration_seconds{api, code}` — a histogram;
//! * `slidegate_service_degraded_total{api}` — answers a failure policy gave;
//! * `slidegate_service_unknown_domain_total{domain}`,
//!   `slidegate_service_unmatched_total{descriptor}` — requests for no
//!   configured domain, descriptors matching no limit (`domain: key, key`),
//!   the first hundred names each, the rest as `_other`;
//! * `slidegate_service_over_limit_total{domain, limit, name}` and
//!   `slidegate_shadow_over_limit_total{domain, limit, name}` — denials by
//!   limit (its stats key, as envoy ratelimit names it, and its rule's
//!   name; keys named by request values — `detailed_metric`,
//!   `value_to_metric`, a descriptor's own limit — are bounded: past
//!   [`MAX_VALUE_KEYS`] distinct ones, `limit` is `_other`); the gateway's
//!   in `domain="gateway"`, by the descriptor each limit counts as
//!   (`gateway.route_<route>.<key>`);
//! * `slidegate_rate_limit_*_total{domain, limit, name}` — per limit,
//!   envoy ratelimit's counters (`decide::stats::counters`);
//! * `slidegate_config_reloads_total{result}` — `ok` or `error`;
//! * `slidegate_gateway_requests_total{route, outcome}` — `outcome` is
//!   `admitted`, `limited`, `unavailable`, `no_route` or `refused` (a
//!   request the gateway
//!   will not forward); `route` is the route's name (`-` for none);
//! * `slidegate_gateway_request_duration_seconds{route}` — until the
//!   response head, a histogram;
//! * `slidegate_gateway_upstream_errors_total{route, kind}` — `connect`,
//!   `failed` or `timeout`.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock, PoisonError};

use metrics::{Counter, Histogram};
use std::time::Instant;

use crate::decide::request::{CheckAnswer, CheckError, Code};

/// Which API a request came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Api {
    Rls,
    Json,
    Check,
    Peek,
    Charge,
}

impl Api {
    fn label(self) -> &'static str {
        match self {
            Api::Rls => "rls",
            Api::Json => "json",
            Api::Check => "check",
            Api::Peek => "peek",
            Api::Charge => "charge",
        }
    }

    const ALL: [Api; 5] = [Api::Rls, Api::Json, Api::Check, Api::Peek, Api::Charge];
}

/// The `code` label of an outcome.
const CODES: [&str; 4] = ["ok", "over_limit", "invalid", "unavailable"];

/// The handles of the per-request metrics, registered once: looking a
/// labelled metric up by name on every request cost more than recording it.
struct RequestMetrics {
    /// By [`Api`], then by [`CODES`].
    requests: Vec<Vec<(Counter, Histogram)>>,
    /// By [`Api`].
    degraded: Vec<Counter>,
}

/// Set once the server's recorder is installed (handles taken before then
/// would record nowhere).
static REQUEST_METRICS: OnceLock<RequestMetrics> = OnceLock::new();

/// Registers the per-request metrics with the recorder just installed.
pub(crate) fn recorder_installed() {
    REQUEST_METRICS.get_or_init(|| RequestMetrics {
        requests: Api::ALL
            .iter()
            .map(|api| {
                CODES
                    .iter()
                    .map(|&code| {
                        (
                            metrics::counter!("slidegate_service_requests_total", "api" => api.label(), "code" => code),
                            metrics::histogram!(
                                "slidegate_service_request_duration_seconds", "api" => api.label(), "code" => code
                            ),
                        )
                    })
                    .collect()
            })
            .collect(),
        degraded: Api::ALL
            .iter()
            .map(|api| metrics::counter!("slidegate_service_degraded_total", "api" => api.label()))
            .collect(),
    });
}

/// Whether the server's recorder is installed: handles taken now record.
pub(crate) fn recorder_is_installed() -> bool {
    REQUEST_METRICS.get().is_some()
}

/// Records one request's outcome and latency.
pub(crate) fn observe(api: Api, outcome: &Result<CheckAnswer, CheckError>, started: Instant) {
    let code = match outcome {
        Ok(answer) if answer.code == Code::Ok => 0,
        Ok(_) => 1,
        Err(CheckError::Invalid(_)) => 2,
        Err(CheckError::Unavailable(_)) => 3,
    };
    let degraded = matches!(outcome, Ok(answer) if answer.degraded);
    let Some(handles) = REQUEST_METRICS.get() else {
        // No recorder of the server's (a decider used on its own): the
        // facade's own lookup, which finds whatever recorder there is.
        let code = CODES[code];
        metrics::counter!("slidegate_service_requests_total", "api" => api.label(), "code" => code)
            .increment(1);
        metrics::histogram!("slidegate_service_request_duration_seconds", "api" => api.label(), "code" => code)
            .record(started.elapsed().as_secs_f64());
        if degraded {
            metrics::counter!("slidegate_service_degraded_total", "api" => api.label()).increment(1);
        }
        return;
    };
    let (requests, duration) = &handles.requests[api as usize][code];
    requests.increment(1);
    duration.record(started.elapsed().as_secs_f64());
    if degraded {
        handles.degraded[api as usize].increment(1);
    }
}

/// Records a reload's result.
pub(crate) fn reload(ok: bool) {
    metrics::counter!("slidegate_config_reloads_total", "result" => if ok { "ok" } else { "error" })
        .increment(1);
}

/// The gateway's requests by route and outcome.
const GATEWAY_REQUESTS: &str = "slidegate_gateway_requests_total";
/// The gateway's time to a response head, by route.
const GATEWAY_DURATION: &str = "slidegate_gateway_request_duration_seconds";

/// Records the outcome of a gateway request that found no route to take
/// it (`refused`, `no_route`) and the time to its response head. Routed
/// requests are recorded by their route's [`RouteMetrics`].
pub(crate) fn gateway_request(route: metrics::SharedString, outcome: &'static str, started: Instant) {
    metrics::counter!(GATEWAY_REQUESTS, "route" => route.clone(), "outcome" => outcome).increment(1);
    metrics::histogram!(GATEWAY_DURATION, "route" => route).record(started.elapsed().as_secs_f64());
}

/// What became of a gateway request that found its route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Admitted,
    Limited,
    Refused,
    /// The store failed and `--on-store-failure` is `unavailable` (503).
    Unavailable,
}

impl Outcome {
    const ALL: [Outcome; 4] = [Outcome::Admitted, Outcome::Limited, Outcome::Refused, Outcome::Unavailable];

    /// Its `outcome` label.
    fn label(self) -> &'static str {
        match self {
            Outcome::Admitted => "admitted",
            Outcome::Limited => "limited",
            Outcome::Refused => "refused",
            Outcome::Unavailable => "unavailable",
        }
    }
}

/// One route's request metrics, registered when the route is compiled —
/// after the server's recorder is installed — and recorded without looking
/// them up by name on every request.
pub(crate) struct RouteMetrics {
    /// By [`Outcome`], in [`Outcome::ALL`]'s order.
    requests: [Counter; Outcome::ALL.len()],
    duration: Histogram,
}

impl RouteMetrics {
    pub(crate) fn new(route: std::sync::Arc<str>) -> RouteMetrics {
        let route = metrics::SharedString::from(route);
        let requests = Outcome::ALL.map(|outcome| {
            metrics::counter!(GATEWAY_REQUESTS, "route" => route.clone(), "outcome" => outcome.label())
        });
        let duration = metrics::histogram!(GATEWAY_DURATION, "route" => route);
        RouteMetrics { requests, duration }
    }

    /// Records a request's outcome and the time to its response head.
    pub(crate) fn record(&self, outcome: Outcome, started: Instant) {
        self.requests[outcome as usize].increment(1);
        self.duration.record(started.elapsed().as_secs_f64());
    }
}

/// Records an upstream that could not be reached, failed or did not answer in time.
pub(crate) fn upstream_error(route: &str, kind: &'static str) {
    metrics::counter!("slidegate_gateway_upstream_errors_total", "route" => route.to_owned(), "kind" => kind)
        .increment(1);
}

/// The most distinct stats keys named by request values that label metrics:
/// each is a time series the metrics endpoint keeps for the life of the
/// process, and the values are whatever clients send.
pub(crate) const MAX_VALUE_KEYS: usize = 1000;

/// `key` if it is one of the first [`MAX_VALUE_KEYS`] stats keys named by
/// request values, else `_other`.
pub(crate) fn bounded_value_key(key: String) -> String {
    static SEEN: Mutex<Option<HashSet<String>>> = Mutex::new(None);
    let mut seen = SEEN.lock().unwrap_or_else(PoisonError::into_inner);
    let seen = seen.get_or_insert_with(HashSet::new);
    if seen.contains(&key) {
        return key;
    }
    if seen.len() >= MAX_VALUE_KEYS {
        return "_other".to_owned();
    }
    seen.insert(key.clone());
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_keys_are_bounded() {
        // The set is the process's: other tests in this binary add keys too.
        let mut admitted = 0;
        loop {
            let key = format!("bounded.user_{admitted}");
            if bounded_value_key(key.clone()) != key {
                break;
            }
            admitted += 1;
            assert!(admitted <= MAX_VALUE_KEYS, "more than {MAX_VALUE_KEYS} keys admitted");
        }
        assert!(admitted > 0);
        assert_eq!(bounded_value_key("bounded.user_new".into()), "_other");
        assert_eq!(bounded_value_key("bounded.user_0".into()), "bounded.user_0", "keys already seen stay");
    }
}
