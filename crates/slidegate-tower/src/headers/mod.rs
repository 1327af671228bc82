//! Quota headers: the IETF `RateLimit-Policy` / `RateLimit` structured
//! fields (draft-ietf-httpapi-ratelimit-headers), the legacy
//! `X-RateLimit-Limit/Remaining/Reset`, and `Retry-After`.

mod numbers;
mod sink;

use std::cell::RefCell;
use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue};
use slidegate::{MultiDecision, Rule, State};

pub(crate) use numbers::{number_value, push_number};
use sink::{Sink, Texts, Value};

/// `X-RateLimit-Limit`.
pub const X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
/// `X-RateLimit-Remaining`.
pub const X_RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
/// `X-RateLimit-Reset` (seconds until the quota is full again).
pub const X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");
/// `RateLimit-Policy` (IETF draft).
pub const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
/// `RateLimit` (IETF draft).
pub const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
/// `X-RateLimit-Degraded: 1`, when enabled: the decision was made by the
/// failure policy because the store could not be asked.
pub const X_RATELIMIT_DEGRADED: HeaderName = HeaderName::from_static("x-ratelimit-degraded");
/// `X-RateLimit-Warning: violations=<n>`: the caller is close to a ban.
pub const X_RATELIMIT_WARNING: HeaderName = HeaderName::from_static("x-ratelimit-warning");

/// Which header families a response carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Families {
    /// `RateLimit-Policy` and `RateLimit` (IETF draft).
    pub ietf: bool,
    /// `X-RateLimit-Limit`, `-Remaining`, `-Reset`.
    pub legacy: bool,
    /// `X-RateLimit-Degraded: 1` when a failure policy decided.
    pub degraded: bool,
}

impl Families {
    /// The families named: IETF fields, legacy headers, the degraded marker.
    pub fn new(ietf: bool, legacy: bool, degraded: bool) -> Families {
        Families { ietf, legacy, degraded }
    }
}

/// The quota headers of a decision, as the layer writes them: `rules[i]`
/// decided `multi.decisions[i]`; with `Retry-After` when it denied. For
/// other edges that answer with the same fields.
pub fn quota_headers(rules: &[&Rule], multi: &MultiDecision, families: Families) -> HeaderMap {
    let mut headers = HeaderMap::new();
    own_quota_headers(&mut headers, rules, multi, families);
    headers
}

/// The headers [`quota_headers`] builds, handed to `put` one at a time as
/// name and value text, in the same order: for answers that carry headers
/// as strings (the rate-limit service's RLS `response_headers_to_add`),
/// without a header map in between.
pub fn for_each_quota_header(
    rules: &[&Rule],
    multi: &MultiDecision,
    families: Families,
    put: impl FnMut(&str, &str),
) {
    own_quota_headers(&mut Texts(put), rules, multi, families);
}

/// The quota headers of a decision, and `Retry-After` when it denied and
/// waiting can admit it (not a cost above a limit), to a sink nothing was
/// written to.
fn own_quota_headers(sink: &mut impl Sink, rules: &[&Rule], multi: &MultiDecision, families: Families) {
    add_quota_headers(sink, &rules.iter().copied(), None, multi, families, Headers::Own);
    if !multi.allowed && !never_admitted(multi) {
        sink.insert(http::header::RETRY_AFTER, Value::Number(retry_after_secs(multi.retry_after())));
    }
}

/// Whether `multi` was denied for a cost above a limit: no wait admits it,
/// so its answer has no `Retry-After`.
pub(crate) fn never_admitted(multi: &MultiDecision) -> bool {
    multi.binding().is_some_and(|d| d.source == slidegate::Source::CostAboveLimit)
}

/// Whole seconds, rounded up (a client waiting the rounded-down time would
/// be refused again).
pub(crate) fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

/// Appends one list item, `"<policy name>";<a>=<x>;<b>=<y>`, to `out`.
fn push_item(out: &mut Vec<u8>, rule: &Rule, (a, x): (&[u8], u64), (b, y): (&[u8], u64)) {
    if !out.is_empty() {
        out.extend_from_slice(b", ");
    }
    // The policy name: the rule's name, or its parameters when unnamed
    // (both plain ASCII, valid in a header).
    out.push(b'"');
    out.extend_from_slice(rule.state_name().as_bytes());
    out.push(b'"');
    out.extend_from_slice(a);
    push_number(out, x);
    out.extend_from_slice(b);
    push_number(out, y);
}

/// The `RateLimit-Policy` item of `rule` enforcing `limit`.
pub(crate) fn push_policy(out: &mut Vec<u8>, rule: &Rule, limit: u32) {
    push_item(out, rule, (b";q=", u64::from(limit)), (b";w=", ceil_secs(rule.window())));
}

/// The `RateLimit-Policy` value of `rules` at their configured limits,
/// which most responses carry: built once, when the layer is.
pub(crate) fn policy_value(rules: &[&Rule]) -> Option<HeaderValue> {
    let mut out = Vec::new();
    for rule in rules {
        push_policy(&mut out, rule, rule.limit());
    }
    HeaderValue::from_bytes(&out).ok()
}

thread_local! {
    /// The buffer header values and bodies are written in before they are
    /// copied out: one allocation per value, not two.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// What `write` puts in a cleared buffer, handed to `finish`.
pub(crate) fn with_scratch<T>(write: impl FnOnce(&mut Vec<u8>), finish: impl FnOnce(&[u8]) -> T) -> T {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buffer) => {
            buffer.clear();
            write(&mut buffer);
            finish(&buffer)
        }
        // Only if `write` or `finish` itself wrote a value: a buffer of its own.
        Err(_) => {
            let mut buffer = Vec::new();
            write(&mut buffer);
            finish(&buffer)
        }
    })
}

/// Whether a sink may already hold quota headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Headers {
    /// The layer's own limited response: nobody else wrote to it.
    Own,
    /// The inner service's response: an inner layer may have.
    Inner,
}

/// Adds the quota headers of `multi` (one decision per rule in `rules`) to
/// `headers` (of kind `kind`). `policy` is the `RateLimit-Policy` value of
/// `rules` at their configured limits, when the caller has it built.
///
/// Layers may be stacked (a global layer around a per-route one): the IETF
/// fields are lists, so each layer adds its policies to what an inner
/// layer wrote; the legacy headers and the warning keep the most binding
/// rule's values (least remaining, then the longest reset).
pub(crate) fn add_quota_headers<'r>(
    headers: &mut impl Sink,
    rules: &(impl Iterator<Item = &'r Rule> + Clone),
    policy: Option<&HeaderValue>,
    multi: &MultiDecision,
    families: Families,
    kind: Headers,
) {
    // Nobody wrote quota headers to an empty map.
    let kind = if headers.is_empty() { Headers::Own } else { kind };
    // Room for the IETF and legacy headers, allocated at most once.
    headers.reserve(5);
    if families.ietf && rules.clone().next().is_some() {
        let pairs = || rules.clone().zip(&multi.decisions);
        // The decision's limit: the one enforced, also when adaptive
        // limits scale the configured one.
        match policy {
            Some(policy) if pairs().all(|(rule, d)| d.limit == rule.limit()) => {
                headers.append(RATELIMIT_POLICY, Value::Built(policy));
            }
            _ => with_scratch(
                |out| pairs().for_each(|(rule, d)| push_policy(out, rule, d.limit)),
                |list| headers.append(RATELIMIT_POLICY, Value::Text(list)),
            ),
        }
        with_scratch(
            |out| {
                for (rule, decision) in pairs() {
                    let remaining = (&b";r="[..], u64::from(decision.remaining));
                    push_item(out, rule, remaining, (b";t=", ceil_secs(decision.reset_after)));
                }
            },
            |list| headers.append(RATELIMIT, Value::Text(list)),
        );
    }
    if families.legacy
        && let Some(binding) = multi.binding()
    {
        let reset = ceil_secs(binding.reset_after);
        let written = match kind {
            Headers::Own => (None, None),
            Headers::Inner => (number(headers, &X_RATELIMIT_REMAINING), number(headers, &X_RATELIMIT_RESET)),
        };
        let binds_more = match written {
            (Some(remaining), Some(written_reset)) => {
                (u64::from(binding.remaining), std::cmp::Reverse(reset))
                    < (remaining, std::cmp::Reverse(written_reset))
            }
            _ => true,
        };
        if binds_more {
            headers.insert(X_RATELIMIT_LIMIT, Value::Number(u64::from(binding.limit)));
            headers.insert(X_RATELIMIT_REMAINING, Value::Number(u64::from(binding.remaining)));
            headers.insert(X_RATELIMIT_RESET, Value::Number(reset));
        }
    }
    if families.degraded && multi.decisions.iter().any(|d| d.state == State::Degraded) {
        headers.insert(X_RATELIMIT_DEGRADED, Value::Number(1));
    }
    if let Some(warned) =
        multi.decisions.iter().filter(|d| d.state == State::Warned).map(|d| d.violations).max()
    {
        let written = (kind == Headers::Inner)
            .then(|| headers.text(&X_RATELIMIT_WARNING))
            .flatten()
            .and_then(|v| v.strip_prefix("violations=")?.parse::<u32>().ok());
        if written.is_none_or(|written| warned > written) {
            with_scratch(
                |out| {
                    out.extend_from_slice(b"violations=");
                    push_number(out, u64::from(warned));
                },
                |value| headers.insert(X_RATELIMIT_WARNING, Value::Text(value)),
            );
        }
    }
}

/// A header holding a whole number (one an inner layer wrote).
fn number(headers: &impl Sink, name: &HeaderName) -> Option<u64> {
    headers.text(name)?.parse().ok()
}

/// `Retry-After` of a denial: whole seconds, rounded up, at least 1.
pub(crate) fn retry_after(decision_retry: Duration) -> HeaderValue {
    number_value(retry_after_secs(decision_retry))
}

/// The seconds of `Retry-After` for a denial's wait.
fn retry_after_secs(decision_retry: Duration) -> u64 {
    ceil_secs(decision_retry).max(1)
}

#[cfg(test)]
mod tests;
