//! [`RateLimit`]: the service a [`RateLimitLayer`](crate::RateLimitLayer) wraps around yours.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::request::Parts;
use http::{Request, Response};
use slidegate::telemetry::{LogThrottle, THROTTLED_NOTE};
use slidegate::{Decision, MultiDecision, Rule, State, Store};
use tower_service::Service;

use crate::charge::charge_when_done;
use crate::config::{Config, KeyedRule, MissingKey};
use crate::future::ResponseFuture;
use crate::headers::{Headers, add_quota_headers, never_admitted};
use crate::leases::{InFlight, acquire_all, goes_on, hold, hold_until_done, lease_keys};
use crate::response::{
    LimitedBody, banned_message, cost_above_limit, internal_error, limited, process_ms, unavailable,
    unidentified, wants_json,
};
use crate::shape::{Wait, wait_for};

/// Rate limits the requests of an inner service (see
/// [`RateLimitLayer`](crate::RateLimitLayer)).
pub struct RateLimit<T, S> {
    inner: T,
    config: Arc<Config<S>>,
}

impl<T: Clone, S> Clone for RateLimit<T, S> {
    fn clone(&self) -> Self {
        RateLimit { inner: self.inner.clone(), config: Arc::clone(&self.config) }
    }
}

impl<T: fmt::Debug, S> fmt::Debug for RateLimit<T, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimit").field("inner", &self.inner).finish_non_exhaustive()
    }
}

impl<T, S> RateLimit<T, S> {
    pub(crate) fn new(inner: T, config: Arc<Config<S>>) -> Self {
        RateLimit { inner, config }
    }
}

/// The keys of a request (borrowed from its head where they can be), one
/// per rule that applies: the rule's index and the key.
enum Keys<'a> {
    Checked(Vec<(usize, Cow<'a, str>)>),
    /// The rule whose key is missing answers 400.
    Rejected(&'a KeyedRule),
}

fn keys_of<'a, S>(config: &'a Config<S>, parts: &'a Parts) -> Keys<'a> {
    let mut keys = Vec::with_capacity(config.dimensions.len());
    for (i, dimension) in config.dimensions.iter().enumerate() {
        match dimension.key.extract(parts) {
            Some(key) if !key.is_empty() => keys.push((i, key)),
            _ => match &dimension.missing {
                MissingKey::Shared(shared) => keys.push((i, Cow::Borrowed(&**shared))),
                MissingKey::Skip => {}
                MissingKey::Reject => return Keys::Rejected(dimension),
            },
        }
    }
    Keys::Checked(keys)
}

impl<T, S, ReqB, ResB> Service<Request<ReqB>> for RateLimit<T, S>
where
    T: Service<Request<ReqB>, Response = Response<ResB>> + Clone + Send + 'static,
    T::Future: Send,
    T::Error: Send,
    S: Store,
    ReqB: Send + 'static,
    ResB: LimitedBody + Send + 'static,
{
    type Response = Response<ResB>;
    type Error = T::Error;
    type Future = ResponseFuture<Response<ResB>, T::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqB>) -> Self::Future {
        let config = Arc::clone(&self.config);
        let (parts, body) = request.into_parts();
        let keys = match keys_of(&config, &parts) {
            Keys::Checked(keys) => keys,
            Keys::Rejected(dimension) => {
                return ResponseFuture::ready(Ok(unidentified(config.grpc, &dimension.unidentified)));
            }
        };
        let lease_keys = if config.leases.is_empty() {
            Vec::new()
        } else {
            match lease_keys(&config, &parts) {
                Ok(keys) => keys,
                Err(response) => return ResponseFuture::ready(Ok(response)),
            }
        };
        let applied = applied_rules(&config, &keys);
        let cost = config.cost.as_ref().map_or(1, |cost| cost(&parts));
        // All a limited answer needs of the request head: its format.
        let json = wants_json(&parts.headers);
        // What the limiter answers without its store — above all a denial
        // from the deny cache, attack traffic — is answered here and now,
        // without a task or a copy of the keys.
        let mut known = None;
        // Budgets charged after the response are only peeked now, and
        // leases are taken first: not answered here.
        let later = config.response_cost.is_some();
        if !keys.is_empty() && cost > 0 && !later && config.leases.is_empty() {
            let dimensions = dimensions_of(&config, &keys);
            if let Some(result) = config.limiter.check_all_now(&dimensions, cost) {
                match verdict(&config, &dimensions, result, (json, applied)) {
                    // A denial that may wait for room is decided in the task.
                    Verdict::Answer(response)
                        if !config.shapes()
                            || !response.extensions().get::<MultiDecision>().is_some_and(|multi| {
                                wait_for(&config, &keys, multi, std::time::Duration::ZERO).is_some()
                            }) =>
                    {
                        return ResponseFuture::ready(Ok(response));
                    }
                    Verdict::Answer(_) => {}
                    Verdict::Call(multi) => known = Some(multi),
                }
            }
        }
        let shadow_denial = |multi: &MultiDecision| multi.decisions.iter().any(Decision::is_shadow_denial);
        let keys: Vec<(usize, String)> = if known.as_ref().is_some_and(|multi| !shadow_denial(multi)) {
            // Decided already: the answer's headers need the rules, not the keys.
            keys.into_iter().map(|(i, _)| (i, String::new())).collect()
        } else {
            keys.into_iter().map(|(i, key)| (i, key.into_owned())).collect()
        };
        let goes_on = !lease_keys.is_empty() && goes_on(&parts);
        let mut request = Request::from_parts(parts, body);
        // The ready service goes into the future; a clone stays for the next
        // `poll_ready` (tower's usual pattern for moving a service into a future).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);

        ResponseFuture::new(async move {
            // Leases first: a request over a concurrency limit is charged nothing.
            let leases = match acquire_all(&config, &lease_keys, json).await {
                Ok(leases) => hold(leases, &config, &lease_keys),
                Err(response) => return Ok(response),
            };
            if let Some(held) = leases.as_ref().filter(|_| goes_on) {
                request.extensions_mut().insert(InFlight { _held: Arc::clone(held) });
            }
            // No rule applies, or a free request (cost 0).
            if keys.is_empty() || cost == 0 {
                return Ok(hold_until_done(inner.call(request).await?, leases));
            }
            let dimensions = dimensions_of(&config, &keys);
            let multi = match known {
                Some(multi) => multi,
                None => {
                    let first = tokio::time::Instant::now();
                    // Held while the request waits for room (shaping): its
                    // place, and its identity's turn to ask the store.
                    let mut held = None;
                    loop {
                        // Waits are counted from before each call: the
                        // store decided no earlier, so they follow its clock.
                        let called = tokio::time::Instant::now();
                        let result = if later {
                            // A budget charged after the response admits while
                            // anything is left: weight 0 now.
                            let weighted: Vec<_> = dimensions
                                .iter()
                                .map(|&(rule, key)| (rule, key, if rule.is_budget() { 0 } else { cost }))
                                .collect();
                            config.limiter.check_all_weighted(&weighted).await
                        } else {
                            config.limiter.check_all_n(&dimensions, cost).await
                        };
                        let response = match verdict(&config, &dimensions, result, (json, applied)) {
                            Verdict::Call(multi) => break multi,
                            Verdict::Answer(response) => response,
                        };
                        let multi = response.extensions().get::<MultiDecision>();
                        let waited = called.duration_since(first);
                        let wait = multi.and_then(|multi| wait_for(&config, &keys, multi, waited));
                        let Some(Wait { wait, identity, cap }) = wait else { return Ok(response) };
                        if held.is_none() {
                            let Some(place) = config.waiting.enter(identity, cap) else {
                                return Ok(response);
                            };
                            if let Some(turn) = place.free_turn() {
                                held = Some((turn, place));
                            } else {
                                held = Some((place.turn().await, place));
                                // In line until now: ask again at once.
                                continue;
                            }
                        }
                        tokio::time::sleep_until(called + wait).await;
                    }
                }
            };
            let mut response = inner.call(request).await?;
            let quota = Quota { config: &config, dimensions: &dimensions, multi: &multi };
            quota.add_headers(response.headers_mut(), Headers::Inner);
            if shadow_denial(&multi) {
                response.extensions_mut().insert(limited_keys(&dimensions));
            }
            decided(&mut response, multi, applied);
            let mut response = hold_until_done(response, leases);
            if let Some(source) = &config.response_cost {
                let budgets: Vec<(Rule, String)> = dimensions
                    .iter()
                    .filter(|(rule, _)| rule.is_budget())
                    .map(|&(rule, key)| (rule.clone(), key.to_owned()))
                    .collect();
                if !budgets.is_empty() {
                    response = charge_when_done(
                        response,
                        &config.limiter,
                        budgets,
                        source,
                        config.observer.as_ref(),
                    );
                }
            }
            Ok(response)
        })
    }
}

/// Which of the layer's rules applied to a request: bit `i` for the
/// `i`-th rule added. In the extensions of a decided request's response
/// (beside its [`MultiDecision`]) when some rule's key was missing and
/// skipped ([`MissingKey::Skip`]); without it, every rule applied, and the
/// decisions are in the order the rules were added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppliedRules(pub u64);

/// The [`AppliedRules`] of a request, when not every rule applied.
fn applied_rules<S>(config: &Config<S>, keys: &[(usize, Cow<'_, str>)]) -> Option<AppliedRules> {
    let bit = |i: usize| u32::try_from(i).ok().and_then(|i| 1u64.checked_shl(i)).unwrap_or(0);
    (keys.len() < config.dimensions.len())
        .then(|| AppliedRules(keys.iter().fold(0, |mask, (i, _)| mask | bit(*i))))
}

/// Puts a decided request's decisions in its response.
fn decided<B>(response: &mut Response<B>, multi: MultiDecision, applied: Option<AppliedRules>) {
    if let Some(applied) = applied {
        response.extensions_mut().insert(applied);
    }
    response.extensions_mut().insert(multi);
}

/// Who a limited request was: the rule and key of each limit that applied
/// to it, in the order of its [`MultiDecision`]'s decisions. In the
/// extensions of every response the layer answers "limited", and of every
/// admitted response a shadow rule would have denied (for access logs and
/// status pages; other admitted requests do not pay for it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitedKeys(pub Vec<(String, String)>);

/// The [`LimitedKeys`] of a request decided on `dimensions`.
fn limited_keys(dimensions: &[(&Rule, &str)]) -> LimitedKeys {
    LimitedKeys(
        dimensions.iter().map(|(rule, key)| (rule.state_name().into_owned(), (*key).to_owned())).collect(),
    )
}

/// The dimensions of a request's `keys`.
fn dimensions_of<'a, S, K: AsRef<str>>(
    config: &'a Config<S>,
    keys: &'a [(usize, K)],
) -> Vec<(&'a Rule, &'a str)> {
    keys.iter().map(|(i, key)| (&config.dimensions[*i].rule, key.as_ref())).collect()
}

/// What the layer does after the limiter's decision.
enum Verdict<B> {
    /// Calls the service: the request is admitted.
    Call(MultiDecision),
    /// Answers itself: limited, never admissible, or the check failed.
    Answer(Response<B>),
}

/// Gates the warning of requests whose cost no rule admits.
static NEVER_ADMITTED: LogThrottle = LogThrottle::new();

/// Gates the warning of checks failed for the store's sake.
static STORE_FAILED: LogThrottle = LogThrottle::new();

fn verdict<S, B: LimitedBody>(
    config: &Config<S>,
    dimensions: &[(&Rule, &str)],
    result: Result<MultiDecision, slidegate::Error>,
    (json, applied): (bool, Option<AppliedRules>),
) -> Verdict<B> {
    let multi = match result {
        Ok(multi) => multi,
        Err(error) if error.is_store_failure() => {
            // The failure policy is `fail`: the caller's own policy decides.
            if let Some(held_back) = STORE_FAILED.pass(process_ms(), LogThrottle::EVERY_MS) {
                tracing::warn!(
                    target: "slidegate",
                    %error,
                    held_back,
                    "rate limit store failed; answering 503{THROTTLED_NOTE}"
                );
            }
            return Verdict::Answer(unavailable(config.grpc));
        }
        Err(error) => {
            // The layer's setup is checked when rules are added, so
            // this is a bug or a key no store accepts: loud, not a 429.
            tracing::error!(target: "slidegate", %error, "rate limit check failed");
            return Verdict::Answer(internal_error(config.grpc));
        }
    };
    if multi.allowed {
        return Verdict::Call(multi);
    }
    if never_admitted(&multi) {
        // A cost some rule can never admit: waiting would not help. The
        // cost may come from the request: a client sending such requests
        // gets one line per interval, not one per request.
        if let Some(held_back) = NEVER_ADMITTED.pass(process_ms(), LogThrottle::EVERY_MS) {
            tracing::warn!(target: "slidegate", held_back, "request cost above a limit{THROTTLED_NOTE}");
        }
        let limit = dimensions.iter().map(|(rule, _)| rule.limit()).min().unwrap_or(0);
        let mut response = cost_above_limit(limit, config.message.text(), json, config.grpc);
        Quota { config, dimensions, multi: &multi }.add_headers(response.headers_mut(), Headers::Own);
        decided(&mut response, multi, applied);
        return Verdict::Answer(response);
    }
    let mut response = denied(&Quota { config, dimensions, multi: &multi }, json);
    response.extensions_mut().insert(limited_keys(dimensions));
    decided(&mut response, multi, applied);
    Verdict::Answer(response)
}

/// A decided request: the rules that applied and their decisions.
struct Quota<'a, S> {
    config: &'a Config<S>,
    dimensions: &'a [(&'a Rule, &'a str)],
    multi: &'a MultiDecision,
}

impl<S> Quota<'_, S> {
    fn add_headers(&self, headers: &mut http::HeaderMap, kind: Headers) {
        let rules = self.dimensions.iter().map(|(rule, _)| *rule);
        let policy = self.config.policy_of(self.dimensions.len());
        add_quota_headers(headers, &rules, policy, self.multi, self.config.families, kind);
    }
}

fn denied<S, B: LimitedBody>(quota: &Quota<'_, S>, json: bool) -> Response<B> {
    let config = quota.config;
    // A denied check has a denying decision: the one with the longest wait.
    let fallback = Decision::limited(0, 0, Default::default(), Default::default());
    let denial = quota.multi.binding().unwrap_or(&fallback);
    let message = match denial.state {
        State::Banned if !config.custom_message => banned_message(config.ban_status),
        _ => &config.message,
    };
    #[cfg(feature = "tonic")]
    if config.grpc {
        let mut response = crate::response::limited_grpc(denial, message.text(), config.ban_status);
        quota.add_headers(response.headers_mut(), Headers::Own);
        return response;
    }
    let mut response = limited(denial, message, config.ban_status, json);
    quota.add_headers(response.headers_mut(), Headers::Own);
    if denial.state == State::Banned {
        tracing::debug!(target: "slidegate", retry_after = ?denial.retry_after, "banned request");
    }
    response
}
