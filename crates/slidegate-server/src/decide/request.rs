//! A rate-limit request and its answer, whatever protocol carried them
//! (Envoy RLS v3 over gRPC, its JSON form, or slidegate's `/v1/check`).

use std::sync::Arc;
use std::time::Duration;

use slidegate::{Decision, Rule, Source, State};

use crate::config::{Limit, Unit};

/// The most descriptors one request may carry.
pub(crate) const MAX_DESCRIPTORS: usize = 64;

/// The most entries one descriptor may carry.
pub(crate) const MAX_ENTRIES: usize = 16;

/// The longest key or value of an entry, in bytes (longer values are
/// refused; values up to it are digested into counter keys as the library
/// digests any long identity).
pub(crate) const MAX_ENTRY_BYTES: usize = 4096;

/// Whether a request is charged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Decide and charge (`ShouldRateLimit`, `/json`, `/v1/check`).
    Charge,
    /// Answer as `Charge` would, charging nothing (`/v1/peek`).
    Peek,
    /// Record each weight whatever remains, every limit as a budget
    /// (`/v1/charge`: what a request really cost, learnt after it ran).
    Record,
}

/// A rate-limit request: a domain and descriptors.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CheckRequest {
    /// The configuration domain.
    pub domain: String,
    /// What the request is: each descriptor a list of `(key, value)` entries.
    pub descriptors: Vec<RequestDescriptor>,
    /// The request's weight (0 means 1), unless a descriptor gives its own.
    pub hits_addend: u32,
}

/// One descriptor of a request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RequestDescriptor {
    /// `(key, value)` entries, matched against the domain's descriptors in order.
    pub entries: Vec<(String, String)>,
    /// This descriptor's own weight, which wins over the request's; 0
    /// checks without charging.
    pub hits_addend: Option<u64>,
    /// A limit the caller gives instead of the configured one.
    pub limit: Option<LimitOverride>,
}

/// A descriptor's own limit (Envoy's `RateLimitDescriptor.limit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LimitOverride {
    /// The most requests per unit.
    pub requests_per_unit: u32,
    /// The unit.
    pub unit: Unit,
}

/// Over the limit or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Code {
    /// Within every limit (or shadow mode).
    Ok,
    /// Over a limit.
    OverLimit,
}

/// The answer to a [`CheckRequest`].
#[derive(Debug, Clone)]
pub(crate) struct CheckAnswer {
    /// `OverLimit` when some enforced limit denied (then nothing was charged).
    pub code: Code,
    /// One status per request descriptor, in order.
    pub statuses: Vec<DescriptorStatus>,
    /// Whether a failure policy answered for some limit (the store failed).
    pub degraded: bool,
}

impl CheckAnswer {
    /// Every limit decided through the store, with its decision, in
    /// request order (what the quota headers describe).
    pub(crate) fn decisions(&self) -> impl Iterator<Item = (&Rule, Decision)> {
        self.statuses.iter().flat_map(|status| &status.limits).filter_map(|l| {
            let rule = l.limit.rule()?;
            let mut decision = if l.allowed {
                Decision::allowed(rule.limit(), l.remaining, l.reset_after)
            } else {
                Decision::limited(rule.limit(), l.remaining, l.retry_after, l.reset_after)
            };
            decision.state = l.state;
            decision.violations = l.violations;
            decision.source = l.source;
            Some((rule, decision))
        })
    }
}

/// How one request descriptor stands.
#[derive(Debug, Clone)]
pub(crate) struct DescriptorStatus {
    /// Over its limit or not (a shadow limit's denial is `Ok`).
    pub code: Code,
    /// The limit that binds it most (the denying one with the longest
    /// wait; else the one with the least left), if any applies.
    pub limit: Option<Arc<Limit>>,
    /// What the binding limit still admits now (`u32::MAX` for unlimited).
    pub remaining: u32,
    /// Zero within the limit; else how long until this request would be admitted.
    pub retry_after: Duration,
    /// How long until the binding limit holds no charge at all.
    pub reset_after: Duration,
    /// How the binding limit decided, if one did.
    pub state: Option<State>,
    /// A shadow limit denied it (answered `Ok`, counted).
    pub shadow_over_limit: bool,
    /// Every limit that applied, in configuration order.
    pub limits: Vec<LimitStatus>,
}

/// How one limit of a descriptor decided.
#[derive(Debug, Clone)]
pub(crate) struct LimitStatus {
    /// The limit.
    pub limit: Arc<Limit>,
    /// Within it, or over.
    pub allowed: bool,
    /// How it decided.
    pub state: State,
    /// What it still admits now.
    pub remaining: u32,
    /// Zero within the limit; else how long until the request would be admitted.
    pub retry_after: Duration,
    /// How long until it holds no charge at all.
    pub reset_after: Duration,
    /// Its penalty's violations counted for this identity (0 without one).
    pub violations: u32,
    /// How far over its limit a budget's charge left it (0 otherwise).
    pub debt: u32,
    /// Who answered (a cost above the limit, a shadow limit overruled, …).
    pub source: Source,
}

impl DescriptorStatus {
    /// The status of a descriptor no limit applies to.
    pub(crate) fn unlimited_by_config() -> DescriptorStatus {
        DescriptorStatus {
            code: Code::Ok,
            limit: None,
            remaining: 0,
            retry_after: Duration::ZERO,
            reset_after: Duration::ZERO,
            state: None,
            shadow_over_limit: false,
            limits: Vec::new(),
        }
    }
}

/// Why a request was not answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CheckError {
    /// The request is malformed (a 400, `INVALID_ARGUMENT`): the message
    /// names the field.
    Invalid(String),
    /// The store failed and the service is configured to say so
    /// (`--on-store-failure unavailable`): a 503, `UNAVAILABLE`.
    Unavailable(String),
}

impl std::fmt::Display for CheckError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CheckError::Invalid(message) | CheckError::Unavailable(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for CheckError {}

impl CheckRequest {
    /// Checks the bounds every protocol shares.
    ///
    /// # Errors
    ///
    /// [`CheckError::Invalid`] naming the field that is out of bounds.
    pub(crate) fn validate(&self) -> Result<(), CheckError> {
        let invalid = |m: String| Err(CheckError::Invalid(m));
        if self.domain.is_empty() {
            return invalid("`domain` must not be empty".into());
        }
        if self.domain.len() > MAX_ENTRY_BYTES {
            return invalid(format!("`domain` is longer than {MAX_ENTRY_BYTES} bytes"));
        }
        if self.descriptors.is_empty() {
            return invalid("`descriptors` must not be empty".into());
        }
        if self.descriptors.len() > MAX_DESCRIPTORS {
            return invalid(format!(
                "{} descriptors: a request may carry at most {MAX_DESCRIPTORS}",
                self.descriptors.len()
            ));
        }
        for (i, descriptor) in self.descriptors.iter().enumerate() {
            if descriptor.entries.is_empty() {
                return invalid(format!("`descriptors[{i}].entries` must not be empty"));
            }
            if descriptor.entries.len() > MAX_ENTRIES {
                return invalid(format!(
                    "`descriptors[{i}].entries` has {}: at most {MAX_ENTRIES}",
                    descriptor.entries.len()
                ));
            }
            for (j, (key, value)) in descriptor.entries.iter().enumerate() {
                if key.is_empty() {
                    return invalid(format!("`descriptors[{i}].entries[{j}].key` must not be empty"));
                }
                if key.len() > MAX_ENTRY_BYTES || value.len() > MAX_ENTRY_BYTES {
                    return invalid(format!(
                        "`descriptors[{i}].entries[{j}]` is longer than {MAX_ENTRY_BYTES} bytes"
                    ));
                }
            }
        }
        Ok(())
    }
}
