//! One configured limit, compiled: the library's [`Rule`] and what the
//! service reports about it.

use std::time::Duration;

use serde::Serialize;
use slidegate::{ConcurrencyLimit, Rule};

use super::unit::Unit;
use crate::decide::stats::{LimitCounters, Rates, Usage};

/// How a limit decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Enforcement {
    /// Through the store, under this rule.
    Rule(Rule),
    /// `requests_per_unit: 0`: every request is over the limit (envoy
    /// ratelimit's way to block a value, its README's example 3), for the
    /// window given. Nothing is stored.
    Block(Duration),
    /// `unlimited: true`: every request is within it. Nothing is stored.
    Unlimited,
    /// `max_in_flight`: at most so many at once, each holding a lease
    /// (`/v1/acquire`); checks do not meet it.
    InFlight(ConcurrencyLimit),
}

/// A configured limit: how it decides (its [`Rule`], whose numbers are
/// the limit's: [`requests_per_unit`](Limit::requests_per_unit),
/// [`window`](Limit::window)) and what the service reports about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limit {
    /// The `name` given, echoed in answers and matched by `replaces`.
    pub name: Option<String>,
    /// How it decides.
    pub enforcement: Enforcement,
    /// The `unit` the window is, if it is one (what RLS answers name).
    pub unit: Option<Unit>,
    /// Decided and counted, but never denies (`shadow_mode`).
    pub shadow: bool,
    /// Names of limits this one replaces in the same request.
    pub replaces: Vec<String>,
    /// Which of its descriptor's limits this is (0 for `rate_limit`, the
    /// position in `rate_limits`): part of its counters' identity.
    pub index: usize,
    /// The stats key of the descriptor (`domain.key_value.key`), as envoy
    /// ratelimit names it.
    pub stat_key: String,
    /// Where it was written: `file:line:column`.
    pub source: String,
    /// Its decisions per second over five minutes (the status page's).
    pub(crate) rates: RatesCell,
    /// Its per-limit counters (`slidegate_rate_limit_*`).
    pub(crate) counters: LimitCounters,
    /// A budget's or `max_in_flight` limit's use by the identities seen
    /// last (the status page's).
    pub(crate) usage: Usage,
}

/// A limit's [`Rates`], held in the limit itself, and taken over by a
/// reload's limit that replaces it unchanged; not part of what the limit is
/// (two limits alike are equal whatever they counted). A clone starts from
/// a copy of the counts.
#[derive(Debug, Default)]
pub(crate) struct RatesCell(Rates);

impl Clone for RatesCell {
    fn clone(&self) -> RatesCell {
        let rates = Rates::default();
        rates.take_over(&self.0);
        RatesCell(rates)
    }
}

impl PartialEq for RatesCell {
    fn eq(&self, _: &RatesCell) -> bool {
        true
    }
}

impl Eq for RatesCell {}

impl RatesCell {
    /// Counts one decision made in second `now_s`.
    pub(crate) fn record(&self, now_s: u64, admitted: bool) {
        self.0.record(now_s, admitted);
    }

    /// `(admitted, limited)` per second up to `now_s` (see [`Rates::series`]).
    pub(crate) fn series(&self, now_s: u64) -> (Vec<u32>, Vec<u32>) {
        self.0.series(now_s)
    }

    /// Takes over `other`'s rates (the limit this one replaces, before
    /// this one is put in force).
    pub(crate) fn adopt(&self, other: &RatesCell) {
        self.0.take_over(&other.0);
    }
}

impl Limit {
    /// The rule deciding it through the store, if it does.
    pub fn rule(&self) -> Option<&Rule> {
        match &self.enforcement {
            Enforcement::Rule(rule) => Some(rule),
            Enforcement::Block(_) | Enforcement::Unlimited | Enforcement::InFlight(_) => None,
        }
    }

    /// The concurrency limit, for a `max_in_flight` limit.
    pub fn in_flight(&self) -> Option<&ConcurrencyLimit> {
        match &self.enforcement {
            Enforcement::InFlight(limit) => Some(limit),
            _ => None,
        }
    }

    /// The most requests (weight) per window: the rule's limit, 0 for a
    /// block, `u32::MAX` for unlimited; the most at once for `max_in_flight`.
    pub fn requests_per_unit(&self) -> u32 {
        match &self.enforcement {
            Enforcement::Rule(rule) => rule.limit(),
            Enforcement::InFlight(limit) => limit.limit(),
            Enforcement::Block(_) => 0,
            Enforcement::Unlimited => u32::MAX,
        }
    }

    /// The window: the rule's, or the block's; zero for unlimited; the
    /// lease ttl for `max_in_flight`.
    pub fn window(&self) -> Duration {
        match &self.enforcement {
            Enforcement::Rule(rule) => rule.window(),
            Enforcement::InFlight(limit) => limit.ttl(),
            Enforcement::Block(window) => *window,
            Enforcement::Unlimited => Duration::ZERO,
        }
    }

    /// Whether `other` counts as this limit does: the same name, enforcement
    /// (rule, limit, window), shadow mode and place (where it is written
    /// may differ).
    pub(crate) fn counts_like(&self, other: &Limit) -> bool {
        (&self.name, &self.enforcement, self.shadow, self.index, &self.stat_key)
            == (&other.name, &other.enforcement, other.shadow, other.index, &other.stat_key)
    }

    /// Its name in quota headers and metrics: its rule's (the `name`
    /// configured, or else its stats key), or for a limit deciding without
    /// a rule its `name` or stats key.
    pub fn label(&self) -> &str {
        self.rule()
            .and_then(Rule::name)
            .or(self.in_flight().map(ConcurrencyLimit::name))
            .or(self.name.as_deref())
            .unwrap_or(&self.stat_key)
    }

    /// Whether it is `unlimited`.
    pub fn is_unlimited(&self) -> bool {
        self.enforcement == Enforcement::Unlimited
    }

    /// Appends the part of a counter's identity this limit adds: its
    /// position, name and window. With the rule's name and algorithm (its
    /// state's prefix) they make the counter: a limit whose numbers change
    /// keeps what it counted (a lowered limit applies at once), one whose
    /// window, algorithm, position or name changes starts afresh.
    pub(crate) fn write_identity_part(&self, out: &mut String) {
        out.push('|');
        out.push_str(itoa::Buffer::new().format(self.index));
        out.push('#');
        out.push_str(self.name.as_deref().unwrap_or(""));
        out.push('@');
        out.push_str(itoa::Buffer::new().format(self.window().as_millis()));
    }

    /// The limit as `/v1/rules` shows it.
    pub(crate) fn view(&self) -> LimitView<'_> {
        LimitView {
            name: self.name.as_deref(),
            descriptor: &self.stat_key,
            requests_per_unit: self.requests_per_unit(),
            window_ms: u64::try_from(self.window().as_millis()).unwrap_or(u64::MAX),
            unit: self.unit.map(Unit::name),
            algorithm: match &self.enforcement {
                Enforcement::Rule(rule) => rule.algorithm().short_name(),
                Enforcement::Block(_) => "block",
                Enforcement::Unlimited => "unlimited",
                Enforcement::InFlight(_) => "in_flight",
            },
            penalty: self.rule().and_then(Rule::penalty).map(|p| PenaltyView {
                window_ms: p.window_ms(),
                warn_after: p.warn_threshold(),
                ban_after: p.ban_threshold(),
                ban_for_ms: p.ban_for_ms(),
            }),
            shadow_mode: self.shadow,
            budget: self.rule().is_some_and(Rule::is_budget),
            replaces: &self.replaces,
            source: &self.source,
        }
    }
}

/// A limit in `/v1/rules`.
#[derive(Debug, Serialize)]
pub(crate) struct LimitView<'a> {
    name: Option<&'a str>,
    /// The stats key: the descriptor path the limit is configured at.
    descriptor: &'a str,
    requests_per_unit: u32,
    window_ms: u64,
    unit: Option<&'static str>,
    algorithm: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    penalty: Option<PenaltyView>,
    shadow_mode: bool,
    /// Admits while something remains and records every cost.
    budget: bool,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    replaces: &'a [String],
    source: &'a str,
}

/// A penalty in `/v1/rules`.
#[derive(Debug, Serialize)]
struct PenaltyView {
    window_ms: u64,
    warn_after: Option<u32>,
    ban_after: Option<u32>,
    ban_for_ms: u64,
}
