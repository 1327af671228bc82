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

/// The quota headers of a decision, and `Retry-After` when it denied, to a
/// sink nothing was written to.
fn own_quota_headers(sink: &mut impl Sink, rules: &[&Rule], multi: &MultiDecision, families: Families) {
    add_quota_headers(sink, &rules.iter().copied(), None, multi, families, Headers::Own);
    if !multi.allowed {
        sink.insert(http::header::RETRY_AFTER, Value::Number(retry_after_secs(multi.retry_after())));
    }
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
mod tests {
    use std::num::NonZeroU32;

    use slidegate::Decision;

    use super::*;

    #[test]
    fn rounds_up() {
        assert_eq!(ceil_secs(Duration::from_millis(1)), 1);
        assert_eq!(ceil_secs(Duration::from_secs(3)), 3);
        assert_eq!(ceil_secs(Duration::from_millis(3001)), 4);
        assert_eq!(retry_after(Duration::ZERO), HeaderValue::from(1u64));
    }

    #[test]
    fn a_scaled_limit_is_the_policy_written() {
        let rule = Rule::per_minute(NonZeroU32::new(100).unwrap()).named("api").unwrap();
        let policy = policy_value(&[&rule]);
        assert_eq!(policy.as_ref().unwrap(), r#""api";q=100;w=60"#);
        let families = Families { ietf: true, legacy: true, degraded: false };
        // Adaptive limits enforce 40 of the configured 100: the prebuilt
        // value is not the one written.
        let scaled = MultiDecision::from_decisions(vec![Decision::allowed(40, 39, Duration::from_secs(60))]);
        let mut headers = HeaderMap::new();
        add_quota_headers(
            &mut headers,
            &[&rule].into_iter(),
            policy.as_ref(),
            &scaled,
            families,
            Headers::Own,
        );
        assert_eq!(headers[RATELIMIT_POLICY], r#""api";q=40;w=60"#);
        assert_eq!(headers[RATELIMIT], r#""api";r=39;t=60"#);
        assert_eq!(headers[X_RATELIMIT_LIMIT], "40");
    }

    #[test]
    fn the_text_writer_hands_on_what_the_map_holds() {
        let a = Rule::per_minute(NonZeroU32::new(100).unwrap()).named("api").unwrap();
        let b = Rule::per_second(NonZeroU32::new(5).unwrap());
        let mut warned = Decision::allowed(5, 1, Duration::from_millis(200));
        warned.state = State::Warned;
        warned.violations = 3;
        let mut degraded = Decision::allowed(100, 100, Duration::ZERO);
        degraded.state = State::Degraded;
        let cases = [
            vec![Decision::allowed(100, 42, Duration::from_millis(59_500)), warned],
            vec![
                Decision::allowed(100, 7, Duration::from_secs(60)),
                Decision::limited(5, 0, Duration::from_millis(1500), Duration::from_secs(1)),
            ],
            vec![degraded, Decision::allowed(5, 4, Duration::from_secs(1))],
        ];
        let all_families = (0..8).map(|bits| Families::new(bits & 1 != 0, bits & 2 != 0, bits & 4 != 0));
        for families in all_families {
            for decisions in &cases {
                let multi = MultiDecision::from_decisions(decisions.clone());
                let map = quota_headers(&[&a, &b], &multi, families);
                let from_map: Vec<(String, String)> = map
                    .iter()
                    .map(|(name, value)| (name.as_str().to_owned(), value.to_str().unwrap().to_owned()))
                    .collect();
                let mut texts = Vec::new();
                for_each_quota_header(&[&a, &b], &multi, families, |name, value| {
                    texts.push((name.to_owned(), value.to_owned()));
                });
                let sorted = |mut pairs: Vec<(String, String)>| {
                    pairs.sort();
                    pairs
                };
                assert_eq!(sorted(texts), sorted(from_map), "{families:?} {decisions:?}");
            }
        }
        let denied = MultiDecision::from_decisions(cases[1].clone());
        let mut texts = Vec::new();
        for_each_quota_header(&[&a, &b], &denied, Families::new(true, true, false), |name, value| {
            texts.push(format!("{name}: {value}"));
        });
        assert_eq!(
            texts,
            [
                r#"ratelimit-policy: "api";q=100;w=60, "5/1000ms";q=5;w=1"#,
                r#"ratelimit: "api";r=7;t=60, "5/1000ms";r=0;t=1"#,
                "x-ratelimit-limit: 5",
                "x-ratelimit-remaining: 0",
                "x-ratelimit-reset: 1",
                "retry-after: 2",
            ]
        );
    }

    #[test]
    fn writes_every_family() {
        let a = Rule::per_minute(NonZeroU32::new(100).unwrap()).named("api").unwrap();
        let b = Rule::per_second(NonZeroU32::new(5).unwrap());
        let multi = MultiDecision::from_decisions(vec![
            Decision::allowed(100, 42, Duration::from_millis(59_500)),
            Decision::allowed(5, 1, Duration::from_millis(200)),
        ]);
        let mut headers = HeaderMap::new();
        let families = Families { ietf: true, legacy: true, degraded: true };
        let policy = policy_value(&[&a, &b]);
        add_quota_headers(
            &mut headers,
            &[&a, &b].into_iter(),
            policy.as_ref(),
            &multi,
            families,
            Headers::Inner,
        );
        assert_eq!(headers[RATELIMIT_POLICY], r#""api";q=100;w=60, "5/1000ms";q=5;w=1"#);
        assert_eq!(headers[RATELIMIT], r#""api";r=42;t=60, "5/1000ms";r=1;t=1"#);
        assert_eq!(headers[X_RATELIMIT_LIMIT], "5", "the binding (least remaining) rule");
        assert_eq!(headers[X_RATELIMIT_REMAINING], "1");
        assert_eq!(headers[X_RATELIMIT_RESET], "1");
        assert!(!headers.contains_key(X_RATELIMIT_DEGRADED));

        // An outer layer adds its policies and keeps the most binding
        // legacy values: its rule (20 left) binds less than the inner's.
        let outer = Rule::per_minute(NonZeroU32::new(1000).unwrap()).named("global").unwrap();
        let outer_multi =
            MultiDecision::from_decisions(vec![Decision::allowed(1000, 20, Duration::from_secs(30))]);
        add_quota_headers(&mut headers, &[&outer].into_iter(), None, &outer_multi, families, Headers::Inner);
        let all: Vec<&str> = headers.get_all(RATELIMIT).iter().map(|v| v.to_str().unwrap()).collect();
        assert_eq!(all, [r#""api";r=42;t=60, "5/1000ms";r=1;t=1"#, r#""global";r=20;t=30"#]);
        assert_eq!(headers.get_all(RATELIMIT_POLICY).iter().count(), 2);
        assert_eq!(headers[X_RATELIMIT_REMAINING], "1", "the inner rule still binds most");
        let tighter =
            MultiDecision::from_decisions(vec![Decision::allowed(1000, 0, Duration::from_secs(30))]);
        add_quota_headers(&mut headers, &[&outer].into_iter(), None, &tighter, families, Headers::Inner);
        assert_eq!(
            (&headers[X_RATELIMIT_LIMIT], &headers[X_RATELIMIT_REMAINING]),
            (&"1000".parse::<HeaderValue>().unwrap(), &"0".parse::<HeaderValue>().unwrap())
        );

        let mut none = HeaderMap::new();
        add_quota_headers(
            &mut none,
            &[&a, &b].into_iter(),
            None,
            &multi,
            Families { ietf: false, legacy: false, degraded: false },
            Headers::Inner,
        );
        assert!(none.is_empty());
    }
}
