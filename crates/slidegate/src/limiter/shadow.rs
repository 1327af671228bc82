//! Shadow rules and costs above a limit, in multi-dimension checks.
//!
//! A shadow rule's denial is overruled: the request is admitted, and the
//! decision says so ([`Source::Shadow`]). A multi-dimension check is all or
//! nothing, so a denial by shadow rules alone charged none of the others:
//! those rules are set aside and the others decided again, until a call
//! admits (and charges) or an enforced rule denies. Each call is atomic and
//! only an admitting one charges, so a shadow rule never lets a request
//! through uncharged by the rules that are enforced.
//!
//! A cost above a rule's configured limit can never be admitted: it is
//! answered without the store ([`Decision::cost_above_limit`]), and is
//! subject to shadow mode like any denial.

use std::sync::atomic::Ordering;

use super::pipeline::{record_all, unknown};
use super::{Inner, Limiter};
use crate::store::{Dimensions, Request};
use crate::{Decision, Error, ErrorKind, MultiDecision, Rule, Source, Store, WeightedDimension};

/// Which dimensions of a request cost more than their rule's limit
/// (`None`: none does).
pub(super) type Heavy = Option<Vec<bool>>;

/// Validates a multi-dimension request: `first` is its validation as
/// given; when that refused a cost above a limit, the request is
/// validated again with such costs lowered to the limit (keys, zero costs
/// and repeated dimensions are still refused), and those dimensions are
/// marked heavy.
pub(super) fn validate<'a>(
    first: Result<Dimensions<'a>, Error>,
    given: impl FnOnce() -> Vec<WeightedDimension<'a>>,
) -> Result<(Dimensions<'a>, Heavy), Error> {
    match first {
        Ok(valid) => Ok((valid, None)),
        Err(error) if error.kind() == ErrorKind::InvalidCost => {
            let given = given();
            let heavy: Vec<bool> =
                given.iter().map(|&(rule, _, cost)| cost > rule.limit() && !rule.is_budget()).collect();
            if !heavy.contains(&true) {
                return Err(error);
            }
            let lowered: Vec<WeightedDimension<'a>> = given
                .iter()
                .zip(&heavy)
                .map(|(&(rule, key, cost), &h)| (rule, key, if h { rule.limit() } else { cost }))
                .collect();
            Ok((Dimensions::weighted(&lowered)?, Some(heavy)))
        }
        Err(error) => Err(error),
    }
}

impl<S> Inner<S> {
    /// Whether `rule`'s denials are overruled.
    pub(super) fn is_shadow(&self, rule: &Rule) -> bool {
        self.shadow || rule.is_shadow()
    }

    /// Whether any of `requests` is in shadow mode.
    pub(super) fn shadows(&self, requests: &[Request<'_>]) -> bool {
        self.shadow || requests.iter().any(|r| r.rule().is_shadow())
    }

    /// `decision` under `rule`, a denial overruled if it is in shadow mode.
    pub(super) fn overrule(&self, rule: &Rule, decision: Decision) -> Decision {
        if self.is_shadow(rule) { decision.shadowed() } else { decision }
    }

    /// The answer to a request with heavy dimensions, without the store:
    /// those denied, the others admissible as far as is known.
    fn heavy_answer(&self, requests: &[Request<'_>], heavy: &[bool]) -> MultiDecision {
        let enabled = self.enabled.load(Ordering::Relaxed);
        let decisions = requests.iter().zip(heavy).map(|(request, &heavy)| {
            let rule = request.rule();
            match (enabled, heavy) {
                (false, _) => Decision::disabled(rule.limit()),
                (true, true) => Decision::cost_above_limit(rule),
                (true, false) => unknown(rule, Source::CostAboveLimit),
            }
        });
        MultiDecision::from_decisions(decisions.collect())
    }
}

impl<S: Store> Limiter<S> {
    /// [`decide_all`](Self::decide_all) with shadow rules set aside, or
    /// heavy dimensions answered (see the module docs).
    pub(super) async fn decide_all_shadowed(
        &self,
        valid: Dimensions<'_>,
        heavy: Heavy,
    ) -> Result<MultiDecision, Error> {
        let inner = &*self.inner;
        let requests: Vec<Request<'_>> = valid.requests().to_vec();
        let mut decisions: Vec<Option<Decision>> = vec![None; requests.len()];
        let mut left: Vec<usize> = (0..requests.len()).collect();
        let mut answered = heavy.map(|heavy| inner.heavy_answer(&requests, &heavy));
        let mut next = Some(valid);
        // Budgets answered without the store (beside a heavy dimension):
        // their costs are recorded on their own at the end.
        let mut unrecorded = Vec::new();
        loop {
            let (multi, asked) = match (answered.take(), next.take()) {
                (Some(multi), _) => (multi, false),
                (None, Some(valid)) => (self.decide_all_once(valid, false).await?, true),
                (None, None) => break,
            };
            let is_budget = |i: usize| requests[i].rule().is_budget();
            let enforced = left
                .iter()
                .zip(&multi.decisions)
                .any(|(&i, d)| !d.allowed && !inner.is_shadow(requests[i].rule()));
            if multi.allowed || enforced {
                for (&i, &decision) in left.iter().zip(&multi.decisions) {
                    decisions[i] = Some(inner.overrule(requests[i].rule(), decision));
                    if !asked && is_budget(i) {
                        unrecorded.push(i);
                    }
                }
                break;
            }
            // Only shadow rules denied: they are set aside, the rest decided
            // again — but for budgets the store recorded (not twice).
            let mut rest = Vec::with_capacity(left.len());
            for (&i, &decision) in left.iter().zip(&multi.decisions) {
                if decision.allowed && asked && is_budget(i) {
                    decisions[i] = Some(inner.overrule(requests[i].rule(), decision));
                } else if decision.allowed {
                    rest.push(i);
                } else {
                    decisions[i] = Some(decision.shadowed());
                }
            }
            if !rest.is_empty() {
                next = Some(Dimensions::from_valid(rest.iter().map(|&i| requests[i].clone()).collect()));
            }
            left = rest;
        }
        if !unrecorded.is_empty() {
            let budgets = Dimensions::from_valid(unrecorded.iter().map(|&i| requests[i].clone()).collect());
            for (&i, decision) in unrecorded.iter().zip(self.decide_all_once(budgets, false).await?.decisions)
            {
                decisions[i] = Some(inner.overrule(requests[i].rule(), decision));
            }
        }
        let decisions = decisions
            .into_iter()
            .zip(&requests)
            .map(|(decision, request)| decision.unwrap_or_else(|| unknown(request.rule(), Source::Store)));
        let multi = MultiDecision::from_decisions(decisions.collect());
        record_all(&requests, &multi);
        Ok(multi)
    }

    /// [`peek_all`](Self::peek_all) with heavy dimensions answered and
    /// shadow rules' denials overruled: nothing is charged, so one peek of
    /// the rest tells every verdict.
    pub(super) async fn peek_all_shadowed(
        &self,
        valid: Dimensions<'_>,
        heavy: Heavy,
    ) -> Result<MultiDecision, Error> {
        let inner = &*self.inner;
        let requests: Vec<Request<'_>> = valid.requests().to_vec();
        let mut decisions = match &heavy {
            None => self.peek_all(valid).await?.decisions,
            Some(heavy) => {
                let mut decisions = inner.heavy_answer(&requests, heavy).decisions;
                let light: Vec<usize> = (0..requests.len()).filter(|&i| !heavy[i]).collect();
                if !light.is_empty() && inner.enabled.load(Ordering::Relaxed) {
                    let rest = Dimensions::from_valid(light.iter().map(|&i| requests[i].clone()).collect());
                    for (i, decision) in light.into_iter().zip(self.peek_all(rest).await?.decisions) {
                        decisions[i] = decision;
                    }
                }
                decisions
            }
        };
        for (decision, request) in decisions.iter_mut().zip(&requests) {
            *decision = inner.overrule(request.rule(), *decision);
        }
        Ok(MultiDecision::from_decisions(decisions))
    }
}
