//! [`RateLimitLayer`]: what to limit, by which keys, and how to answer.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use http::request::Parts;
use slidegate::limits::MAX_DIMENSIONS;
use slidegate::{Error, ErrorKind, Limiter, Rule, Store};
use tower_layer::Layer;

use crate::config::{Config, KeyedRule, MissingKey};
use crate::headers::Families;
use crate::key::KeyExtractor;
use crate::response::Message;
use crate::service::RateLimit;
use crate::waiting::{DEFAULT_MAX_WAITING, Waiting};

/// A tower [`Layer`] that rate limits every request with a
/// [`Limiter`]: each request is checked against all the layer's rules at
/// once (admitted only if all admit, and then all are charged).
///
/// * Limited → `429 Too Many Requests` with `Retry-After` (seconds, rounded
///   up), the quota headers and a body — plain text, or JSON when the
///   client `Accept`s it — without calling the inner service. A ban answers
///   429 too, or [`ban_status`](Self::ban_status).
/// * Allowed → the inner service's response, with the quota headers.
/// * Headers: the IETF `RateLimit-Policy` / `RateLimit` fields and the legacy
///   `X-RateLimit-Limit/Remaining/Reset`, each switchable;
///   `X-RateLimit-Warning` when a penalty warns; `X-RateLimit-Degraded` only
///   when [enabled](Self::degraded_header).
/// * The [`MultiDecision`](slidegate::MultiDecision) (one decision per
///   rule that applied) is in the response's extensions, for access logs
///   and metrics: who answered ([`Decision::source`](slidegate::Decision::source)),
///   what is left; a limited response carries [`LimitedKeys`](crate::LimitedKeys)
///   too (the keys it was counted under).
/// * Never an error of its own: "limited" is a response, and the inner
///   service's readiness and errors pass through untouched. A failing store
///   is the limiter's [`FailurePolicy`](slidegate::FailurePolicy)'s business.
/// * Several rules belong in one layer: they are checked together, and a
///   request denied by one charges none. Layers can be stacked (a global
///   one around per-route ones): each charges on its own (an outer layer
///   admits before an inner one denies), and the response carries every
///   layer's IETF fields and the most binding legacy values.
///
/// ```
/// use std::num::NonZeroU32;
/// use axum::{Router, routing::get};
/// use slidegate::{Limiter, Rule};
/// use slidegate_tower::{ClientIp, Global, RateLimitLayer};
///
/// let per_ip = Rule::per_second(NonZeroU32::new(10).unwrap()).named("per-ip").unwrap();
/// let global = Rule::per_second(NonZeroU32::new(1000).unwrap()).named("global").unwrap();
/// let app: Router = Router::new()
///     .route("/", get(|| async { "hello" }))
///     .layer(
///         RateLimitLayer::new(Limiter::in_memory())
///             .rule(per_ip, ClientIp::trusting(["10.0.0.0/8"]).unwrap())
///             .rule(global, Global)
///             .message("slow down"),
///     );
/// ```
pub struct RateLimitLayer<S> {
    config: Arc<Config<S>>,
}

impl<S> Clone for RateLimitLayer<S> {
    fn clone(&self) -> Self {
        RateLimitLayer { config: Arc::clone(&self.config) }
    }
}

impl<S> fmt::Debug for RateLimitLayer<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rules: Vec<String> = self.config.dimensions.iter().map(|d| d.rule.to_string()).collect();
        f.debug_struct("RateLimitLayer")
            .field("rules", &rules)
            .field("headers", &self.config.families)
            .field("ban_status", &self.config.ban_status)
            .field("grpc", &self.config.grpc)
            .finish_non_exhaustive()
    }
}

impl<S: Store> RateLimitLayer<S> {
    /// A layer deciding with `limiter`, with no rules yet (add them with
    /// [`rule`](Self::rule); a layer without rules limits nothing).
    pub fn new(limiter: Limiter<S>) -> Self {
        RateLimitLayer {
            config: Arc::new(Config {
                limiter,
                dimensions: Vec::new(),
                families: Families { ietf: true, legacy: true, degraded: false },
                policy: None,
                message: Message::new(Cow::Borrowed("Too Many Requests")),
                custom_message: false,
                ban_status: StatusCode::TOO_MANY_REQUESTS,
                grpc: false,
                cost: None,
                response_cost: None,
                leases: Vec::new(),
                observer: None,
                delay: None,
                waiting: Arc::new(Waiting::new(DEFAULT_MAX_WAITING)),
            }),
        }
    }

    fn edit(mut self, change: impl FnOnce(&mut Config<S>)) -> Self {
        change(Arc::make_mut(&mut self.config));
        self
    }

    /// Limits each request's key under `rule`; a request whose key is
    /// missing counts against a shared `"unidentified"` key (see
    /// [`rule_or`](Self::rule_or)).
    ///
    /// # Panics
    ///
    /// On a setup mistake [`try_rule_or`](Self::try_rule_or) reports as an
    /// error — like axum's router on overlapping routes, at start-up rather
    /// than as a 429 on every request.
    pub fn rule(self, rule: Rule, key: impl KeyExtractor) -> Self {
        self.rule_or(rule, key, MissingKey::default())
    }

    /// Like [`rule`](Self::rule), with an explicit outcome for requests
    /// whose key is missing.
    ///
    /// # Panics
    ///
    /// As [`rule`](Self::rule).
    pub fn rule_or(self, rule: Rule, key: impl KeyExtractor, missing: MissingKey) -> Self {
        self.try_rule_or(rule, key, missing).unwrap_or_else(|error| panic!("RateLimitLayer: {error}"))
    }

    /// [`rule_or`](Self::rule_or) for rules read at run time (e.g. from a
    /// configuration file).
    ///
    /// # Errors
    ///
    /// [`InvalidConfig`](slidegate::ErrorKind::InvalidConfig) when the
    /// layer already has [`MAX_DIMENSIONS`] rules (the most one check
    /// takes), when `rule` shares its state with a rule of the layer (the
    /// same name, or the same parameters unnamed: give them names), or for
    /// an empty [`MissingKey::Shared`] key.
    pub fn try_rule_or(self, rule: Rule, key: impl KeyExtractor, missing: MissingKey) -> Result<Self, Error> {
        let refuse = |why: String| Err(Error::new(ErrorKind::InvalidConfig, why));
        let dimensions = &self.config.dimensions;
        if dimensions.len() >= MAX_DIMENSIONS {
            return refuse(format!("a layer takes at most {MAX_DIMENSIONS} rules; {rule} is one too many"));
        }
        if let Some(other) = dimensions
            .iter()
            .find(|d| (d.rule.state_name(), d.rule.state_part()) == (rule.state_name(), rule.state_part()))
        {
            return refuse(format!(
                "rules {} and {rule} would count in the same state; give them different names",
                other.rule
            ));
        }
        if matches!(&missing, MissingKey::Shared(shared) if shared.is_empty()) {
            return refuse(format!("the shared key for requests {rule} cannot identify must not be empty"));
        }
        Ok(self.edit(|c| c.push(KeyedRule::new(rule, Arc::new(key), missing))))
    }

    /// The body of a limited response (default `Too Many Requests`; a
    /// banned request's default says it is banned, under its
    /// [`ban_status`](Self::ban_status): `Forbidden: banned for repeated
    /// violations`).
    pub fn message(self, message: impl Into<Cow<'static, str>>) -> Self {
        let message = Message::new(message.into());
        self.edit(|c| {
            c.message = message;
            c.custom_message = true;
        })
    }

    /// Whether responses carry `RateLimit-Policy` and `RateLimit` (default on).
    pub fn ietf_headers(self, on: bool) -> Self {
        self.edit(|c| c.families.ietf = on)
    }

    /// Whether responses carry `X-RateLimit-Limit/Remaining/Reset` (default on).
    pub fn legacy_headers(self, on: bool) -> Self {
        self.edit(|c| c.families.legacy = on)
    }

    /// Whether responses decided by the failure policy say so in
    /// `X-RateLimit-Degraded: 1` (default off: clients need not know).
    pub fn degraded_header(self, on: bool) -> Self {
        self.edit(|c| c.families.degraded = on)
    }

    /// The status of a request denied by a ban (default 429; 403 is common).
    pub fn ban_status(self, status: StatusCode) -> Self {
        self.edit(|c| c.ban_status = status)
    }

    /// The weight of each request (default 1), e.g. by route or body size.
    /// A cost of 0 makes a request free: it passes unchecked and uncharged.
    /// A cost above a rule's limit can never be admitted: such requests are
    /// answered 429 without `Retry-After` (waiting would not help).
    pub fn cost(self, cost: impl Fn(&Parts) -> u32 + Send + Sync + 'static) -> Self {
        self.edit(|c| c.cost = Some(Arc::new(cost)))
    }

    /// Charges the layer's [budget](slidegate::Rule::budget) rules what
    /// each response says the request cost (an LLM response's tokens),
    /// read from `source` — a header or extension when the response comes,
    /// a trailer when its body ends — and charged when the body ends
    /// (streamed responses too; a body dropped mid-stream is charged what
    /// its header said). Before the request, a budget admits while
    /// anything at all is left of it and records nothing; the other rules
    /// take the request's [`cost`](Self::cost) as before, all in one
    /// decision. A response whose cost is missing or no whole number is
    /// charged nothing and logged (a warning per interval).
    ///
    /// ```
    /// use std::num::NonZeroU32;
    /// use axum::{Router, http::HeaderMap, routing::get};
    /// use slidegate::{Limiter, Rule};
    /// use slidegate_tower::{Header, RateLimitLayer, ResponseCost};
    ///
    /// let tokens = Rule::per_minute(NonZeroU32::new(10_000).unwrap()).named("tokens").unwrap().budget();
    /// let app: Router = Router::new()
    ///     .route("/chat", get(|| async { ([("x-usage-tokens", "700")], "hello") }))
    ///     .layer(
    ///         RateLimitLayer::new(Limiter::in_memory())
    ///             .rule(tokens, Header::new(http::HeaderName::from_static("x-tenant")))
    ///             .response_cost(ResponseCost::header("x-usage-tokens")),
    ///     );
    /// ```
    pub fn response_cost(self, source: crate::ResponseCost) -> Self {
        self.edit(|c| c.response_cost = Some(source))
    }

    /// At most `limit` requests of a key running at once (open streams,
    /// exports): a lease is taken before the inner service is called and
    /// held until the response body ends or is dropped — a streamed
    /// response counts while it streams (its lease renewed every third of
    /// the ttl). Over the limit: 429 with `Retry-After`, before the other
    /// rules are asked. A request without the key shares one count
    /// (`"unidentified"`; see [`concurrency_or`](Self::concurrency_or)).
    ///
    /// ```
    /// use std::time::Duration;
    /// use axum::{Router, routing::get};
    /// use http::HeaderName;
    /// use slidegate::{ConcurrencyLimit, Limiter};
    /// use slidegate_tower::{Header, RateLimitLayer};
    ///
    /// let streams = ConcurrencyLimit::new("streams", 10, Duration::from_secs(60)).unwrap();
    /// let app: Router = Router::new()
    ///     .route("/events", get(|| async { "…" }))
    ///     .layer(
    ///         RateLimitLayer::new(Limiter::in_memory())
    ///             .concurrency(streams, Header::new(HeaderName::from_static("x-tenant"))),
    ///     );
    /// ```
    pub fn concurrency(self, limit: slidegate::ConcurrencyLimit, key: impl KeyExtractor) -> Self {
        self.concurrency_or(limit, key, MissingKey::default())
    }

    /// [`concurrency`](Self::concurrency), saying what a request without
    /// the key does (see [`MissingKey`]).
    pub fn concurrency_or(
        self,
        limit: slidegate::ConcurrencyLimit,
        key: impl KeyExtractor,
        missing: MissingKey,
    ) -> Self {
        let keyed = crate::config::KeyedLease { limit, key: Arc::new(key), missing };
        self.edit(|c| c.leases.push(keyed))
    }

    /// Shapes instead of refusing, as nginx's `limit_req … delay`: a
    /// request a rule would deny, whose exact `retry_after` is within
    /// `max`, waits that long and is decided again — charged only when
    /// admitted, so it is let through no earlier than the window allows.
    /// Beyond `max`, or when more of an identity's requests are waiting
    /// than the rule admits within `max`, or the layer holds its most
    /// ([`max_waiting`](Self::max_waiting)), 429 at once. A request whose
    /// client goes away while it waits is charged nothing. Every rule of
    /// the layer, but those with a penalty (each denial of theirs counts);
    /// [`delay_rule`](Self::delay_rule) shapes one.
    ///
    /// ```
    /// use std::num::NonZeroU32;
    /// use std::time::Duration;
    /// use axum::{Router, routing::get};
    /// use slidegate::{Limiter, Rule};
    /// use slidegate_tower::{PeerIp, RateLimitLayer};
    ///
    /// let rule = Rule::per_second(NonZeroU32::new(5).unwrap());
    /// // 5 a second; a burst waits up to 3 s for its turn.
    /// let app: Router = Router::new()
    ///     .route("/", get(|| async { "hello" }))
    ///     .layer(RateLimitLayer::new(Limiter::in_memory()).rule(rule, PeerIp).delay(Duration::from_secs(3)));
    /// ```
    pub fn delay(self, max: Duration) -> Self {
        self.edit(|c| c.delay = Some(max))
    }

    /// [`delay`](Self::delay) for the layer's rules equal to `rule` (added
    /// before), with `burst`: how many of an identity's requests may wait
    /// at once (`None`: as many as the rule admits within `max`).
    pub fn delay_rule(self, rule: &Rule, max: Duration, burst: Option<u32>) -> Self {
        self.edit(|c| {
            for keyed in c.dimensions.iter_mut().filter(|d| d.rule == *rule) {
                (keyed.delay, keyed.burst) = (Some(max), burst);
            }
        })
    }

    /// The most requests the layer holds waiting at once (default 10,000;
    /// see [`delay`](Self::delay)); more are answered 429 at once.
    pub fn max_waiting(self, max: usize) -> Self {
        self.edit(|c| c.waiting = Arc::new(Waiting::new(max)))
    }

    /// Tells `observer` what the layer holds and charges beyond its
    /// answers: budgets charged when responses end, concurrency leases
    /// taken and given back (see [`Observer`](crate::Observer)).
    pub fn observer(self, observer: impl crate::Observer) -> Self {
        let observer: Arc<dyn crate::Observer> = Arc::new(observer);
        self.edit(|c| c.observer = Some(observer))
    }

    /// Answer limited requests the gRPC way (feature `tonic`): HTTP 200 with
    /// `grpc-status: RESOURCE_EXHAUSTED` (`PERMISSION_DENIED` for a ban with
    /// a 403 [`ban_status`](Self::ban_status)) and a `google.rpc.RetryInfo`
    /// detail carrying `retry_after`.
    #[cfg(feature = "tonic")]
    pub fn grpc(self) -> Self {
        self.edit(|c| c.grpc = true)
    }

    /// The limiter this layer decides with (e.g. to switch limiting off).
    pub fn limiter(&self) -> &Limiter<S> {
        &self.config.limiter
    }
}

impl<T, S> Layer<T> for RateLimitLayer<S> {
    type Service = RateLimit<T, S>;

    fn layer(&self, inner: T) -> Self::Service {
        RateLimit::new(inner, Arc::clone(&self.config))
    }
}
