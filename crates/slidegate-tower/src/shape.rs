//! Shaping ([`RateLimitLayer::delay`](crate::RateLimitLayer::delay)): a
//! request a rule would deny, whose exact `retry_after` falls within the
//! rule's delay, waits that long and is decided again — charged only when
//! admitted — instead of being answered 429. Waiting requests hold a
//! place: per identity no more than the rule admits within the delay, and
//! no more than a bound in all; past either, 429 at once. A request whose
//! client goes away while it waits is dropped with its place, charged
//! nothing.

use std::time::Duration;

use slidegate::{MultiDecision, Source, State};

use crate::config::Config;

/// The grain of the store's clock (milliseconds, `retry_after` rounded up
/// to them), each way. Each window's wave of admissions may land up to
/// this much after the exact instant, and the window slides from when
/// requests were really admitted: a wait that ends no later than the
/// delay plus a tick per window the delay spans is within the delay.
const CLOCK_TICK: Duration = Duration::from_millis(2);

/// How a limited request may wait: for `wait`, as one of `identity`'s
/// requests, of which `cap` may wait at once.
pub(crate) struct Wait {
    pub(crate) wait: Duration,
    pub(crate) identity: String,
    pub(crate) cap: usize,
}

/// Whether the request decided by `multi` (its decisions in the order of
/// `keys`: each rule's index and key) may wait, having waited `waited`
/// already: every rule that denied has a delay and no penalty, none
/// banned or beyond its limit whatever the wait, and the wait ends within
/// the shortest of their delays.
pub(crate) fn wait_for<S, K: AsRef<str>>(
    config: &Config<S>,
    keys: &[(usize, K)],
    multi: &MultiDecision,
    waited: Duration,
) -> Option<Wait> {
    let mut shortest = Duration::MAX;
    let mut binding: Option<(usize, Duration)> = None;
    for (at, ((i, _), decision)) in
        keys.iter().zip(&multi.decisions).enumerate().filter(|(_, (_, d))| !d.allowed)
    {
        let keyed = &config.dimensions[*i];
        if decision.state == State::Banned
            || decision.source == Source::CostAboveLimit
            || keyed.rule.penalty().is_some()
        {
            return None;
        }
        shortest = shortest.min(keyed.delay.or(config.delay)?);
        if binding.is_none_or(|(_, longest)| decision.retry_after > longest) {
            binding = Some((at, decision.retry_after));
        }
    }
    let (at, _) = binding?;
    // The binding denial's rule and key name whose requests wait: as many
    // as its burst, or as it admits within the delay.
    let (i, key) = &keys[at];
    let keyed = &config.dimensions[*i];
    let rule = &keyed.rule;
    let windows = shortest.as_millis() / rule.window().as_millis().max(1) + 1;
    let tolerance = CLOCK_TICK * u32::try_from(windows.min(50)).unwrap_or(50);
    let wait = multi.retry_after().max(Duration::from_millis(1));
    if waited.saturating_add(wait) > shortest.saturating_add(tolerance) {
        return None;
    }
    let cap = match keyed.burst {
        Some(burst) => u128::from(burst),
        None => u128::from(rule.limit()) * shortest.as_millis() / rule.window().as_millis().max(1),
    };
    let cap = usize::try_from(cap).unwrap_or(usize::MAX).max(1);
    let identity = format!("{}\u{0}{}", rule.state_name(), key.as_ref());
    Some(Wait { wait, identity, cap })
}
