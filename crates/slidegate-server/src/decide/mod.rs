//! Deciding a [`CheckRequest`]: match each descriptor to its limits, then
//! decide them all together through the library's one decision path —
//! all or nothing: a request denied by one limit charges none of the others.
//!
//! Limits that need no store answer first: `unlimited` and a block
//! (`requests_per_unit: 0`). Check-only descriptors (`hits_addend: 0`)
//! are peeked. If an enforced limit denies there, the others are peeked,
//! not charged — but for budgets ([`Rule::budget`](slidegate::Rule::budget)),
//! which record every weight. Otherwise the rest are decided in one
//! `check_all_weighted`. A charge ([`Mode::Record`], `/v1/charge`) records
//! each weight under every limit as a budget's.
//! Shadow mode, a weight above a limit and the store's failure are the
//! limiter's to answer, as on every edge: a shadow limit's denial comes
//! back admitted ([`Source::Shadow`]), with the others charged as if it
//! were absent; a weight above a limit is denied
//! ([`Source::CostAboveLimit`]); under `--on-store-failure unavailable`
//! the limiter's failure policy is `fail`, and its error is
//! [`CheckError::Unavailable`].
//!
//! A charged request is counted by [`ServiceStats::decided`], the
//! statistics' one entry: the gateway, which decides through the tower
//! layer around the same limiter, counts its requests there too.

mod answer;
mod ask;
pub(crate) mod hold;
pub(crate) mod item;
pub(crate) mod request;
pub(crate) mod stats;
#[cfg(test)]
mod tests;

use std::collections::HashSet;
use std::sync::Arc;

use slidegate::limits::MAX_DIMENSIONS;
use slidegate::{FailurePolicy, Limiter, State};

use crate::config::{Config, Rules};
use crate::decide::request::{CheckAnswer, CheckError, CheckRequest, Mode};
use crate::decide::stats::{Counted, ServiceStats};
use crate::store::ServiceStore;
use answer::{answer, no_limits};
use item::{Item, OVERRIDE_SOURCE, dynamic_stat_key, identity, invalid, override_limit};

/// The error of a limiter call: the request's fault, or the store's (the
/// failure policy is `fail`).
fn check_error(error: &slidegate::Error) -> CheckError {
    if error.is_store_failure() {
        return CheckError::Unavailable(format!(
            "the rate-limit store failed and --on-store-failure is `unavailable`: {error}"
        ));
    }
    invalid(error)
}

/// Refuses a request whose descriptors meet more limits than one
/// decision takes together ([`MAX_DIMENSIONS`]): they could not be decided
/// all or nothing.
fn too_many(limits: usize) -> Result<(), CheckError> {
    if limits <= MAX_DIMENSIONS {
        return Ok(());
    }
    Err(CheckError::Invalid(format!(
        "the request's descriptors meet {limits} limits; at most {MAX_DIMENSIONS} are decided \
         together (all or nothing) in one request: send fewer descriptors, or split the request"
    )))
}

/// What a budget's decision says is counted in its window, its debt
/// included.
pub(crate) fn budget_used(decision: &slidegate::Decision) -> u64 {
    u64::from(decision.limit.saturating_sub(decision.remaining)) + u64::from(decision.debt)
}

/// What the service answers when the store fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnStoreFailure {
    /// The library's failure policy answers (counted as degraded).
    #[default]
    Policy,
    /// The request fails with `UNAVAILABLE` / 503, so the caller's own
    /// policy decides (Envoy's `failure_mode_deny`): the limiter's failure
    /// policy is [`FailurePolicy::Fail`], on every edge.
    Unavailable,
}

/// Decides requests against the configuration in force.
#[derive(Debug, Clone)]
pub(crate) struct Decider {
    /// Decides, with the service's shadow mode and failure answer.
    limiter: Limiter<ServiceStore>,
    rules: Rules,
    /// What the status page shows.
    stats: Arc<ServiceStats>,
}

impl Decider {
    /// A decider over `limiter`, answering from the configuration `rules`
    /// holds (swapped on reload). The limiter's shadow mode and failure
    /// policy are the service's.
    pub(crate) fn new(limiter: Limiter<ServiceStore>, rules: Rules) -> Decider {
        Decider { limiter, rules, stats: Arc::default() }
    }

    /// The limiter deciding.
    pub(crate) fn limiter(&self) -> &Limiter<ServiceStore> {
        &self.limiter
    }

    /// What it answers when the store fails.
    pub(crate) fn on_store_failure_mode(&self) -> OnStoreFailure {
        if self.limiter.failure_policy() == FailurePolicy::Fail {
            OnStoreFailure::Unavailable
        } else {
            OnStoreFailure::Policy
        }
    }

    /// Whether global shadow mode is on.
    pub(crate) fn is_shadow(&self) -> bool {
        self.limiter.is_shadow()
    }

    /// The statistics the status page shows.
    pub(crate) fn stats(&self) -> &ServiceStats {
        &self.stats
    }

    /// The statistics, shared (the gateway adds its decisions to them).
    pub(crate) fn shared_stats(&self) -> Arc<ServiceStats> {
        Arc::clone(&self.stats)
    }

    /// The configuration handle.
    pub(crate) fn rules(&self) -> &Rules {
        &self.rules
    }

    /// Decides `request` (see the module docs).
    ///
    /// # Errors
    ///
    /// [`CheckError::Invalid`] for a malformed request;
    /// [`CheckError::Unavailable`] when the store failed and the service
    /// is configured to say so.
    pub(crate) async fn check(&self, request: &CheckRequest, mode: Mode) -> Result<CheckAnswer, CheckError> {
        request.validate()?;
        // Held to the end: a request in flight finishes on the configuration
        // it started with, whatever a reload swaps in meanwhile.
        let config: Arc<Config> = self.rules.current();
        let count = request.descriptors.len();
        let Some(domain) = config.domain(&request.domain) else {
            let known = || config.domains().map(|d| d.name()).collect::<Vec<_>>().join(", ");
            self.stats.misses().unknown_domain(&request.domain, known);
            return Ok(no_limits(count));
        };
        let mut items = self.items(domain, request, true)?;
        // `replaces`: across the whole request, by name.
        let replaced: HashSet<String> = items.iter().flat_map(|i| i.limit.replaces.iter().cloned()).collect();
        if !replaced.is_empty() {
            items.retain(|i| i.limit.name.as_ref().is_none_or(|name| !replaced.contains(name)));
        }

        let denied = self.decide(&mut items, mode).await?;
        let degraded = items.iter().any(|i| i.outcome.is_some_and(|d| d.state == State::Degraded));
        let charged = mode != Mode::Peek;
        if charged {
            self.count(domain.name(), request, &items);
        }
        Ok(answer(count, items, (denied, degraded, charged)))
    }

    /// Counts a charged request in the statistics, as every edge does.
    fn count(&self, domain: &str, request: &CheckRequest, items: &[Item]) {
        let who: Vec<&[(String, String)]> =
            request.descriptors.iter().map(|d| d.entries.as_slice()).collect();
        let limits = items.iter().filter_map(|item| {
            Some(Counted {
                part: item.descriptor,
                stat_key: item.stat_key.as_deref().unwrap_or(&item.limit.stat_key),
                names_values: item.stat_key.is_some(),
                // A descriptor's own limit is named by the request's values:
                // one name in the metrics for all of them.
                name: if item.limit.source == OVERRIDE_SOURCE { "request" } else { item.limit.label() },
                counters: &item.limit.counters,
                hits: item.cost,
                decision: item.outcome?,
            })
        });
        self.stats.decided(domain, &who, limits);
        for item in items.iter().filter(|item| item.rule().is_some_and(slidegate::Rule::is_budget)) {
            if let (Some(decision), Some(descriptor)) =
                (item.outcome, request.descriptors.get(item.descriptor))
            {
                let shown = stats::shown(domain, &descriptor.entries);
                item.limit.usage.record(&shown, budget_used(&decision), &decision);
            }
        }
    }

    /// The limits `request`'s descriptors meet in `domain`, one item each;
    /// with `count_misses`, a descriptor meeting none is counted and logged.
    fn items(
        &self,
        domain: &crate::config::Domain,
        request: &CheckRequest,
        count_misses: bool,
    ) -> Result<Vec<Item>, CheckError> {
        let mut items = Vec::new();
        for (index, descriptor) in request.descriptors.iter().enumerate() {
            let entries: Vec<(&str, &str)> =
                descriptor.entries.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let cost = descriptor.hits_addend.unwrap_or_else(|| u64::from(request.hits_addend.max(1)));
            if let Some(limit) = descriptor.limit {
                let limit = Arc::new(override_limit(domain.name(), &entries, limit)?);
                let identity = identity(domain.name(), &entries, None);
                let shadow = self.limiter.is_shadow();
                items.push(Item {
                    descriptor: index,
                    // Named by the request's values: bounded in the metrics.
                    stat_key: Some(limit.stat_key.clone()),
                    limit,
                    identity,
                    cost,
                    shadow,
                    outcome: None,
                });
                continue;
            }
            let Some(path) = domain.lookup(&entries) else {
                if count_misses {
                    let keys: Vec<&str> = entries.iter().map(|&(key, _)| key).collect();
                    self.stats.misses().unmatched(domain.name(), &keys);
                }
                continue;
            };
            let Some(&(node, _)) = path.last() else { continue };
            let stat_key = dynamic_stat_key(domain.name(), &entries, &path);
            // `max_in_flight` limits are held through `/v1/acquire`, not checked.
            for limit in node.limits.iter().filter(|limit| limit.in_flight().is_none()) {
                let identity = identity(domain.name(), &entries, Some((&path, limit)));
                let shadow = self.limiter.is_shadow() || limit.shadow;
                let stat_key = stat_key.clone();
                let limit = limit.clone();
                items.push(Item {
                    descriptor: index,
                    limit,
                    stat_key,
                    identity,
                    cost,
                    shadow,
                    outcome: None,
                });
            }
        }
        Ok(items)
    }

    /// Forgets the counters of every limit `request`'s descriptors meet (an
    /// operator's reset: the next request starts from a full quota).
    /// Returns how many limits the descriptors met, and how many of their
    /// counters held something.
    ///
    /// # Errors
    ///
    /// [`CheckError::Invalid`] for a malformed request;
    /// [`CheckError::Unavailable`] when the store failed.
    pub(crate) async fn reset(&self, request: &CheckRequest) -> Result<(usize, usize), CheckError> {
        request.validate()?;
        let config: Arc<Config> = self.rules.current();
        let Some(domain) = config.domain(&request.domain) else { return Ok((0, 0)) };
        let (mut matched, mut reset) = (0, 0);
        for item in self.items(domain, request, false)? {
            let Some(rule) = item.rule() else { continue };
            matched += 1;
            match self.limiter.reset(rule, &item.identity).await {
                Ok(held) => reset += usize::from(held),
                Err(error) if error.kind() == slidegate::ErrorKind::InvalidKey => {
                    return Err(invalid(&error));
                }
                Err(error) => return Err(CheckError::Unavailable(error.to_string())),
            }
        }
        Ok((matched, reset))
    }
}
