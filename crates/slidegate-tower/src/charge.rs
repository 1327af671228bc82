//! Budgets charged what a response cost ([`RateLimitLayer::response_cost`](crate::RateLimitLayer::response_cost)):
//! where the cost is read, and the charge made when the body ends.

use std::sync::Arc;

use http::{HeaderMap, HeaderName, Response};
use slidegate::telemetry::{LogThrottle, THROTTLED_NOTE};
use slidegate::{Limiter, Rule, Store};

use crate::Observer;
use crate::body_end::BodyEnd;
use crate::response::LimitedBody;

/// Where a [`RateLimitLayer`](crate::RateLimitLayer) reads what a request
/// really cost — an LLM response's tokens, the bytes sent — to charge its
/// [budget](slidegate::Rule::budget) rules when the response body ends.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResponseCost {
    /// The [`Cost`] extension the inner service puts in its response.
    Extension,
    /// A response header holding the cost in decimal — or, when the
    /// response has no such header, a trailer of that name at the end of
    /// its body (streamed responses learn their count last). A [`Cost`]
    /// extension wins over both.
    Header(HeaderName),
}

impl ResponseCost {
    /// [`ResponseCost::Header`] of `name` (e.g. `x-usage-tokens`).
    ///
    /// # Panics
    ///
    /// When `name` is no valid header name (a constant in the caller's
    /// code; use [`ResponseCost::Header`] for names read at run time).
    pub fn header(name: &str) -> ResponseCost {
        ResponseCost::Header(HeaderName::from_bytes(name.as_bytes()).expect("a valid header name"))
    }
}

/// What a request really cost, as the inner service says in its response's
/// extensions (see [`ResponseCost`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cost(pub u32);

/// Gates the warning of responses whose cost cannot be read.
static UNREADABLE: LogThrottle = LogThrottle::new();

/// `value` as a cost: decimal digits, saturating at `u32::MAX`.
fn parse(value: &[u8]) -> Option<u32> {
    let text = std::str::from_utf8(value).ok()?.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(text.parse::<u64>().map_or(u32::MAX, |n| u32::try_from(n).unwrap_or(u32::MAX)))
}

/// The cost `headers` (a response's, or its trailers) hold under `source`.
/// `Err` when the header is there but is no whole number.
fn read(headers: &HeaderMap, source: &ResponseCost) -> Result<Option<u32>, ()> {
    let ResponseCost::Header(name) = source else { return Ok(None) };
    match headers.get(name) {
        None => Ok(None),
        Some(value) => parse(value.as_bytes()).map(Some).ok_or(()),
    }
}

fn unreadable(source: &ResponseCost, why: &str) {
    if let Some(held_back) = UNREADABLE.pass(crate::response::process_ms(), LogThrottle::EVERY_MS) {
        tracing::warn!(target: "slidegate", ?source, held_back, "a response's cost {why}: its budgets are not charged{THROTTLED_NOTE}");
    }
}

/// Makes `response` charge `budgets` (rule and key) what it says it cost,
/// under `source`, once its body ends: at once for a cost in its
/// extensions or headers, when the body ends for one in its trailers.
pub(crate) fn charge_when_done<S: Store, B: LimitedBody>(
    response: Response<B>,
    limiter: &Limiter<S>,
    budgets: Vec<(Rule, String)>,
    source: &ResponseCost,
    observer: Option<&Arc<dyn Observer>>,
) -> Response<B> {
    let known = match response.extensions().get::<Cost>() {
        Some(&Cost(cost)) => Some(cost),
        None => match read(response.headers(), source) {
            Ok(cost) => cost,
            Err(()) => {
                unreadable(source, "is no whole number");
                return response;
            }
        },
    };
    let (limiter, source, observer) = (limiter.clone(), source.clone(), observer.cloned());
    let end = BodyEnd::new(move |trailers| {
        let cost = match (known, trailers.map(|t| read(t, &source))) {
            (Some(cost), _) | (None, Some(Ok(Some(cost)))) => cost,
            (None, Some(Err(()))) => return unreadable(&source, "trailer is no whole number"),
            (None, _) => return unreadable(&source, "is missing"),
        };
        if cost == 0 {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return unreadable(&source, "arrived outside a Tokio runtime");
        };
        runtime.spawn(async move {
            let dimensions: Vec<(&Rule, &str, u32)> =
                budgets.iter().map(|(rule, key)| (rule, key.as_str(), cost)).collect();
            match limiter.check_all_weighted(&dimensions).await {
                Ok(charged) => {
                    if let Some(observer) = observer {
                        for ((rule, key), after) in budgets.iter().zip(&charged.decisions) {
                            observer.charged(rule, key, after);
                        }
                    }
                }
                Err(error) => tracing::warn!(target: "slidegate", %error, cost, "a response's cost could not be charged"),
            }
        });
    });
    let (parts, body) = response.into_parts();
    Response::from_parts(parts, body.on_end(end))
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn costs_are_whole_numbers_saturating_at_u32() {
        assert_eq!(parse(b"700"), Some(700));
        assert_eq!(parse(b" 42 "), Some(42));
        assert_eq!(parse(b"99999999999999999999999"), Some(u32::MAX));
        for bad in [&b""[..], b"-1", b"1.5", b"7e2", b"abc", b"\xff"] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }
}
