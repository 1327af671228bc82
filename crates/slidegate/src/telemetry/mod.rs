//! Metrics, through the [`metrics`] facade: the library records, the
//! application (or `slidegate-server`) picks an exporter. Without a
//! recorder installed every call here is a no-op.
//!
//! | metric | kind | labels |
//! |---|---|---|
//! | `slidegate_decisions_total` | counter | `rule`, `outcome` (`allowed` `warned` `limited` `banned` `degraded` `disabled` `shadow`: a shadow rule's denial, overruled) |
//! | `slidegate_store_duration_seconds` | histogram | `result` (`ok` `error` `timeout`) |
//! | `slidegate_degraded_total` | counter | `rule`, `policy` (`fail_open` `fail_closed` `fallback` `fail`), `reason` |
//! | `slidegate_breaker_transitions_total` | counter | `to` (`open` `half_open` `closed`) |
//! | `slidegate_breaker_state` | gauge | — (0 closed, 1 half-open, 2 open) |
//! | `slidegate_deny_cache_hits_total` | counter | `rule` |
//! | `slidegate_adaptive_factor` | gauge | — (the factor [adaptive limits](crate::adaptive) apply to every limit) |
//!
//! `slidegate-redis` adds `slidegate_script_reloads_total`.
//!
//! [`LogThrottle`] gates the warnings that would otherwise repeat with
//! every request (a failing store, a full fallback store; in
//! `slidegate-server`, an unreachable upstream): one line per interval,
//! with the count held back.

use std::time::Duration;

use crate::{BreakerState, Decision, Rule};

pub(crate) mod keys;
mod throttle;

pub use throttle::{LogThrottle, THROTTLED_NOTE};

pub(crate) fn decision(rule: &Rule, decision: &Decision) {
    let key = rule.metric_keys().decision(decision);
    metrics::with_recorder(|recorder| recorder.register_counter(key, &keys::METADATA)).increment(1);
}

pub(crate) fn store_call(elapsed: Duration, result: &'static str) {
    metrics::histogram!("slidegate_store_duration_seconds", "result" => result).record(elapsed.as_secs_f64());
}

pub(crate) fn degraded(rule: &Rule, policy: &'static str, reason: &'static str) {
    metrics::counter!(
        "slidegate_degraded_total",
        "rule" => metrics::SharedString::from_shared(rule.state_label()),
        "policy" => policy,
        "reason" => reason,
    )
    .increment(1);
}

pub(crate) fn breaker_transition(to: BreakerState) {
    metrics::counter!("slidegate_breaker_transitions_total", "to" => to.as_str()).increment(1);
    let level = match to {
        BreakerState::Closed => 0.0,
        BreakerState::HalfOpen => 1.0,
        BreakerState::Open => 2.0,
    };
    metrics::gauge!("slidegate_breaker_state").set(level);
}

pub(crate) fn deny_cache_hit(rule: &Rule) {
    let key = rule.metric_keys().deny_cache_hits();
    metrics::with_recorder(|recorder| recorder.register_counter(key, &keys::METADATA)).increment(1);
}

pub(crate) fn adaptive_factor(factor: f64) {
    metrics::gauge!("slidegate_adaptive_factor").set(factor);
}
