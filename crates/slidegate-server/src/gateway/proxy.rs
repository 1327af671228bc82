//! [`Proxy`]: the service behind a route's rate-limit layer — it passes
//! an admitted request to one of the route's upstreams and streams the
//! answer back.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::header::HOST;
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{HeaderValue, Request, Response, StatusCode, Uri, Version};
use http_body::Body as _;
use http_body_util::{Either, Empty};
use hyper::body::Incoming;
use slidegate::telemetry::{LogThrottle, THROTTLED_NOTE};
use slidegate_tower::{ClientIp, InFlight};

use super::body::{GatewayBody, Upload, plain};
use super::conn::TunnelHome;
use super::forward::{OverTls, is_upgrade, remove_hop_by_hop, set_forwarding};
use super::head::request_host_value;
use super::health::UpstreamHealth;
use super::response::{Late, answer, error_chain, respond};
use super::upstream_conns::{Answer, Conns, Failure};
use super::upstream_io::{Clients, HttpClient, IDLE_TIMEOUT, UpstreamConnector, http2_client};
use crate::config::{GatewaySettings, Route};
use crate::decide::stats::ServiceStats;
use crate::runtime::telemetry;

#[cfg(test)]
mod pool_twin;
#[cfg(test)]
mod uri_twin;

/// One upstream: where it is, and until when it is skipped.
struct Upstream {
    scheme: Scheme,
    authority: Authority,
    /// The authority as a `Host` value, for HTTP/1.1 requests that do not
    /// keep the client's.
    host: Option<HeaderValue>,
    /// Its kept HTTP/1.1 connections (`None` on an `http2: true` route).
    conns: Option<Arc<Conns>>,
    /// The upstream URL's path, without a trailing `/` (often empty).
    base_path: String,
    /// Milliseconds since the target's epoch until which it is skipped
    /// (it refused a connection).
    down_until_ms: AtomicU64,
}

/// The gates of a route's upstream warnings, one per kind: an upstream
/// down under load would otherwise log every request.
#[derive(Default)]
struct Warnings {
    unreachable: LogThrottle,
    failed: LogThrottle,
    late: LogThrottle,
}

/// Where a route's admitted requests go, and how.
pub(crate) struct Target {
    route: Arc<str>,
    upstreams: Vec<Upstream>,
    /// Round robin.
    next: AtomicUsize,
    strip_prefix: Option<String>,
    preserve_host: bool,
    http2: bool,
    /// The pooled client of `http2: true` routes.
    client: HttpClient,
    response_timeout: Duration,
    down_for: Duration,
    /// Decides which peers are trusted proxies.
    trust: ClientIp,
    /// Where the time of admitting decisions is counted.
    stats: Arc<ServiceStats>,
    /// Where the upstreams' answers and failures are counted.
    health: Arc<UpstreamHealth>,
    epoch: Instant,
    warnings: Warnings,
}

impl Target {
    pub(crate) fn new(
        route: &Route,
        settings: &GatewaySettings,
        clients: &Clients,
        trust: ClientIp,
        (stats, health): (Arc<ServiceStats>, Arc<UpstreamHealth>),
    ) -> Target {
        let connector = UpstreamConnector::new(
            clients.connector.clone(),
            route.upstream_tls.as_ref(),
            settings.connect_timeout,
        );
        let upstreams = route
            .upstreams
            .iter()
            .filter_map(|uri| {
                let (scheme, authority) = (uri.scheme()?.clone(), uri.authority()?.clone());
                // What the connector connects to: `http://authority/`.
                let address =
                    Uri::builder().scheme(scheme.clone()).authority(authority.clone()).path_and_query("/");
                let conns = match address.build() {
                    Ok(address) if !route.http2 => {
                        Some(Arc::new(Conns::new(address, connector.clone(), IDLE_TIMEOUT)))
                    }
                    _ => None,
                };
                Some(Upstream {
                    host: HeaderValue::from_str(authority.as_str()).ok(),
                    conns,
                    scheme,
                    authority,
                    base_path: uri.path().trim_end_matches('/').to_owned(),
                    down_until_ms: AtomicU64::new(0),
                })
            })
            .collect();
        Target {
            route: Arc::from(route.name.as_str()),
            upstreams,
            next: AtomicUsize::new(0),
            strip_prefix: route.strip_prefix.then(|| route.path_prefix.clone()),
            preserve_host: route.preserve_host,
            http2: route.http2,
            // h2 over TLS: a pool of the route's own (its TLS is its own).
            client: match &route.upstream_tls {
                Some(_) if route.http2 => http2_client(connector),
                _ => clients.http2.clone(),
            },
            response_timeout: settings.response_timeout,
            down_for: settings.upstream_down_for,
            trust,
            stats,
            health,
            epoch: Instant::now(),
            warnings: Warnings::default(),
        }
    }

    /// Counts an upstream that could not be reached, failed or was late.
    fn upstream_failed(&self, kind: &'static str) {
        telemetry::upstream_error(&self.route, kind);
        self.health.failed();
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// The upstreams to try, in turn: those not skipped first (round
    /// robin), then the skipped ones (better a try than certain failure).
    /// Taken once, at the start: an upstream marked down while this
    /// request tries them is not tried again.
    fn order(&self) -> std::vec::IntoIter<usize> {
        let n = self.upstreams.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed) % n.max(1);
        let now = self.now_ms();
        let turn = || (0..n).map(|i| (start + i) % n);
        let up = |i: &usize| self.upstreams[*i].down_until_ms.load(Ordering::Relaxed) <= now;
        let mut order = Vec::with_capacity(n);
        order.extend(turn().filter(up));
        order.extend(turn().filter(|i| !up(i)));
        order.into_iter()
    }

    fn mark_down(&self, index: usize) {
        let until =
            self.now_ms().saturating_add(u64::try_from(self.down_for.as_millis()).unwrap_or(u64::MAX));
        self.upstreams[index].down_until_ms.store(until, Ordering::Relaxed);
    }

    /// The URI of `uri`'s path and query at upstream `index`: absolute for
    /// the HTTP/2 client, origin-form (the path and query only) for a kept
    /// HTTP/1.1 connection.
    fn upstream_uri(&self, index: usize, uri: &Uri) -> Option<Uri> {
        let upstream = &self.upstreams[index];
        let mut path = uri.path();
        if let Some(prefix) = &self.strip_prefix {
            path = path.strip_prefix(prefix.as_str()).unwrap_or(path);
        }
        let path_and_query = match uri.path_and_query() {
            // Nothing to change: the request's own, shared rather than rebuilt.
            Some(same)
                if self.strip_prefix.is_none() && upstream.base_path.is_empty() && path.starts_with('/') =>
            {
                same.clone()
            }
            _ => {
                let mut target = String::with_capacity(upstream.base_path.len() + path.len() + 32);
                target.push_str(&upstream.base_path);
                if !path.starts_with('/') {
                    target.push('/');
                }
                target.push_str(path);
                if let Some(query) = uri.query() {
                    target.push('?');
                    target.push_str(query);
                }
                PathAndQuery::try_from(target).ok()?
            }
        };
        if upstream.conns.is_some() {
            return Some(Uri::from(path_and_query));
        }
        Uri::builder()
            .scheme(upstream.scheme.clone())
            .authority(upstream.authority.clone())
            .path_and_query(path_and_query)
            .build()
            .ok()
    }

    /// Sends `request` through the HTTP/2 client (an upstream without
    /// kept connections).
    async fn pooled(&self, request: Request<Upload>) -> Result<Answer, Failure> {
        match self.client.request(request).await {
            Ok(response) => Ok(Answer { response, lease: None }),
            Err(error) if error.is_connect() => Err(Failure::Connect(error.into())),
            Err(error) => Err(Failure::Failed(error.into())),
        }
    }
}

/// When a request's limits began to be decided (in its extensions): the
/// proxy, called once they admit it, counts the decision's time.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deciding(pub(crate) Instant);

/// The service that forwards admitted requests to a route's upstreams.
#[derive(Clone)]
pub(crate) struct Proxy {
    target: Arc<Target>,
}

impl Proxy {
    pub(crate) fn new(target: Target) -> Proxy {
        Proxy { target: Arc::new(target) }
    }
}

type ProxyFuture = Pin<Box<dyn Future<Output = Result<Response<GatewayBody>, Infallible>> + Send>>;

impl tower_service::Service<Request<Incoming>> for Proxy {
    type Response = Response<GatewayBody>;
    type Error = Infallible;
    type Future = ProxyFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Incoming>) -> ProxyFuture {
        let target = Arc::clone(&self.target);
        Box::pin(async move { Ok(forward(&target, request).await) })
    }
}

async fn forward(target: &Target, mut request: Request<Incoming>) -> Response<GatewayBody> {
    let peer = request.extensions().get::<SocketAddr>().copied();
    let upgrade = is_upgrade(request.headers());
    // The client's side of a protocol switch, taken before the request
    // is sent on.
    let client_upgrade = upgrade.then(|| hyper::upgrade::on(&mut request));
    // A shared copy (its bytes are the request's): the headers change below.
    let host = request_host_value(&request);
    let (mut parts, body) = request.into_parts();
    let in_flight = parts.extensions.remove::<InFlight>();
    let tunnels = parts.extensions.remove::<TunnelHome>().map(|home| TunnelHome { in_flight, ..home });
    let https = parts.extensions.get::<OverTls>().is_some();
    if let Some(Deciding(started)) = parts.extensions.remove::<Deciding>() {
        // The limits admitted the request: their decision took this long.
        target.stats.store_call(started.elapsed());
    }
    let mut headers = parts.headers;
    remove_hop_by_hop(&mut headers, upgrade);
    if let Some(peer) = peer {
        let trusted = target.trust.trusts(peer.ip());
        set_forwarding(&mut headers, peer, trusted, host.as_ref(), https);
    }
    match host {
        Some(host) if target.preserve_host && !target.http2 => {
            headers.insert(HOST, host);
        }
        // The client sets the upstream's own host.
        _ => {
            headers.remove(HOST);
        }
    }
    // A request without a body can go to another upstream when one refuses.
    let mut body = if body.is_end_stream() { None } else { Some(body) };
    let resendable = body.is_none();
    let version = if target.http2 { Version::HTTP_2 } else { Version::HTTP_11 };
    let mut failure = None;
    let mut order = target.order().peekable();
    while let Some(index) = order.next() {
        let Some(uri) = target.upstream_uri(index, &parts.uri) else {
            return plain(StatusCode::BAD_REQUEST, "the request path cannot be forwarded\n");
        };
        let body = match body.take() {
            Some(body) => Either::Left(body),
            None if resendable => Either::Right(Empty::new()),
            None => break,
        };
        let (body, sending) = Upload::new(body);
        let mut upstream_request = Request::new(body);
        *upstream_request.method_mut() = parts.method.clone();
        *upstream_request.uri_mut() = uri;
        *upstream_request.version_mut() = version;
        // Copied only when another upstream may be tried after this one.
        *upstream_request.headers_mut() =
            if resendable && order.peek().is_some() { headers.clone() } else { std::mem::take(&mut headers) };
        // Each call is pinned here, in this future, not moved into another.
        let upstream = &target.upstreams[index];
        let asked = Instant::now();
        let answered = match &upstream.conns {
            Some(conns) => {
                if let Some(host) =
                    upstream.host.as_ref().filter(|_| !upstream_request.headers().contains_key(HOST))
                {
                    upstream_request.headers_mut().insert(HOST, host.clone());
                }
                answer(target.response_timeout, pin!(conns.send(upstream_request)), sending).await
            }
            None => answer(target.response_timeout, pin!(target.pooled(upstream_request)), sending).await,
        };
        match answered {
            Ok(Ok(answer)) => {
                target.health.answered(u64::try_from(asked.elapsed().as_micros()).unwrap_or(u64::MAX));
                return respond(answer, client_upgrade.zip(tunnels));
            }
            Ok(Err(Failure::Connect(error))) => {
                if let Some(held_back) =
                    target.warnings.unreachable.pass(target.now_ms(), LogThrottle::EVERY_MS)
                {
                    tracing::warn!(target: "slidegate", route = %target.route, upstream = %target.upstreams[index].authority, %error, held_back, "upstream unreachable; skipped for a while{THROTTLED_NOTE}");
                }
                target.upstream_failed("connect");
                target.mark_down(index);
                failure = Some(StatusCode::BAD_GATEWAY);
            }
            Ok(Err(Failure::Failed(error))) => {
                if let Some(held_back) = target.warnings.failed.pass(target.now_ms(), LogThrottle::EVERY_MS) {
                    tracing::warn!(target: "slidegate", route = %target.route, upstream = %target.upstreams[index].authority, error = %error_chain(&*error), held_back, "upstream failed{THROTTLED_NOTE}");
                }
                target.upstream_failed("failed");
                return plain(StatusCode::BAD_GATEWAY, "bad gateway: the upstream failed\n");
            }
            Err(late) => {
                let answer = match late {
                    Late::Response => "gateway timeout: the upstream did not answer in time\n",
                    Late::Upload => "gateway timeout: the request body made no progress in time\n",
                };
                if let Some(held_back) = target.warnings.late.pass(target.now_ms(), LogThrottle::EVERY_MS) {
                    tracing::warn!(target: "slidegate", route = %target.route, upstream = %target.upstreams[index].authority, timeout = ?target.response_timeout, held_back, "{}{THROTTLED_NOTE}", answer.trim_end());
                }
                target.upstream_failed("timeout");
                return plain(StatusCode::GATEWAY_TIMEOUT, answer);
            }
        }
    }
    match failure {
        Some(status) => plain(status, "bad gateway: no upstream could be reached\n"),
        None => plain(StatusCode::BAD_GATEWAY, "bad gateway: no upstream\n"),
    }
}
