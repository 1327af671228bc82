//! What a [`RateLimitLayer`](crate::RateLimitLayer) is configured with,
//! shared by the layer (which builds it) and the service (which reads it).

use std::borrow::Cow;
use std::sync::Arc;

use http::StatusCode;
use http::request::Parts;
use slidegate::{Limiter, Rule};

use crate::headers::Families;
use crate::key::KeyExtractor;

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

/// One rule of a layer: the rule, whose key it limits, and what to do when
/// the key is missing.
#[derive(Clone)]
pub(crate) struct Dimension {
    pub(crate) rule: Rule,
    pub(crate) key: Arc<dyn KeyExtractor>,
    pub(crate) missing: MissingKey,
}

/// The per-request cost function.
pub(crate) type CostFn = Arc<dyn Fn(&Parts) -> u32 + Send + Sync>;

pub(crate) struct Config<S> {
    pub(crate) limiter: Limiter<S>,
    pub(crate) dimensions: Vec<Dimension>,
    pub(crate) families: Families,
    pub(crate) message: Cow<'static, str>,
    pub(crate) ban_status: StatusCode,
    pub(crate) grpc: bool,
    pub(crate) cost: Option<CostFn>,
}

impl<S> Clone for Config<S> {
    fn clone(&self) -> Self {
        Config {
            limiter: self.limiter.clone(),
            dimensions: self.dimensions.clone(),
            families: self.families,
            message: self.message.clone(),
            ban_status: self.ban_status,
            grpc: self.grpc,
            cost: self.cost.clone(),
        }
    }
}
