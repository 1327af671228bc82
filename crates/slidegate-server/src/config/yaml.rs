//! The configuration file as written: envoy ratelimit's YAML, plus
//! slidegate's extensions, every value with its line and column.
//!
//! Unknown keys fail the file, as in envoy ratelimit — and per level: a
//! key envoy ratelimit knows but ignores where it stands (`unit:` beside
//! `key:`) is a mistake worth naming, not a silent no-op.

use serde::Deserialize;
use serde_saphyr::Spanned;

/// One file: one domain.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileYaml {
    pub(super) domain: Option<Spanned<String>>,
    pub(super) descriptors: Option<Vec<Spanned<DescriptorYaml>>>,
}

/// A descriptor: a key, an optional value (`*` wildcards), limits and
/// nested descriptors.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct DescriptorYaml {
    pub(super) key: Option<Spanned<String>>,
    pub(super) value: Option<Spanned<String>>,
    /// Boxed, as is a limit's penalty: a descriptor is then under 500 bytes,
    /// not 1,300, and a file of 10,000 of them parses in 40 % less CPU (less
    /// copying as the list grows, fewer fresh pages).
    pub(super) rate_limit: Option<Box<Spanned<LimitYaml>>>,
    /// slidegate: several limits on one descriptor (10 per second and
    /// 1,000 per day), decided together.
    pub(super) rate_limits: Option<Spanned<Vec<Spanned<LimitYaml>>>>,
    pub(super) descriptors: Option<Vec<Spanned<DescriptorYaml>>>,
    pub(super) shadow_mode: Option<bool>,
    pub(super) detailed_metric: Option<bool>,
    pub(super) value_to_metric: Option<bool>,
    pub(super) share_threshold: Option<Spanned<bool>>,
    /// Accepted so envoy ratelimit files load; refused when true (see build).
    pub(super) quota_mode: Option<Spanned<bool>>,
    /// Free-form data envoy ratelimit passes on in dynamic metadata; kept
    /// and shown in `/v1/rules`.
    pub(super) metadata: Option<serde_json::Value>,
}

/// A limit, as both files write one: a rules file's `rate_limit` (or an
/// entry of `rate_limits`) and a gateway limit. A field of one file's
/// limits only is refused in the other by name: the rules file's
/// `replaces` and `unlimited`, the gateway's `key` and `on_missing`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LimitYaml {
    pub(super) name: Option<Spanned<String>>,
    /// Rules file only.
    pub(super) replaces: Option<Spanned<Vec<Spanned<ReplacesYaml>>>>,
    pub(super) unit: Option<Spanned<String>>,
    /// Any scalar, so that each wrong kind gets its own message.
    pub(super) requests_per_unit: Option<Spanned<Scalar>>,
    /// Rules file only.
    pub(super) unlimited: Option<Spanned<bool>>,
    /// slidegate: `log` (default), `counter`, `fixed`, `gcra`.
    pub(super) algorithm: Option<Spanned<String>>,
    /// slidegate: any window (`5m`, `90s`) instead of `unit`.
    pub(super) window: Option<Spanned<String>>,
    /// slidegate: warn, then ban, repeat offenders.
    pub(super) penalty: Option<Box<Spanned<PenaltyYaml>>>,
    /// Decided and counted, never denies (as a descriptor's `shadow_mode`
    /// does for all its limits).
    pub(super) shadow_mode: Option<bool>,
    /// slidegate: a budget (tokens, bytes): admits while something
    /// remains, and records every cost, also past the limit.
    pub(super) budget: Option<Spanned<bool>>,
    /// Gateway only: what the limit counts by.
    pub(super) key: Option<Spanned<String>>,
    /// Gateway only: a request without the key.
    pub(super) on_missing: Option<Spanned<String>>,
    /// Gateway only: the upstream response header (or trailer) holding
    /// what a request cost, charged to a budget when the response ends.
    pub(super) cost_header: Option<Spanned<String>>,
    /// Gateway only: how long a request the limit denies may wait for
    /// room instead of a 429 (shaping).
    pub(super) delay: Option<Spanned<String>>,
    /// Gateway only: how many of a key's requests may wait at once.
    pub(super) burst: Option<Spanned<u32>>,
    /// At most this many at once (a rules file's: through `/v1/acquire`).
    pub(super) max_in_flight: Option<Spanned<u32>>,
    /// A `max_in_flight` limit's: how long a lease is held without a
    /// renewal (default 60s).
    pub(super) lease_ttl: Option<Spanned<String>>,
}

impl LimitYaml {
    /// The positions of the fields given that `file`'s limits do not take,
    /// each with why.
    pub(super) fn foreign_fields(&self, file: LimitFile) -> Vec<((u32, u32), &'static str)> {
        let given = |at: Option<(u32, u32)>, why: &'static str| at.map(|at| (at, why));
        match file {
            LimitFile::Rules => [
                given(
                    self.key.as_ref().map(position),
                    "`key` is a gateway limit's field: in a rules file, the descriptors' `key` and \
                     `value` say what a limit counts",
                ),
                given(
                    self.on_missing.as_ref().map(position),
                    "`on_missing` is a gateway limit's field: a request without a descriptor's key \
                     does not meet its limits",
                ),
                given(
                    self.cost_header.as_ref().map(position),
                    "`cost_header` is a gateway limit's field: the rate-limit service is told a \
                     request's cost (`hits_addend`, `POST /v1/charge`)",
                ),
                given(
                    self.delay.as_ref().map(position),
                    "`delay` is a gateway limit's field: the rate-limit service answers at once, \
                     with `retry_after` to wait",
                ),
                given(self.burst.as_ref().map(position), "`burst` is a gateway limit's field (with `delay`)"),
            ],
            LimitFile::Gateway => [
                given(
                    self.replaces.as_ref().map(position),
                    "`replaces` is a rules file's field: every limit of a route applies",
                ),
                given(
                    self.unlimited.as_ref().map(position),
                    "`unlimited` is a rules file's field: a route without `limits` is unlimited",
                ),
                None,
                None,
                None,
            ],
        }
        .into_iter()
        .flatten()
        .collect()
    }
}

/// Which file a limit is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LimitFile {
    Rules,
    Gateway,
}

/// A scalar as written: a number where one is expected gets a message
/// naming the field, whatever was written instead.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum Scalar {
    Int(i64),
    Big(u64),
    Float(f64),
    Bool(bool),
    Text(String),
}

impl Scalar {
    /// The whole number written, or the text that is none. A number too
    /// large for 64 bits is whole too (and refused for its size).
    pub(super) fn whole(&self) -> Result<i128, String> {
        match self {
            Scalar::Int(n) => Ok(i128::from(*n)),
            Scalar::Big(n) => Ok(i128::from(*n)),
            // Truncation is exact: a float with no fraction beyond 2^64.
            #[allow(clippy::cast_possible_truncation)]
            Scalar::Float(f) if f.fract() == 0.0 && f.abs() >= 1.8e19 => Ok(*f as i128),
            Scalar::Float(f) => Err(f.to_string()),
            Scalar::Bool(b) => Err(b.to_string()),
            Scalar::Text(t) => t.trim().parse().map_err(|_| t.clone()),
        }
    }
}

/// One entry of `replaces`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ReplacesYaml {
    pub(super) name: Option<Spanned<String>>,
}

/// A limit's penalty: violations counted over `window`; a warning from
/// `warn_after`, a ban of `ban_for` from `ban_after`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PenaltyYaml {
    /// Required; optional here so that its absence is reported at the penalty.
    pub(super) window: Option<Spanned<String>>,
    pub(super) warn_after: Option<Spanned<u32>>,
    pub(super) ban_after: Option<Spanned<u32>>,
    pub(super) ban_for: Option<Spanned<String>>,
}

/// Where a spanned value stands: (line, column).
pub(super) fn position<T>(spanned: &Spanned<T>) -> (u32, u32) {
    line_column(spanned.referenced.line(), spanned.referenced.column())
}

/// A position as `(u32, u32)` (a file of 4 GiB lines is refused before).
pub(super) fn line_column(line: u64, column: u64) -> (u32, u32) {
    (u32::try_from(line).unwrap_or(u32::MAX), u32::try_from(column).unwrap_or(u32::MAX))
}
