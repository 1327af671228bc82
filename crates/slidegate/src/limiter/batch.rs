//! Many independent requests decided at once: each prepared and settled on
//! its own, those for the store asked in one call.

use super::guard::Outcome;
use super::pipeline::{Prepared, record};
use super::{Inner, Limiter};
use crate::failure::{self, Reason};
use crate::store::Request;
use crate::{Decision, Error, Store};

impl<S: Store> Limiter<S> {
    /// The pipeline of many independent requests: each prepared and settled
    /// on its own, those for the store asked in one call.
    pub(super) async fn decide_batch(
        &self,
        requests: &[crate::WeightedDimension<'_>],
    ) -> Vec<Result<Decision, Error>> {
        let inner = &*self.inner;
        let scaling = inner.scaling();
        let sent = inner.cache_time();
        let mut results: Vec<Option<Result<Decision, Error>>> = Vec::with_capacity(requests.len());
        let mut asked: Vec<usize> = Vec::new();
        let mut to_ask: Vec<Request<'_>> = Vec::new();
        for (i, &(rule, key, cost)) in requests.iter().enumerate() {
            results.push(match inner.prepare(&scaling, rule, key, cost, sent) {
                Ok(Prepared::Answered(decision)) => Some(Ok(decision)),
                Ok(Prepared::Ask(request)) => {
                    asked.push(i);
                    to_ask.push(request);
                    None
                }
                Err(error) => Some(Err(error)),
            });
        }
        if !to_ask.is_empty() {
            let answers = inner.ask_batch(&to_ask).await;
            for ((request, i), answer) in to_ask.iter().zip(asked).zip(answers) {
                results[i] = Some(inner.settle(request, sent, answer));
            }
        }
        results
            .into_iter()
            .zip(requests)
            .map(|(result, &(rule, _, _))| {
                let result =
                    result.unwrap_or_else(|| Err(Error::new(crate::ErrorKind::Backend, "batch item lost")));
                result.map(|decision| record(rule, inner.overrule(rule, decision)))
            })
            .collect()
    }
}

impl<S: Store> Inner<S> {
    /// Asks the store for a batch: one outcome per request. A batch whose
    /// every item failed for the store's sake is one failed call to the
    /// breaker (and a success is a success): batch-only traffic opens and
    /// closes it like checks do.
    async fn ask_batch(&self, requests: &[Request<'_>]) -> Vec<Outcome<Decision>> {
        let per_item = |answers: Vec<Result<Decision, Error>>| -> Vec<Outcome<Decision>> {
            answers
                .into_iter()
                .map(|answer| match answer {
                    Ok(decision) => Outcome::Answered(decision),
                    Err(error) if failure::is_input_error(&error) => Outcome::Invalid(error),
                    Err(error) => Outcome::Failed(Reason::of(&error)),
                })
                .collect()
        };
        let call = || async {
            let answers = self.store.check_batch(requests).await;
            let failed = |a: &Result<Decision, Error>| a.as_ref().is_err_and(|e| !failure::is_input_error(e));
            match answers.first() {
                Some(Err(error)) if answers.iter().all(failed) => {
                    Err(Error::new(error.kind(), error.message()))
                }
                _ => Ok(answers),
            }
        };
        let mut outcomes = match self.ask(call).await {
            Outcome::Answered(answers) => per_item(answers),
            Outcome::Failed(reason) => requests.iter().map(|_| Outcome::Failed(reason)).collect(),
            // The call above fails with store errors only.
            Outcome::Invalid(_) => requests.iter().map(|_| Outcome::Failed(Reason::Unavailable)).collect(),
        };
        // Never expected: a store that answered fewer requests than asked.
        outcomes.resize_with(requests.len(), || Outcome::Failed(Reason::Backend));
        outcomes
    }
}
