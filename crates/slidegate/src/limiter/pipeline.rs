//! The one pipeline every check runs through, in three stages:
//!
//! * **prepare** — validate once (into a [`Request`] or [`Dimensions`]),
//!   scale by adaptive limits, then answer without the store when limiting
//!   is switched off, when the cost is above the limit (configured or
//!   scaled), or when the deny cache holds the denial (remote stores only);
//! * **ask** — a local store directly; a remote one behind the circuit
//!   breaker and the deadline;
//! * **settle** — remember or forget denials in the deny cache, answer
//!   failures by the failure policy, overrule shadow rules' denials
//!   ([`shadow`](super::shadow)), record the decision's metrics.
//!
//! [`Limiter::check_n`], [`Limiter::check_all_n`] and
//! [`Limiter::check_batch`] only shape input and output around these.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::guard::Outcome;
use super::scaling::Scaling;
use super::{Inner, Limiter};
use crate::failure::{self, Reason};
use crate::store::{Dimensions, Request};
use crate::{Decision, Dimension, Error, MultiDecision, Rule, Source, Store, telemetry};

/// A request after the prepare stage: answered (`A`), or for the store (`Q`).
pub(super) enum Prepared<A, Q> {
    Answered(A),
    Ask(Q),
}

impl<S: Store> Inner<S> {
    /// The time the deny cache is read and written at: `Some` only when it
    /// applies (a remote store, and a cache configured).
    pub(super) fn cache_time(&self) -> Option<u64> {
        (self.deny_cache.is_some() && !self.store.is_local()).then(|| self.clock.now_ms())
    }

    /// Prepares one request: `rule` is the configured rule.
    pub(super) fn prepare<'a>(
        &self,
        scaling: &Scaling,
        rule: &'a Rule,
        key: &'a str,
        cost: u32,
        sent: Option<u64>,
    ) -> Result<Prepared<Decision, Request<'a>>, Error> {
        // A cost above the configured limit is validated as the limit (the
        // key still must be valid) and answered below.
        // A budget takes any cost.
        let heavy = cost > rule.limit() && !rule.is_budget();
        let configured = rule;
        let request =
            Request::new(rule, key, if heavy { rule.limit() } else { cost })?.enforcing(scaling.rule(rule));
        let rule = request.rule();
        if !self.enabled.load(Ordering::Relaxed) {
            return Ok(Prepared::Answered(Decision::disabled(rule.limit())));
        }
        if heavy {
            return Ok(Prepared::Answered(Decision::cost_above_limit(configured)));
        }
        if let Some(denial) = scaling.beyond(rule, cost) {
            return Ok(Prepared::Answered(denial));
        }
        if let Some(decision) = self.cached(&request, sent) {
            return Ok(Prepared::Answered(Self::hit(&request, decision)));
        }
        Ok(Prepared::Ask(request))
    }

    /// The deny cache's answer to `request`, if it holds one (not yet
    /// counted as a hit: see [`hit`](Self::hit)).
    /// A budget is never answered from the cache: its every cost must reach
    /// the store.
    fn cached(&self, request: &Request<'_>, sent: Option<u64>) -> Option<Decision> {
        let (cache, sent) = (self.deny_cache.as_ref()?, sent?);
        if request.rule().is_budget() {
            return None;
        }
        cache.get(request.rule(), request.identity().as_str(), request.cost(), sent)
    }

    /// Counts a deny-cache answer that is given.
    fn hit(request: &Request<'_>, decision: Decision) -> Decision {
        telemetry::deny_cache_hit(request.rule());
        decision
    }

    /// Prepares a multi-dimension request (`valid`, each request under its
    /// configured rule). Denied locally when one of its dimensions is
    /// cached as denied at its cost — the store would deny it too and
    /// charge nothing — unless another dimension has a penalty, whose
    /// violation only the store can count. An answer given here is
    /// recorded when `record` (a check, not a peek).
    fn prepare_all<'a>(
        &self,
        scaling: &Scaling,
        mut valid: Dimensions<'a>,
        sent: Option<u64>,
        record: bool,
    ) -> Prepared<MultiDecision, Dimensions<'a>> {
        if scaling.is_active() {
            let scaled = valid.into_requests().into_iter().map(|r| match r.borrowed_rule() {
                Some(rule) => r.enforcing(scaling.rule(rule)),
                // Never: validated requests borrow their rule.
                None => r,
            });
            valid = Dimensions::from_valid(scaled.collect());
        }
        let requests = valid.requests();
        let answered = |multi: MultiDecision| {
            if record {
                record_all(requests, &multi);
            }
            Prepared::Answered(multi)
        };
        if !self.enabled.load(Ordering::Relaxed) {
            let decisions = requests.iter().map(|r| Decision::disabled(r.rule().limit())).collect();
            return answered(MultiDecision::from_decisions(decisions));
        }
        if requests.iter().any(|r| scaling.beyond(r.rule(), r.cost()).is_some()) {
            // Not admissible whatever the store holds: nothing is asked.
            let decisions = requests.iter().map(|r| {
                let rule = r.rule();
                scaling.beyond(rule, r.cost()).unwrap_or_else(|| unknown(rule, Source::AdaptiveLimit))
            });
            return answered(MultiDecision::from_decisions(decisions.collect()));
        }
        if sent.is_some() {
            let hit = requests.iter().enumerate().find_map(|(i, r)| Some((i, self.cached(r, sent)?)));
            let penalty_elsewhere = |hit: usize| {
                requests.iter().enumerate().any(|(i, r)| i != hit && r.rule().penalty().is_some())
            };
            if let Some((hit, denial)) = hit
                && !penalty_elsewhere(hit)
            {
                let mut denial = Some(denial);
                let decisions = requests.iter().enumerate().map(|(i, r)| {
                    // Those before the first hit are not cached; those after may be.
                    let cached = match i.cmp(&hit) {
                        std::cmp::Ordering::Less => None,
                        std::cmp::Ordering::Equal => denial.take(),
                        std::cmp::Ordering::Greater => self.cached(r, sent),
                    };
                    match cached {
                        Some(decision) => Self::hit(r, decision),
                        None => unknown(r.rule(), Source::DenyCache),
                    }
                });
                return answered(MultiDecision::from_decisions(decisions.collect()));
            }
        }
        Prepared::Ask(valid)
    }

    /// Asks the store the call `call` makes: directly when it is local,
    /// otherwise behind the breaker and the deadline. A closure, not a
    /// future: the store's future is made where it is awaited, so the
    /// pipeline's future holds it once, not once per stage it passes.
    pub(super) async fn ask<T, F: Future<Output = Result<T, Error>>>(
        &self,
        call: impl FnOnce() -> F,
    ) -> Outcome<T> {
        if !self.store.is_local() {
            return self.guarded(call).await;
        }
        match call().await {
            Ok(answer) => Outcome::Answered(answer),
            Err(error) if failure::is_input_error(&error) => Outcome::Invalid(error),
            Err(error) => Outcome::Failed(Reason::of(&error)),
        }
    }

    /// Settles one request's outcome: the store's answer (remembered by the
    /// deny cache), the caller's error, or the failure policy's answer.
    pub(super) fn settle(
        &self,
        request: &Request<'_>,
        sent: Option<u64>,
        outcome: Outcome<Decision>,
    ) -> Result<Decision, Error> {
        match outcome {
            Outcome::Answered(decision) => {
                if let Some(sent) = sent {
                    self.remember(request, sent, &decision);
                }
                Ok(decision)
            }
            Outcome::Invalid(error) => Err(error),
            Outcome::Failed(reason) => self.degrade(request, reason),
        }
    }

    /// [`settle`](Self::settle) for a multi-dimension request.
    fn settle_all(
        &self,
        dimensions: &Dimensions<'_>,
        sent: Option<u64>,
        outcome: Outcome<MultiDecision>,
    ) -> Result<MultiDecision, Error> {
        match outcome {
            Outcome::Answered(multi) => {
                if let Some(sent) = sent {
                    for (request, decision) in dimensions.requests().iter().zip(&multi.decisions) {
                        self.remember(request, sent, decision);
                    }
                }
                Ok(multi)
            }
            Outcome::Invalid(error) => Err(error),
            Outcome::Failed(reason) => self.degrade_all(dimensions, reason),
        }
    }
}

/// A dimension the store was not asked about, in a request denied for
/// another one: admissible as far as is known, with no quota promised.
pub(super) fn unknown(rule: &Rule, source: Source) -> Decision {
    Decision::allowed(rule.limit(), 0, Duration::ZERO).from(source)
}

pub(super) fn record_all(requests: &[Request<'_>], multi: &MultiDecision) {
    for (request, decision) in requests.iter().zip(&multi.decisions) {
        telemetry::decision(request.rule(), decision);
    }
}

pub(super) fn record(rule: &Rule, decision: Decision) -> Decision {
    telemetry::decision(rule, &decision);
    decision
}

impl<S: Store> Limiter<S> {
    /// The pipeline of one request (see the module docs).
    pub(super) async fn decide(&self, rule: &Rule, key: &str, cost: u32) -> Result<Decision, Error> {
        let inner = &*self.inner;
        let scaling = inner.scaling();
        let sent = inner.cache_time();
        let request = match inner.prepare(&scaling, rule, key, cost, sent)? {
            Prepared::Answered(decision) => return Ok(record(rule, inner.overrule(rule, decision))),
            Prepared::Ask(request) => request,
        };
        let outcome = inner.ask(|| inner.store.check(&request)).await;
        inner.settle(&request, sent, outcome).map(|d| record(request.rule(), inner.overrule(rule, d)))
    }

    /// The pipeline of one multi-dimension request, validated: once, or
    /// with shadow rules set aside ([`shadow`](super::shadow)) when any
    /// applies.
    pub(super) async fn decide_all(
        &self,
        valid: Dimensions<'_>,
        // Which dimensions cost more than their limit (see `shadow`).
        heavy: Option<Vec<bool>>,
    ) -> Result<MultiDecision, Error> {
        if heavy.is_some() || self.inner.shadows(valid.requests()) {
            return self.decide_all_shadowed(valid, heavy).await;
        }
        self.decide_all_once(valid, true).await
    }

    /// One pass of the pipeline over `valid`; its decisions are recorded
    /// when `record`.
    pub(super) async fn decide_all_once(
        &self,
        valid: Dimensions<'_>,
        record: bool,
    ) -> Result<MultiDecision, Error> {
        let inner = &*self.inner;
        let scaling = inner.scaling();
        let sent = inner.cache_time();
        // A budget's cost reaches the store whatever the others are.
        let budgets: Vec<usize> = (0..valid.len())
            .filter(|&i| valid.requests()[i].rule().is_budget() && valid.requests()[i].cost() > 0)
            .collect();
        let recorded = (!budgets.is_empty()).then(|| valid.clone());
        match inner.prepare_all(&scaling, valid, sent, record) {
            Prepared::Answered(mut multi) => {
                if let Some(all) = recorded.filter(|_| inner.enabled.load(Ordering::Relaxed)) {
                    let dims =
                        Dimensions::from_valid(budgets.iter().map(|&i| all.requests()[i].clone()).collect());
                    let outcome = inner.ask(|| inner.store.check_all(&dims)).await;
                    let charged = inner.settle_all(&dims, None, outcome)?;
                    for (&i, decision) in budgets.iter().zip(charged.decisions) {
                        multi.decisions[i] = decision;
                    }
                }
                Ok(multi)
            }
            Prepared::Ask(valid) => {
                let outcome = inner.ask(|| inner.store.check_all(&valid)).await;
                let multi = inner.settle_all(&valid, sent, outcome)?;
                if record {
                    record_all(valid.requests(), &multi);
                }
                Ok(multi)
            }
        }
    }

    /// The pipeline of a peek: prepared as a check (without the deny
    /// cache), asked of the store's `peek_all`, failures answered by the
    /// failure policy without charging its fallback. Nothing is recorded
    /// as a decision.
    pub(super) async fn peek_all(&self, valid: Dimensions<'_>) -> Result<MultiDecision, Error> {
        let inner = &*self.inner;
        let scaling = inner.scaling();
        match inner.prepare_all(&scaling, valid, None, false) {
            Prepared::Answered(multi) => Ok(multi),
            Prepared::Ask(valid) => match inner.ask(|| inner.store.peek_all(&valid)).await {
                Outcome::Answered(multi) => Ok(multi),
                Outcome::Invalid(error) => Err(error),
                Outcome::Failed(reason) => inner.degrade_peek(&valid, reason),
            },
        }
    }

    /// The prepare stage of one multi-dimension request alone: its answer
    /// when no store call is needed, `None` when only the store can answer.
    pub(super) fn decide_all_now(
        &self,
        dimensions: &[Dimension<'_>],
        cost: u32,
    ) -> Option<Result<MultiDecision, Error>> {
        let inner = &*self.inner;
        // Shadow rules may need a second store call, a budget's cost must
        // reach the store: not answered here.
        if inner.shadow || dimensions.iter().any(|(rule, _)| rule.is_shadow() || rule.is_budget()) {
            return None;
        }
        let sent = inner.cache_time();
        // Without a denial cached, the switch or adaptive limits to answer
        // it, only the store can: nothing to validate here.
        let cached = sent.is_some() && inner.deny_cache.as_ref().is_some_and(|cache| !cache.is_empty());
        if !cached && inner.enabled.load(Ordering::Relaxed) && inner.adaptive.is_none() {
            return None;
        }
        // Validated before the scaling is read, as `check_all_n` does: an
        // invalid request never takes the adaptive limits' evaluation.
        let valid = match Dimensions::new(dimensions, cost) {
            Ok(valid) => valid,
            // A cost above a limit is answered by `check_all_n`.
            Err(error) if error.kind() == crate::ErrorKind::InvalidCost && cost > 0 => return None,
            Err(error) => return Some(Err(error)),
        };
        let scaling = inner.scaling();
        match inner.prepare_all(&scaling, valid, sent, true) {
            Prepared::Answered(multi) => Some(Ok(multi)),
            Prepared::Ask(_) => None,
        }
    }
}
