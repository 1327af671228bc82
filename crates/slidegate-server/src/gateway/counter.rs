//! The counter a gateway limit charges: the service's identity of the
//! request's key, as RLS and the HTTP API spell it for the descriptor
//! `[("route", <route>), (<key>, <value>)]` (or `[(<key>, <value>)]` for
//! a gateway-wide limit) in the domain `gateway`. A rules file declaring
//! that descriptor with the same limit counts in the same counters.

use std::borrow::Cow;
use std::sync::Arc;

use http::request::Parts;
use slidegate_tower::KeyExtractor;

use crate::config::RouteLimit;
use crate::decide::item::Identity;

/// The domain the gateway's limits count in.
pub(crate) const DOMAIN: &str = "gateway";

/// A key extractor whose key is the service identity of `inner`'s.
pub(super) struct ServiceKey<K> {
    inner: K,
    /// The domain and the entries before the key's value.
    prefix: Arc<str>,
    /// The limit's own part (position, name, window).
    suffix: Arc<str>,
}

impl<K> ServiceKey<K> {
    /// `inner`'s keys for `limit` on `route` (not an entry of a
    /// gateway-wide limit's identity: it counts across the routes).
    pub(super) fn new(inner: K, limit: &RouteLimit, route: &str) -> ServiceKey<K> {
        let (prefix, suffix) = parts(limit, route);
        ServiceKey { inner, prefix: Arc::from(prefix), suffix: Arc::from(suffix) }
    }
}

/// The identity `limit` on `route` counts the key `value` under.
pub(super) fn identity(limit: &RouteLimit, route: &str, value: &str) -> String {
    let (prefix, suffix) = parts(limit, route);
    Identity::keyed(&prefix, value, &suffix)
}

/// An identity's parts around the key's value: the domain and the entries
/// before it; the limit's own part (position, name, window).
fn parts(limit: &RouteLimit, route: &str) -> (String, String) {
    let mut prefix = Identity::with_capacity(64);
    prefix.part(DOMAIN);
    if !limit.gateway_wide {
        prefix.part("route");
        prefix.part(route);
    }
    prefix.part(&limit.key.name());
    let mut suffix = String::new();
    limit.limit.write_identity_part(&mut suffix);
    (prefix.into_string(), suffix)
}

impl<K: KeyExtractor> KeyExtractor for ServiceKey<K> {
    fn extract<'a>(&self, parts: &'a Parts) -> Option<Cow<'a, str>> {
        let value = self.inner.extract(parts)?;
        Some(Cow::Owned(Identity::keyed(&self.prefix, &value, &self.suffix)))
    }

    fn missing(&self) -> Option<Cow<'static, str>> {
        self.inner.missing()
    }
}

/// The key of a gateway-wide limit counted per route.
pub(super) struct RouteName(pub(super) Arc<str>);

impl KeyExtractor for RouteName {
    fn extract<'a>(&self, _: &'a Parts) -> Option<Cow<'a, str>> {
        Some(Cow::Owned(self.0.to_string()))
    }
}
