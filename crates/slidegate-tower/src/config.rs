//! What a [`RateLimitLayer`](crate::RateLimitLayer) is configured with,
//! shared by the layer (which builds it) and the service (which reads it).

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use http::request::Parts;
use http::{HeaderValue, StatusCode};
use slidegate::{Limiter, Rule};

use crate::headers::{Families, policy_value};
use crate::key::KeyExtractor;
use crate::response::Message;
use crate::waiting::Waiting;

/// What a rule does with a request whose key cannot be extracted (no peer
/// address, a missing header or extension).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MissingKey {
    /// Count the request against one shared key for all unidentified
    /// requests (the default, `"unidentified"`): still limited, never free.
    Shared(Cow<'static, str>),
    /// Do not apply this rule to the request (e.g. a per-user rule on
    /// anonymous traffic that another rule already limits).
    Skip,
    /// Answer `400 Bad Request` without calling the service.
    Reject,
}

impl Default for MissingKey {
    fn default() -> Self {
        MissingKey::Shared(Cow::Borrowed("unidentified"))
    }
}

/// One rule of a layer, keyed: the rule, the extractor of the key it
/// limits, and what to do when the key is missing. (A request's keyed
/// rules become the core's [`Dimension`](slidegate::Dimension)s.)
#[derive(Clone)]
pub(crate) struct KeyedRule {
    pub(crate) rule: Rule,
    pub(crate) key: Arc<dyn KeyExtractor>,
    pub(crate) missing: MissingKey,
    /// The 400 answer's text under [`MissingKey::Reject`], naming what the
    /// request lacks when the extractor says ([`KeyExtractor::missing`]).
    pub(crate) unidentified: Arc<str>,
    /// How long a request it denies may wait for room (see
    /// [`RateLimitLayer::delay`](crate::RateLimitLayer::delay)); the
    /// layer's delay when `None`.
    pub(crate) delay: Option<Duration>,
    /// How many of an identity's requests may wait at once; what the
    /// rule admits within the delay when `None`.
    pub(crate) burst: Option<u32>,
}

impl KeyedRule {
    pub(crate) fn new(rule: Rule, key: Arc<dyn KeyExtractor>, missing: MissingKey) -> KeyedRule {
        let unidentified = match key.missing() {
            Some(what) => format!("cannot identify the client: the request has no {what}"),
            None => "cannot identify the client".to_owned(),
        };
        KeyedRule { rule, key, missing, unidentified: Arc::from(unidentified), delay: None, burst: None }
    }
}

/// One concurrency limit of a layer, keyed.
#[derive(Clone)]
pub(crate) struct KeyedLease {
    pub(crate) limit: slidegate::ConcurrencyLimit,
    pub(crate) key: Arc<dyn KeyExtractor>,
    pub(crate) missing: MissingKey,
}

/// The per-request cost function.
pub(crate) type CostFn = Arc<dyn Fn(&Parts) -> u32 + Send + Sync>;

pub(crate) struct Config<S> {
    pub(crate) limiter: Limiter<S>,
    pub(crate) dimensions: Vec<KeyedRule>,
    pub(crate) families: Families,
    /// The `RateLimit-Policy` value of all `dimensions` at their
    /// configured limits (see [`Config::policy_of`]).
    pub(crate) policy: Option<HeaderValue>,
    pub(crate) message: Message,
    /// Whether `message` is the caller's (else a ban says it is one).
    pub(crate) custom_message: bool,
    pub(crate) ban_status: StatusCode,
    pub(crate) grpc: bool,
    pub(crate) cost: Option<CostFn>,
    /// Where budgets' costs are read from responses, if they are.
    pub(crate) response_cost: Option<crate::ResponseCost>,
    /// Concurrency limits: a lease each, held until the response ends.
    pub(crate) leases: Vec<KeyedLease>,
    /// Told of budgets charged and leases taken and given back.
    pub(crate) observer: Option<Arc<dyn crate::Observer>>,
    /// How long a request any rule denies may wait for room.
    pub(crate) delay: Option<Duration>,
    /// The requests waiting for room.
    pub(crate) waiting: Arc<Waiting>,
}

impl<S> Config<S> {
    /// Adds a rule, and rebuilds the policy value that includes it.
    pub(crate) fn push(&mut self, dimension: KeyedRule) {
        self.dimensions.push(dimension);
        let rules: Vec<&Rule> = self.dimensions.iter().map(|d| &d.rule).collect();
        self.policy = policy_value(&rules);
    }

    /// Whether a denied request may wait for room (some rule has a delay).
    pub(crate) fn shapes(&self) -> bool {
        self.delay.is_some() || self.dimensions.iter().any(|d| d.delay.is_some())
    }

    /// The prebuilt `RateLimit-Policy` value of a request `applied` rules
    /// apply to: the value of all of them, when all apply.
    pub(crate) fn policy_of(&self, applied: usize) -> Option<&HeaderValue> {
        self.policy.as_ref().filter(|_| applied == self.dimensions.len())
    }
}

impl<S> Clone for Config<S> {
    fn clone(&self) -> Self {
        Config {
            limiter: self.limiter.clone(),
            dimensions: self.dimensions.clone(),
            families: self.families,
            policy: self.policy.clone(),
            message: self.message.clone(),
            custom_message: self.custom_message,
            ban_status: self.ban_status,
            grpc: self.grpc,
            cost: self.cost.clone(),
            response_cost: self.response_cost.clone(),
            leases: self.leases.clone(),
            observer: self.observer.clone(),
            delay: self.delay,
            waiting: Arc::clone(&self.waiting),
        }
    }
}
