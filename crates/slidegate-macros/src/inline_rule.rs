//! An inline rule — `limit = …, window = "…"` with optional `algorithm`
//! and `name` — checked as `slidegate::Rule`'s constructors would check it,
//! so that building it at run time cannot fail.

use proc_macro2::Span;
use syn::{LitInt, LitStr};

use crate::errors::Errors;
use crate::window::parse_window;

// The bounds below repeat the core crate's: a proc-macro crate cannot depend
// on the crate that re-exports it.

/// The longest rule name, as `slidegate::limits::MAX_NAME_LEN`.
const MAX_NAME_LEN: usize = 64;
/// Buckets of `algorithm = "counter"`, as `slidegate::limits::DEFAULT_BUCKETS`.
const COUNTER_BUCKETS: u64 = 10;
/// GCRA's bound on `limit × window (ms)`, as `slidegate::limits::GCRA_MAX_PRODUCT`.
const GCRA_MAX_PRODUCT: u64 = 1 << 53;

/// A rule written in the attribute, valid.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct InlineRule {
    pub(crate) limit: u32,
    pub(crate) window_ms: u64,
    pub(crate) algorithm: Algorithm,
    /// `name = "…"`; derived from the function's path when absent.
    pub(crate) name: Option<String>,
}

/// `algorithm = "…"`: the short names of `slidegate::Algorithm`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Algorithm {
    Log,
    Counter,
    Fixed,
    Gcra,
}

/// The inline rule, or `None` with every problem in `errors`.
pub(crate) fn inline_rule(
    limit: &LitInt,
    window: &LitStr,
    algorithm: Option<&LitStr>,
    name: Option<&LitStr>,
    errors: &mut Errors,
) -> Option<InlineRule> {
    let limit_value = match limit.base10_parse::<u32>() {
        Ok(0) => {
            errors.at(limit.span(), "limit must be at least 1");
            None
        }
        Ok(n) => Some(n),
        Err(_) => {
            errors.at(limit.span(), format!("limit must be an integer from 1 to {}", u32::MAX));
            None
        }
    };
    let window_ms = parse_window(&window.value()).map_err(|e| errors.at(window.span(), e)).ok();
    let algorithm_value = match algorithm {
        None => Some(Algorithm::Log),
        Some(lit) => match lit.value().as_str() {
            "log" => Some(Algorithm::Log),
            "counter" => Some(Algorithm::Counter),
            "fixed" => Some(Algorithm::Fixed),
            "gcra" => Some(Algorithm::Gcra),
            other => {
                let message =
                    format!(r#"unknown algorithm {other:?}: expected "log", "counter", "fixed" or "gcra""#);
                errors.at(lit.span(), message);
                None
            }
        },
    };
    let name_value = match name {
        None => Some(None),
        Some(lit) => {
            let name = lit.value();
            let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
            if name.is_empty() || name.len() > MAX_NAME_LEN || !name.chars().all(ok_char) {
                let message =
                    format!("rule name must be 1 to {MAX_NAME_LEN} characters of A-Z a-z 0-9 _ - .");
                errors.at(lit.span(), message);
                None
            } else {
                Some(Some(name))
            }
        }
    };
    let (limit, window_ms, algorithm_value) = (limit_value?, window_ms?, algorithm_value?);
    let algorithm_span = algorithm.map_or_else(Span::call_site, LitStr::span);
    if algorithm_value == Algorithm::Counter && window_ms < COUNTER_BUCKETS {
        errors.at(
            algorithm_span,
            format!(
                "a sliding counter has {COUNTER_BUCKETS} buckets of at least 1ms: \
                 its window must be at least {COUNTER_BUCKETS}ms"
            ),
        );
        return None;
    }
    if algorithm_value == Algorithm::Gcra && u64::from(limit).saturating_mul(window_ms) >= GCRA_MAX_PRODUCT {
        errors.at(
            algorithm_span,
            "GCRA needs limit × window (in ms) below 2^53; shorten the window or lower the limit",
        );
        return None;
    }
    Some(InlineRule { limit, window_ms, algorithm: algorithm_value, name: name_value? })
}
