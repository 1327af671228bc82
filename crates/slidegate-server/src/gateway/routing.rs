//! The routes in force, compiled: each a rate-limit layer (slidegate-tower's)
//! around a [`Proxy`]; and the service every gateway connection runs.

use std::borrow::Cow;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use http::uri::PathAndQuery;
use http::{Method, Request, Response, StatusCode, Uri};
use hyper::body::Incoming;
use slidegate::{Error, Limiter, MultiDecision};
use slidegate_tower::headers::Families;
use slidegate_tower::{ClientIp, Global, Header, Path, PeerIp, RateLimit, RateLimitLayer, ResponseCost};
use tower::ServiceExt as _;
use tower_layer::Layer as _;

use super::body::{GatewayBody, plain};
use super::conn::TunnelHome;
use super::counter::{RouteName, ServiceKey};
use super::forward::{OverTls, is_upgrade};
use super::head::{self, request_host};
use super::health::UpstreamHealth;
use super::path::{Refused, normalize};
use super::proxy::{Deciding, Proxy, Target};
use super::upstream_io::Clients;
use super::usage::{RouteUsage, keep_usage};
use crate::ServiceStore;
use crate::config::{ConfigError, ConfigErrors, DEFAULT_MESSAGE, GatewayConfig, KeySpec, Route, match_order};
use crate::decide::stats::{Edge, Rates, ServiceStats, now_s};
use crate::runtime::telemetry::{self, Outcome, RouteMetrics};

/// One route, ready: its limits around its proxy, and its rates for the
/// status page.
pub(crate) struct CompiledRoute {
    service: RateLimit<Proxy, ServiceStore>,
    metrics: RouteMetrics,
    pub(crate) rates: Arc<Rates>,
    pub(crate) health: Arc<UpstreamHealth>,
}

/// The gateway configuration in force, compiled.
pub(crate) struct Table {
    pub(crate) config: GatewayConfig,
    pub(crate) routes: Vec<CompiledRoute>,
    /// Route indexes, most specific first.
    order: Vec<usize>,
    /// The client address behind trusted proxies, and which peers those are.
    pub(crate) trust: ClientIp,
    /// Per route, whether a limit answers requests without its key 400.
    rejects_unidentified: Vec<bool>,
    /// Per route, the headers its limits are keyed by.
    key_headers: Vec<Vec<http::HeaderName>>,
}

impl Table {
    /// Compiles `config`; routes that keep their name keep their rates
    /// from `previous`.
    pub(crate) fn build(
        config: GatewayConfig,
        limiter: &Limiter<ServiceStore>,
        families: Families,
        stats: &Arc<ServiceStats>,
        previous: Option<&Table>,
    ) -> Result<Table, ConfigErrors> {
        let mut config = config;
        if let Some(previous) = previous {
            keep_usage(&mut config, &previous.config);
        }
        let settings = &config.settings;
        for warning in &config.warnings {
            tracing::warn!(target: "slidegate", "{warning}");
        }
        let refuse = |message: String| ConfigErrors(vec![ConfigError::whole(&config.file, message)]);
        let trust = ClientIp::trusting(&settings.trusted_proxies)
            .map_err(refuse)?
            .header(settings.client_ip_header)
            .ipv6_prefix(settings.ipv6_prefix);
        let clients = Clients::new(settings);
        let mut routes = Vec::with_capacity(config.routes.len());
        for route in &config.routes {
            let mut layer = RateLimitLayer::new(limiter.clone())
                .ban_status(settings.ban_status)
                .ietf_headers(families.ietf)
                .legacy_headers(families.legacy)
                .degraded_header(families.degraded);
            if settings.message != DEFAULT_MESSAGE {
                layer = layer.message(settings.message.clone());
            }
            // Budgets charged what the upstream says each request cost,
            // when its response ends (one header per route, checked).
            if let Some(header) = route.limits.iter().find_map(|l| l.cost_header.clone()) {
                layer = layer.response_cost(ResponseCost::Header(header));
            }
            for limit in &route.limits {
                // Gateway limits always decide through the store.
                let Some(rule) = limit.rule().cloned() else { continue };
                let missing = limit.missing.clone();
                // Counted as the service counts the same limit (counter.rs).
                let scope = route.name.as_str();
                let shaped = limit.delay.map(|delay| (rule.clone(), delay, limit.burst));
                let added = match &limit.key {
                    KeySpec::Global => {
                        layer.try_rule_or(rule, ServiceKey::new(Global, limit, scope), missing)
                    }
                    KeySpec::ClientIp => {
                        layer.try_rule_or(rule, ServiceKey::new(trust.clone(), limit, scope), missing)
                    }
                    KeySpec::PeerIp => {
                        layer.try_rule_or(rule, ServiceKey::new(PeerIp, limit, scope), missing)
                    }
                    KeySpec::Path => layer.try_rule_or(rule, ServiceKey::new(Path, limit, scope), missing),
                    KeySpec::Route => {
                        let name = RouteName(Arc::from(route.name.as_str()));
                        layer.try_rule_or(rule, ServiceKey::new(name, limit, scope), missing)
                    }
                    KeySpec::Header(name) => layer.try_rule_or(
                        rule,
                        ServiceKey::new(Header::new(name.clone()), limit, scope),
                        missing,
                    ),
                };
                layer = added.map_err(|e: Error| refuse(format!("route `{}`: {e}", route.name)))?;
                if let Some((rule, delay, burst)) = shaped {
                    layer = layer.delay_rule(&rule, delay, burst);
                }
            }
            for in_flight in &route.in_flight {
                let (limit, missing) = (in_flight.limit.clone(), in_flight.missing.clone());
                layer = match &in_flight.key {
                    KeySpec::Global => layer.concurrency_or(limit, Global, missing),
                    KeySpec::ClientIp => layer.concurrency_or(limit, trust.clone(), missing),
                    KeySpec::PeerIp => layer.concurrency_or(limit, PeerIp, missing),
                    KeySpec::Path => layer.concurrency_or(limit, Path, missing),
                    KeySpec::Route => {
                        layer.concurrency_or(limit, RouteName(Arc::from(route.name.as_str())), missing)
                    }
                    KeySpec::Header(name) => layer.concurrency_or(limit, Header::new(name.clone()), missing),
                };
            }
            if let Some(usage) = RouteUsage::of(route) {
                layer = layer.observer(usage);
            }
            let before = previous.and_then(|p| p.route_named(&route.name));
            let rates = before.map_or_else(Arc::default, |r| Arc::clone(&r.rates));
            let health = before.map_or_else(Arc::default, |r| Arc::clone(&r.health));
            let target = Target::new(
                route,
                settings,
                &clients,
                trust.clone(),
                (Arc::clone(stats), Arc::clone(&health)),
            );
            let metrics = RouteMetrics::new(Arc::from(route.name.as_str()));
            routes.push(CompiledRoute { service: layer.layer(Proxy::new(target)), metrics, rates, health });
        }
        let order = match_order(&config.routes);
        let rejects_unidentified = config
            .routes
            .iter()
            .map(|r| {
                let reject = slidegate_tower::MissingKey::Reject;
                r.limits.iter().any(|l| l.missing == reject)
                    || r.in_flight.iter().any(|l| l.missing == reject)
            })
            .collect();
        let key_headers = config
            .routes
            .iter()
            .map(|r| {
                let mut names: Vec<http::HeaderName> = Vec::new();
                let keys = r.limits.iter().map(|l| &l.key).chain(r.in_flight.iter().map(|l| &l.key));
                for key in keys {
                    if let KeySpec::Header(name) = key
                        && !names.contains(name)
                    {
                        names.push(name.clone());
                    }
                }
                names
            })
            .collect();
        Ok(Table { config, routes, order, trust, rejects_unidentified, key_headers })
    }

    fn route_named(&self, name: &str) -> Option<&CompiledRoute> {
        let index = self.config.routes.iter().position(|r| r.name == name)?;
        self.routes.get(index)
    }

    /// The route that takes a request for `host` (lowercase, no port).
    fn find(&self, method: &Method, host: Option<&str>, path: &str) -> Option<usize> {
        self.order.iter().copied().find(|&i| {
            let route: &Route = &self.config.routes[i];
            route.host.as_ref().is_none_or(|h| host.is_some_and(|host| h.matches(host)))
                && path.starts_with(route.path_prefix.as_str())
                && (route.methods.is_empty() || route.methods.contains(method))
        })
    }
}

/// Puts the request's path in the gateway's form ([`normalize`]): what
/// its route is chosen by, its `key: path` limits count and its upstream
/// is sent.
fn put_path_in_form(request: &mut Request<Incoming>) -> Result<(), Refused> {
    let uri = request.uri();
    let Cow::Owned(path) = normalize(uri.path())? else { return Ok(()) };
    let path_and_query = match uri.query() {
        Some(query) => format!("{path}?{query}"),
        None => path,
    };
    let mut parts = uri.clone().into_parts();
    parts.path_and_query =
        Some(PathAndQuery::from_maybe_shared(bytes::Bytes::from(path_and_query)).map_err(|_| BAD_PATH)?);
    *request.uri_mut() = Uri::from_parts(parts).map_err(|_| BAD_PATH)?;
    Ok(())
}

/// A normalized path that is no URI path (cannot happen: normalizing
/// only decodes unreserved characters and drops slashes).
const BAD_PATH: Refused = Refused("the path cannot be forwarded\n");

/// The route label of requests no route took.
const NO_ROUTE: metrics::SharedString = metrics::SharedString::const_str("-");

/// The host part of a `Host` value or authority, lowercase. A plain
/// lowercase name (with a port or not) is borrowed as it is; anything
/// else is parsed as an authority.
fn host_only(host: &str) -> Cow<'_, str> {
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) && port.parse::<u16>().is_ok() => name,
        Some(_) => host,
        None => host,
    };
    let plain = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.';
    if !name.is_empty() && name.bytes().all(plain) {
        return Cow::Borrowed(name.trim_end_matches('.'));
    }
    let host = match host.parse::<http::uri::Authority>() {
        Ok(authority) => authority.host().to_owned(),
        Err(_) => host.to_owned(),
    };
    Cow::Owned(host.trim_end_matches('.').to_ascii_lowercase())
}

/// What every gateway connection runs: finds the route, and hands the
/// request to its limits and proxy.
#[derive(Clone)]
pub(crate) struct GatewayService {
    gateway: super::Gateway,
    peer: SocketAddr,
    tunnels: TunnelHome,
    /// The connection came over TLS.
    https: bool,
}

impl GatewayService {
    pub(crate) fn new(
        gateway: super::Gateway,
        peer: SocketAddr,
        tunnels: TunnelHome,
        https: bool,
    ) -> GatewayService {
        GatewayService { gateway, peer, tunnels, https }
    }
}

type GatewayFuture = Pin<Box<dyn Future<Output = Result<Response<GatewayBody>, Infallible>> + Send>>;

impl tower_service::Service<Request<Incoming>> for GatewayService {
    type Response = Response<GatewayBody>;
    type Error = Infallible;
    type Future = GatewayFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: Request<Incoming>) -> GatewayFuture {
        let started = Instant::now();
        // The peer, for the key extractors and the forwarding headers.
        request.extensions_mut().insert(self.peer);
        if self.https {
            request.extensions_mut().insert(OverTls);
        }
        // Where a WebSocket tunnel of this connection would run.
        if is_upgrade(request.headers()) {
            request.extensions_mut().insert(self.tunnels.clone());
        }
        let table = self.gateway.current();
        let gateway = self.gateway.clone();
        Box::pin(async move {
            if request.method() == Method::CONNECT {
                telemetry::gateway_request(NO_ROUTE, "refused", started);
                return Ok(plain(StatusCode::METHOD_NOT_ALLOWED, "CONNECT is not proxied\n"));
            }
            if let Err(Refused(why)) = head::check(&request).and_then(|()| put_path_in_form(&mut request)) {
                telemetry::gateway_request(NO_ROUTE, "refused", started);
                return Ok(plain(StatusCode::BAD_REQUEST, why));
            }
            let path = request.uri().path();
            let host = request_host(&request).map(host_only);
            let Some(index) = table.find(request.method(), host.as_deref(), path) else {
                telemetry::gateway_request(NO_ROUTE, "no_route", started);
                return Ok(plain(StatusCode::NOT_FOUND, "no route for this request\n"));
            };
            let route = &table.routes[index];
            // A key header given twice: the limit would count one value,
            // and the upstream might read the other.
            if table.key_headers[index]
                .iter()
                .any(|name| request.headers().get_all(name).iter().nth(1).is_some())
            {
                route.metrics.record(Outcome::Refused, started);
                return Ok(plain(StatusCode::BAD_REQUEST, "a header a limit is keyed by is repeated\n"));
            }
            let limited_route = !table.config.routes[index].limits.is_empty();
            let deciding = Instant::now();
            if limited_route {
                request.extensions_mut().insert(Deciding(deciding));
            }
            let Ok(response) = route.service.clone().oneshot(request).await;
            super::decided::count(gateway.stats(), &table.config.routes[index].limits, &response, deciding);
            let outcome = match response.extensions().get::<MultiDecision>() {
                Some(multi) if !multi.allowed => Outcome::Limited,
                Some(_) => Outcome::Admitted,
                // The store failed under `--on-store-failure unavailable`.
                None if response.status() == StatusCode::SERVICE_UNAVAILABLE && limited_route => {
                    Outcome::Unavailable
                }
                // No decision: no limit applied, or a key was missing
                // under `on_missing: reject` (the layer's 400).
                None if response.status() == StatusCode::BAD_REQUEST && table.rejects_unidentified[index] => {
                    Outcome::Refused
                }
                None => Outcome::Admitted,
            };
            if matches!(outcome, Outcome::Admitted | Outcome::Limited) {
                // One clock read for both.
                let now = now_s();
                route.rates.record(now, outcome == Outcome::Admitted);
                gateway.stats().routed(Edge::Gateway, now, outcome == Outcome::Admitted);
            }
            route.metrics.record(outcome, started);
            Ok(response)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_lose_their_port_and_case() {
        assert_eq!(host_only("Example.COM:8080"), "example.com");
        assert_eq!(host_only("example.com."), "example.com");
        assert_eq!(host_only("[::1]:80"), "[::1]");
        // The borrowed fast path answers what parsing would.
        let parsed = |host: &str| match host.parse::<http::uri::Authority>() {
            Ok(authority) => authority.host().trim_end_matches('.').to_ascii_lowercase(),
            Err(_) => host.trim_end_matches('.').to_ascii_lowercase(),
        };
        for host in [
            "example.com",
            "example.com:8080",
            "example.com.",
            "example.com.:80",
            "1.2.3.4:443",
            "a-b.c",
            "example.com:",
            "example.com:99999",
            "example.com:0",
            "a:b:1",
            "..",
            ".",
            "x:+1",
            "EXAMPLE.com",
            "ex ample.com",
            "user@example.com:80",
            "[::1]",
            "",
        ] {
            assert_eq!(host_only(host), parsed(host), "{host:?}");
        }
        assert!(matches!(host_only("api.example.com:8080"), Cow::Borrowed("api.example.com")));
    }
}
