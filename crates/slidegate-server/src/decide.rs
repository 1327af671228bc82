//! Deciding a [`CheckRequest`]: match each descriptor to its limits, then
//! decide them all together through the library's one decision path —
//! all or nothing: a request denied by one limit charges none of the others.
//!
//! Limits that need no store answer first: `unlimited`, a block
//! (`requests_per_unit: 0`), a weight above the limit. Check-only
//! descriptors (`hits_addend: 0`) are peeked. If an enforced limit denies
//! there, the others are peeked, not charged. Otherwise the rest are
//! decided in one `check_all_weighted`; when only shadow limits deny, they
//! are set aside and the others decided again (each call is atomic, and
//! only the admitting one charges), so a shadow limit never lets a request
//! through uncharged.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use slidegate::{Decision, Limiter, Rule, State, WeightedDimension};

use crate::config::{Config, Enforcement, How, Limit, MatchPath, Rules};
use crate::request::{
    CheckAnswer, CheckError, CheckRequest, Code, DescriptorStatus, LimitOverride, LimitStatus, Mode,
};
use crate::store::ServiceStore;

/// What the service answers when the store fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnStoreFailure {
    /// The library's failure policy answers (counted as degraded).
    #[default]
    Policy,
    /// The request fails with `UNAVAILABLE` / 503, so the caller's own
    /// policy decides (Envoy's `failure_mode_deny`).
    Unavailable,
}

/// Decides requests against the configuration in force.
#[derive(Debug, Clone)]
pub struct Decider {
    limiter: Limiter<ServiceStore>,
    rules: Rules,
    on_store_failure: OnStoreFailure,
    /// Global shadow mode: every limit decides and counts, none denies.
    shadow: bool,
}

/// One limit a request met.
struct Item {
    descriptor: usize,
    limit: Arc<Limit>,
    /// The stats key when the request's values name it
    /// (`detailed_metric`, `value_to_metric`); else the limit's own.
    stat_key: Option<String>,
    identity: String,
    cost: u64,
    shadow: bool,
    outcome: Option<Decision>,
}

impl Item {
    fn rule(&self) -> Option<&Rule> {
        self.limit.rule()
    }
}

impl Decider {
    /// A decider over `limiter`, answering from the configuration `rules`
    /// holds (swapped on reload); the store's failures are answered by the
    /// limiter's failure policy, and limits deny.
    pub fn new(limiter: Limiter<ServiceStore>, rules: Rules) -> Decider {
        Decider { limiter, rules, on_store_failure: OnStoreFailure::Policy, shadow: false }
    }

    /// What to answer when the store fails.
    pub fn on_store_failure(mut self, on_store_failure: OnStoreFailure) -> Decider {
        self.on_store_failure = on_store_failure;
        self
    }

    /// Global shadow mode: every limit decides and counts, and every
    /// request is answered `Ok`.
    pub fn shadow(mut self, shadow: bool) -> Decider {
        self.shadow = shadow;
        self
    }

    /// The limiter deciding.
    pub fn limiter(&self) -> &Limiter<ServiceStore> {
        &self.limiter
    }

    /// What it answers when the store fails.
    pub fn on_store_failure_mode(&self) -> OnStoreFailure {
        self.on_store_failure
    }

    /// Whether global shadow mode is on.
    pub fn is_shadow(&self) -> bool {
        self.shadow
    }

    /// The configuration handle.
    pub fn rules(&self) -> &Rules {
        &self.rules
    }

    /// Decides `request` (see the module docs).
    ///
    /// # Errors
    ///
    /// [`CheckError::Invalid`] for a malformed request;
    /// [`CheckError::Unavailable`] when the store failed and the service
    /// is configured to say so.
    pub async fn check(&self, request: &CheckRequest, mode: Mode) -> Result<CheckAnswer, CheckError> {
        request.validate()?;
        // Held to the end: a request in flight finishes on the configuration
        // it started with, whatever a reload swaps in meanwhile.
        let config: Arc<Config> = self.rules.current();
        let count = request.descriptors.len();
        let Some(domain) = config.domain(&request.domain) else {
            metrics::counter!("slidegate_service_unknown_domain_total").increment(1);
            return Ok(no_limits(count));
        };
        let mut items = self.items(domain, request)?;
        // `replaces`: across the whole request, by name.
        let replaced: HashSet<String> = items.iter().flat_map(|i| i.limit.replaces.iter().cloned()).collect();
        if !replaced.is_empty() {
            items.retain(|i| i.limit.name.as_ref().is_none_or(|name| !replaced.contains(name)));
        }

        let denied = self.decide(&mut items, mode).await?;
        let degraded = items.iter().any(|i| i.outcome.is_some_and(|d| d.state == State::Degraded));
        if degraded && self.on_store_failure == OnStoreFailure::Unavailable {
            return Err(CheckError::Unavailable(
                "the rate-limit store failed and --on-store-failure is `unavailable`".into(),
            ));
        }
        Ok(answer(domain.name(), count, items, denied, degraded))
    }

    /// The limits `request`'s descriptors meet in `domain`, one item each.
    fn items(&self, domain: &crate::config::Domain, request: &CheckRequest) -> Result<Vec<Item>, CheckError> {
        let mut items = Vec::new();
        for (index, descriptor) in request.descriptors.iter().enumerate() {
            let entries: Vec<(&str, &str)> =
                descriptor.entries.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let cost = descriptor.hits_addend.unwrap_or_else(|| u64::from(request.hits_addend.max(1)));
            if let Some(limit) = descriptor.limit {
                let limit = Arc::new(override_limit(domain.name(), &entries, limit)?);
                let identity = identity(domain.name(), &entries, None, &limit, true);
                let shadow = self.shadow;
                items.push(Item {
                    descriptor: index,
                    limit,
                    stat_key: None,
                    identity,
                    cost,
                    shadow,
                    outcome: None,
                });
                continue;
            }
            let Some(path) = domain.lookup(&entries) else {
                metrics::counter!("slidegate_service_unmatched_total").increment(1);
                continue;
            };
            let Some(&(node, _)) = path.last() else { continue };
            let stat_key = dynamic_stat_key(domain.name(), &entries, &path);
            for limit in &node.limits {
                let identity = identity(domain.name(), &entries, Some(&path), limit, false);
                let shadow = self.shadow || limit.shadow;
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
    /// Returns how many counters held something.
    ///
    /// # Errors
    ///
    /// [`CheckError::Invalid`] for a malformed request;
    /// [`CheckError::Unavailable`] when the store failed.
    pub async fn reset(&self, request: &CheckRequest) -> Result<usize, CheckError> {
        request.validate()?;
        let config: Arc<Config> = self.rules.current();
        let Some(domain) = config.domain(&request.domain) else { return Ok(0) };
        let mut reset = 0;
        for item in self.items(domain, request)? {
            let Some(rule) = item.rule() else { continue };
            match self.limiter.reset(rule, &item.identity).await {
                Ok(held) => reset += usize::from(held),
                Err(error) if error.kind() == slidegate::ErrorKind::InvalidKey => {
                    return Err(invalid(&error));
                }
                Err(error) => return Err(CheckError::Unavailable(error.to_string())),
            }
        }
        Ok(reset)
    }

    /// Fills every item's outcome; returns whether an enforced limit denied.
    async fn decide(&self, items: &mut [Item], mode: Mode) -> Result<bool, CheckError> {
        // Answers without the store.
        let mut charge = Vec::new();
        let mut peek = Vec::new();
        for (i, item) in items.iter_mut().enumerate() {
            match &item.limit.enforcement {
                Enforcement::Unlimited => {
                    item.outcome = Some(Decision::allowed(u32::MAX, u32::MAX, Duration::ZERO));
                }
                Enforcement::Block => {
                    let window = item.limit.window;
                    item.outcome = Some(Decision::limited(0, 0, window, window));
                }
                Enforcement::Rule(rule) => {
                    if item.cost == 0 || mode == Mode::Peek {
                        peek.push(i);
                    } else if item.cost > u64::from(rule.limit()) {
                        // Never admissible: the answer names the window.
                        item.outcome = Some(Decision::limited(rule.limit(), 0, rule.window(), rule.window()));
                    } else {
                        charge.push(i);
                    }
                }
            }
        }
        let enforced_denial =
            |items: &[Item]| items.iter().any(|i| !i.shadow && i.outcome.is_some_and(|d| !d.allowed));
        if enforced_denial(items) {
            peek.append(&mut charge);
        }
        self.peek(items, &peek).await?;
        if enforced_denial(items) {
            self.peek(items, &charge).await?;
            return Ok(true);
        }
        // The rest together; shadow limits that deny are set aside.
        while !charge.is_empty() {
            // Repeated descriptors sum their weights: a sum above a limit
            // is answered here, as any weight above a limit.
            let groups = merge(items, &charge);
            if enforced_denial(items) {
                let rest: Vec<usize> =
                    charge.iter().copied().filter(|&i| items[i].outcome.is_none()).collect();
                self.peek(items, &rest).await?;
                return Ok(true);
            }
            let dims = dimensions(items, &groups);
            if dims.is_empty() {
                break;
            }
            let multi = self.limiter.check_all_weighted(&dims).await.map_err(|e| invalid(&e))?;
            for (group, decision) in groups.iter().zip(&multi.decisions) {
                for &i in &group.members {
                    items[i].outcome = Some(*decision);
                }
            }
            if multi.allowed {
                break;
            }
            if enforced_denial(items) {
                return Ok(true);
            }
            charge.retain(|&i| items[i].outcome.is_some_and(|d| d.allowed));
        }
        Ok(false)
    }

    /// Peeks the items `which` (nothing is charged).
    async fn peek(&self, items: &mut [Item], which: &[usize]) -> Result<(), CheckError> {
        if which.is_empty() {
            return Ok(());
        }
        let groups = merge(items, which);
        let dims = dimensions(items, &groups);
        if dims.is_empty() {
            return Ok(());
        }
        let multi = self.limiter.peek_all_weighted(&dims).await.map_err(|e| invalid(&e))?;
        for (group, decision) in groups.iter().zip(&multi.decisions) {
            for &i in &group.members {
                items[i].outcome = Some(*decision);
            }
        }
        Ok(())
    }
}

/// Items sharing one counter (the same limit and identity, from repeated
/// descriptors), decided as one dimension of their summed weight.
struct Group {
    members: Vec<usize>,
    cost: u32,
}

/// Groups `which` by counter. A group heavier than its limit is answered
/// here (over the limit, without the store) and left out.
fn merge(items: &mut [Item], which: &[usize]) -> Vec<Group> {
    let mut groups: Vec<(Vec<usize>, u64)> = Vec::new();
    for &i in which {
        let same = groups.iter_mut().find(|(members, _)| {
            let first = &items[members[0]];
            Arc::ptr_eq(&first.limit, &items[i].limit) && first.identity == items[i].identity
        });
        match same {
            Some((members, cost)) => {
                members.push(i);
                *cost = cost.saturating_add(items[i].cost);
            }
            None => groups.push((vec![i], items[i].cost)),
        }
    }
    let mut out = Vec::with_capacity(groups.len());
    for (members, cost) in groups {
        let Some(rule) = items[members[0]].rule() else { continue };
        // A peek asks about a request of weight 1 at least.
        match u32::try_from(cost.max(1)) {
            Ok(cost) if cost <= rule.limit() => out.push(Group { members, cost }),
            _ => {
                let over = Decision::limited(rule.limit(), 0, rule.window(), rule.window());
                for i in members {
                    items[i].outcome = Some(over);
                }
            }
        }
    }
    out
}

fn dimensions<'a>(items: &'a [Item], groups: &[Group]) -> Vec<WeightedDimension<'a>> {
    groups
        .iter()
        .filter_map(|g| {
            let item = &items[g.members[0]];
            Some((item.rule()?, item.identity.as_str(), g.cost))
        })
        .collect()
}

fn invalid(error: &slidegate::Error) -> CheckError {
    CheckError::Invalid(error.to_string())
}

/// The answer when no limit applies to any descriptor.
fn no_limits(count: usize) -> CheckAnswer {
    CheckAnswer {
        code: Code::Ok,
        statuses: vec![DescriptorStatus::unlimited_by_config(); count],
        degraded: false,
        quota: Vec::new(),
    }
}

/// The counter identity of `limit` for a descriptor's `entries`: the
/// domain, every entry (a shared wildcard's pattern instead of its value),
/// and the limit's own part. Each part is length-prefixed, so no two
/// requests' identities meet whatever bytes their values hold; the library
/// digests long identities.
fn identity(
    domain: &str,
    entries: &[(&str, &str)],
    path: Option<&MatchPath<'_>>,
    limit: &Limit,
    own: bool,
) -> String {
    let mut out = String::with_capacity(
        16 + domain.len() + entries.iter().map(|(k, v)| k.len() + v.len() + 8).sum::<usize>(),
    );
    let mut push = |part: &str| {
        out.push_str(&part.len().to_string());
        out.push(':');
        out.push_str(part);
    };
    push(domain);
    for (i, &(key, value)) in entries.iter().enumerate() {
        push(key);
        let shared = path
            .and_then(|p| p.get(i))
            .filter(|(node, how)| node.share_threshold && *how == How::Wildcard)
            .and_then(|(node, _)| node.value.as_deref());
        push(shared.unwrap_or(value));
    }
    out.push('|');
    if own {
        out.push_str("request");
    } else {
        out.push_str(&limit.identity_part());
    }
    out
}

/// The stats key of a match whose request values name it, as envoy
/// ratelimit builds it: with `detailed_metric` on the matched descriptor,
/// every entry's `key_value`; with `value_to_metric` on a level matched by
/// key or wildcard, that level's `key_value`. `None`: the limit's own key.
fn dynamic_stat_key(domain: &str, entries: &[(&str, &str)], path: &MatchPath<'_>) -> Option<String> {
    let detailed = path.last().is_some_and(|(node, _)| node.detailed_metric);
    if !detailed && !path.iter().any(|(node, how)| node.value_to_metric && *how != How::Exact) {
        return None;
    }
    let mut key = domain.to_owned();
    for (&(entry_key, value), (node, how)) in entries.iter().zip(path) {
        key.push('.');
        if detailed
            || (node.value_to_metric && !node.share_threshold && *how != How::Exact && !value.is_empty())
        {
            key.push_str(entry_key);
            key.push('_');
            key.push_str(value);
        } else {
            key.push_str(&node.composite());
        }
    }
    Some(key)
}

/// The limit a descriptor gives itself.
fn override_limit(domain: &str, entries: &[(&str, &str)], given: LimitOverride) -> Result<Limit, CheckError> {
    let window = given.unit.duration();
    let enforcement = match given.requests_per_unit {
        0 => Enforcement::Block,
        n => Enforcement::Rule(Rule::new(n, window).map_err(|e| invalid(&e))?),
    };
    let mut stat_key = domain.to_owned();
    for (key, value) in entries {
        stat_key.push('.');
        stat_key.push_str(key);
        if !value.is_empty() {
            stat_key.push('_');
            stat_key.push_str(value);
        }
    }
    Ok(Limit {
        name: None,
        enforcement,
        requests_per_unit: given.requests_per_unit,
        window,
        unit: Some(given.unit),
        shadow: false,
        replaces: Vec::new(),
        index: 0,
        stat_key,
        source: "the request's descriptor".into(),
    })
}

/// Builds the answer from the decided items.
fn answer(domain: &str, count: usize, items: Vec<Item>, denied: bool, degraded: bool) -> CheckAnswer {
    let mut statuses = vec![DescriptorStatus::unlimited_by_config(); count];
    let mut quota = Vec::new();
    for item in items {
        let Some(decision) = item.outcome else { continue };
        let status = &mut statuses[item.descriptor];
        let stat_key = || match &item.stat_key {
            Some(key) => crate::telemetry::bounded_value_key(key.clone()),
            None => item.limit.stat_key.clone(),
        };
        if !decision.allowed {
            if item.shadow {
                status.shadow_over_limit = true;
                metrics::counter!(
                    "slidegate_shadow_over_limit_total",
                    "domain" => domain.to_owned(),
                    "limit" => stat_key()
                )
                .increment(1);
            } else {
                status.code = Code::OverLimit;
                metrics::counter!(
                    "slidegate_service_over_limit_total",
                    "domain" => domain.to_owned(),
                    "limit" => stat_key()
                )
                .increment(1);
            }
        }
        if let Some(rule) = item.rule() {
            quota.push((rule.clone(), decision));
        }
        status.limits.push(LimitStatus {
            limit: item.limit,
            allowed: decision.allowed,
            state: decision.state,
            remaining: decision.remaining,
            retry_after: decision.retry_after,
            reset_after: decision.reset_after,
        });
    }
    for status in &mut statuses {
        let binding = status
            .limits
            .iter()
            .filter(|l| !l.allowed)
            .max_by_key(|l| (!l.limit.shadow, l.retry_after))
            .or_else(|| status.limits.iter().min_by_key(|l| l.remaining));
        if let Some(binding) = binding {
            status.limit = Some(binding.limit.clone());
            status.remaining = binding.remaining;
            status.retry_after = binding.retry_after;
            status.reset_after = binding.reset_after;
            status.state = Some(binding.state);
        }
    }
    CheckAnswer { code: if denied { Code::OverLimit } else { Code::Ok }, statuses, degraded, quota }
}
