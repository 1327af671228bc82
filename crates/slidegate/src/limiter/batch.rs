//! [`Limiter::check_batch`]: many independent requests in one store call,
//! with the deny cache, the breaker and the failure policy per request.

use std::borrow::Cow;
use std::sync::atomic::Ordering;

use super::Limiter;
use super::guard::Outcome;
use crate::failure::{self, Reason};
use crate::{BatchItem, Decision, Error, ErrorKind, Rule, Store, encode_identity, telemetry, validate_cost};

impl<S: Store> Limiter<S> {
    /// Decides many independent requests at once — one round trip to the
    /// Redis store (per Cluster slot) instead of one each. Results are in
    /// input order; an invalid request gets its own `Err` and does not
    /// affect the others. Denials in the deny cache are answered locally.
    pub async fn check_batch(&self, requests: &[BatchItem<'_>]) -> Vec<Result<Decision, Error>> {
        let inner = &*self.inner;
        let scaling = inner.scaling();
        let rules: Vec<Cow<'_, Rule>> = requests.iter().map(|&(rule, _, _)| scaling.rule(rule)).collect();
        let sent = inner.clock.now_ms();
        let enabled = inner.enabled.load(Ordering::Relaxed);
        let remote = !inner.store.is_local();
        let mut results: Vec<Option<Result<Decision, Error>>> = Vec::with_capacity(requests.len());
        let mut asked = Vec::new();
        let mut to_store: Vec<BatchItem<'_>> = Vec::new();
        for (i, (&(configured, key, cost), rule)) in requests.iter().zip(&rules).enumerate() {
            let rule = &**rule;
            let identity = match validate_cost(configured, cost).and_then(|()| encode_identity(key)) {
                Ok(identity) => identity,
                Err(error) => {
                    results.push(Some(Err(error)));
                    continue;
                }
            };
            let cached = if remote && enabled {
                inner.deny_cache.as_ref().and_then(|c| c.get(rule, &identity, cost, sent))
            } else {
                None
            };
            if !enabled {
                results.push(Some(Ok(Decision::disabled(rule.limit()))));
            } else if let Some(denial) = scaling.beyond(rule, cost) {
                results.push(Some(Ok(denial)));
            } else if let Some(decision) = cached {
                telemetry::deny_cache_hit(rule);
                results.push(Some(Ok(decision)));
            } else {
                results.push(None);
                asked.push(i);
                to_store.push((rule, key, cost));
            }
        }
        if !to_store.is_empty() {
            let answers = if remote {
                // A batch whose every item failed for the store's sake is one
                // failed call to the breaker (and a success is a success):
                // batch-only traffic must open and close it like checks do.
                let call = async {
                    let answers = inner.store.check_batch(&to_store).await;
                    let failed =
                        |a: &Result<Decision, Error>| a.as_ref().is_err_and(|e| !failure::is_input_error(e));
                    match answers.first() {
                        Some(Err(error)) if answers.iter().all(failed) => {
                            Err(Error::new(error.kind(), error.message()))
                        }
                        _ => Ok(answers),
                    }
                };
                match inner.guarded(call).await {
                    Outcome::Answered(answers) => Ok(answers),
                    Outcome::Failed(reason) => Err(reason),
                    // The call above fails with store errors only.
                    Outcome::Invalid(_) => Err(Reason::Unavailable),
                }
            } else {
                Ok(inner.store.check_batch(&to_store).await)
            };
            self.settle_batch(&to_store, &asked, answers, sent, &mut results);
        }
        results
            .into_iter()
            .zip(&rules)
            .map(|(result, rule)| {
                let result = result.unwrap_or_else(|| Err(Error::new(ErrorKind::Backend, "batch item lost")));
                if let Ok(decision) = &result {
                    telemetry::decision(rule, decision);
                }
                result
            })
            .collect()
    }

    /// Files the store's batch answers (or, when the batch call failed as a
    /// whole, the policy's, for that `Reason`) into `results`.
    fn settle_batch(
        &self,
        to_store: &[BatchItem<'_>],
        asked: &[usize],
        answers: Result<Vec<Result<Decision, Error>>, Reason>,
        sent: u64,
        results: &mut [Option<Result<Decision, Error>>],
    ) {
        let inner = &*self.inner;
        let (mut answers, failed) = match answers {
            Ok(answers) => (Some(answers.into_iter()), Reason::Unavailable),
            Err(reason) => (None, reason),
        };
        for (&(rule, key, cost), &i) in to_store.iter().zip(asked) {
            let answer = answers.as_mut().and_then(Iterator::next);
            results[i] = Some(match answer {
                Some(Ok(decision)) => {
                    if let Ok(identity) = encode_identity(key) {
                        inner.remember(rule, &identity, cost, sent, &decision);
                    }
                    Ok(decision)
                }
                Some(Err(error)) if failure::is_input_error(&error) => Err(error),
                Some(Err(error)) => inner.degrade(rule, key, cost, Reason::of(&error)),
                // The whole call failed (or, never expected, an answer is missing).
                None => inner.degrade(rule, key, cost, failed),
            });
        }
    }
}
