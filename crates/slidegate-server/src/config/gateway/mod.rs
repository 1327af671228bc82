//! The gateway's file: its routes, the limits on them and how the proxy
//! behaves — checked whole, every problem with its line and column, like
//! the rules.
//!
//! ```yaml
//! trusted_proxies: [10.0.0.0/8]      # whose X-Forwarded-For is believed
//! limits:                            # on every route
//!   - { key: client_ip, requests_per_unit: 100, unit: second }
//! routes:
//!   - name: login
//!     path_prefix: /login
//!     methods: [POST]
//!     upstreams: [http://127.0.0.1:9000]
//!     limits:
//!       - { key: client_ip, requests_per_unit: 5, window: 1m }
//!   - name: api
//!     path_prefix: /
//!     upstreams: [http://127.0.0.1:9000, http://127.0.0.1:9001]
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderName, Method, StatusCode, Uri};
use slidegate::limits::MAX_NAME_LEN;
use slidegate::{ConcurrencyLimit, Rule};
use slidegate_tower::{ForwardedHeader, MissingKey};

use super::error::{ConfigError, ConfigErrors};
use super::limit::Limit;
use crate::decide::stats::Usage;
pub(crate) use order::match_order;

/// A limited response's body unless `message` says otherwise (a ban's
/// then says it is one).
pub(crate) const DEFAULT_MESSAGE: &str = "Too Many Requests";

mod compile;
mod limits;
mod order;
mod settings;
mod tls;
mod upstream_tls;
mod yaml;

pub use tls::{GatewayTls, TlsCertificate};
pub use upstream_tls::UpstreamTls;

/// The most routes a gateway file may hold.
pub const MAX_ROUTES: usize = 1000;

/// The most upstreams one route may have.
pub const MAX_UPSTREAMS: usize = 64;

/// The gateway's file, compiled.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct GatewayConfig {
    /// How the proxy behaves.
    pub settings: Settings,
    /// The routes, in the order they are tried (see [`Route`]).
    pub routes: Vec<Route>,
    /// With it, the gateway serves HTTPS.
    pub tls: Option<GatewayTls>,
    /// The file it was loaded from.
    pub file: PathBuf,
    /// A digest of the file (16 hex digits).
    pub hash: String,
    /// What loads but is likely a mistake: a route that can never match
    /// (every request it would take, a route tried before it takes). Logged
    /// when the file is loaded; `slidegate serve --check` prints them.
    pub warnings: Vec<ConfigError>,
}

/// How the proxy behaves, for every route.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Settings {
    /// Proxies whose forwarding header names the client (CIDR ranges or
    /// addresses); they are exempt from the connection cap, and their
    /// `X-Forwarded-*` headers are extended rather than replaced.
    pub trusted_proxies: Vec<String>,
    /// The header trusted proxies name the client in.
    pub client_ip_header: ForwardedHeader,
    /// IPv6 clients are keyed by this many leading bits (128: the address).
    pub ipv6_prefix: u8,
    /// The status of a request denied by a ban (429 or 403).
    pub ban_status: StatusCode,
    /// The body of a limited response.
    pub message: String,
    /// How long connecting to an upstream may take before 502.
    pub connect_timeout: Duration,
    /// How long an upstream may take to answer (its response head) before 504.
    pub response_timeout: Duration,
    /// How long an upstream that refused a connection is skipped.
    pub upstream_down_for: Duration,
    /// The most connections one client address may hold open (0: no cap).
    pub max_connections_per_ip: u32,
    /// The most bytes a request's head (request line and headers) may take.
    pub max_header_bytes: usize,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            trusted_proxies: Vec::new(),
            client_ip_header: ForwardedHeader::XForwardedFor,
            ipv6_prefix: 128,
            ban_status: StatusCode::TOO_MANY_REQUESTS,
            message: DEFAULT_MESSAGE.to_owned(),
            connect_timeout: Duration::from_secs(5),
            response_timeout: Duration::from_secs(30),
            upstream_down_for: Duration::from_secs(10),
            max_connections_per_ip: 256,
            max_header_bytes: 16 * 1024,
        }
    }
}

/// The smallest head limit (hyper's read buffer cannot be smaller).
pub const MIN_HEADER_BYTES: usize = 8 * 1024;

/// The largest head limit.
pub const MAX_HEADER_BYTES: usize = 1024 * 1024;

/// One route: which requests it takes and where they go.
///
/// A request goes to the most specific route that matches it: a route
/// with a `host` before one without, then the longest `path_prefix`, then
/// a route with `methods` before one without; equal ones in file order.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Route {
    /// Its name: in its limits' names, metrics and the status page.
    pub name: String,
    /// The host it serves (`api.example.com`, `*.example.com`), any if `None`.
    pub host: Option<HostMatch>,
    /// The path prefix it serves (`/` for every path).
    pub path_prefix: String,
    /// The methods it serves, any if empty.
    pub methods: Vec<Method>,
    /// Where requests go, in turn: `http://host:port` with an optional base path.
    pub upstreams: Vec<Uri>,
    /// Whether `path_prefix` is cut from the path sent upstream.
    pub strip_prefix: bool,
    /// Whether the upstream sees the client's `Host` (else the upstream's own).
    pub preserve_host: bool,
    /// Whether the upstreams speak HTTP/2 (h2c, or h2 over TLS for
    /// `https://` ones; e.g. gRPC servers).
    pub http2: bool,
    /// How `https://` upstreams are reached (`None` without any).
    pub upstream_tls: Option<UpstreamTls>,
    /// The gateway's limits and the route's own, decided together.
    pub limits: Vec<RouteLimit>,
    /// The gateway's `max_in_flight` limits and the route's own.
    pub in_flight: Vec<RouteInFlight>,
    /// Where it was written: `file:line:column`.
    pub source: String,
}

/// A route's `host`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostMatch {
    /// This host exactly (lowercase).
    Exact(String),
    /// Any subdomain of this one: `*.example.com` holds `.example.com`.
    Suffix(String),
}

impl HostMatch {
    /// Whether `host` (lowercase, without port) is this one.
    pub fn matches(&self, host: &str) -> bool {
        match self {
            HostMatch::Exact(exact) => host == exact,
            HostMatch::Suffix(suffix) => host.len() > suffix.len() && host.ends_with(suffix.as_str()),
        }
    }
}

impl std::fmt::Display for HostMatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HostMatch::Exact(host) => f.write_str(host),
            HostMatch::Suffix(suffix) => write!(f, "*{suffix}"),
        }
    }
}

/// One limit of a route: the limit, whose key it counts, and what a
/// request without that key does.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RouteLimit {
    /// The limit; its rule is named `<route>.<limit>` (or
    /// `gateway.<limit>` for the gateway's own, shared by every route).
    pub limit: Arc<Limit>,
    /// The gateway's own (top-level, shared by every route) rather than
    /// one route's.
    pub gateway_wide: bool,
    /// Whose requests it counts.
    pub key: KeySpec,
    /// What a request without the key does.
    pub missing: MissingKey,
    /// A budget's: the upstream response header (or trailer) holding what
    /// a request cost, charged when the response ends.
    pub cost_header: Option<http::HeaderName>,
    /// How long a request it denies may wait for room (shaping).
    pub delay: Option<Duration>,
    /// How many of a key's requests may wait at once (with `delay`; what
    /// the limit admits within the delay by default).
    pub burst: Option<u32>,
}

/// A route's (or the gateway's) `max_in_flight` limit: at most so many of
/// a key's requests at once, each holding a lease until its response ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteInFlight {
    /// The limit, named `<route>.<name>` (or `gateway.<name>`): the name
    /// keys its leases in the store.
    pub limit: ConcurrencyLimit,
    /// Whose requests it counts.
    pub key: KeySpec,
    /// What a request without the key does.
    pub missing: MissingKey,
    /// Its leases running, for the identities seen last (the status page's).
    pub(crate) usage: Arc<Usage>,
}

/// How long a gateway lease is held without a renewal: the gateway renews
/// it every third of this while the response streams; a gateway gone
/// leaves its leases to come back after it.
pub const IN_FLIGHT_TTL: std::time::Duration = std::time::Duration::from_secs(60);

impl RouteLimit {
    /// Its rule, named `<route>.<limit>` (or `gateway.<limit>`): always
    /// `Some`, as the gateway refuses limits that decide without the store.
    pub fn rule(&self) -> Option<&Rule> {
        self.limit.rule()
    }
}

/// Whose requests a limit counts: the tower layer's extractors.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeySpec {
    /// Everybody's together.
    Global,
    /// Each client address, behind the trusted proxies.
    ClientIp,
    /// Each connected peer address (proxies ignored).
    PeerIp,
    /// Each path.
    Path,
    /// Each route (for a gateway-wide limit: one count per route).
    Route,
    /// Each value of a header (e.g. an API key).
    Header(HeaderName),
}

impl KeySpec {
    /// The key's name as written (`header:x-api-key`).
    pub fn name(&self) -> String {
        match self {
            KeySpec::Global => "global".into(),
            KeySpec::ClientIp => "client_ip".into(),
            KeySpec::PeerIp => "peer_ip".into(),
            KeySpec::Path => "path".into(),
            KeySpec::Route => "route".into(),
            KeySpec::Header(name) => format!("header:{name}"),
        }
    }

    fn parse(text: &str) -> Result<KeySpec, String> {
        let text = text.trim();
        Ok(match text {
            "global" => KeySpec::Global,
            "client_ip" => KeySpec::ClientIp,
            "peer_ip" => KeySpec::PeerIp,
            "path" => KeySpec::Path,
            "route" => KeySpec::Route,
            _ => match text.strip_prefix("header:") {
                Some(name) => KeySpec::Header(
                    HeaderName::from_bytes(name.trim().as_bytes())
                        .map_err(|_| format!("`{}` is not a header name", name.trim()))?,
                ),
                None => {
                    return Err(format!(
                        "unknown key `{text}`: expected global, client_ip, peer_ip, path, route or \
                         header:<name>"
                    ));
                }
            },
        })
    }
}

/// The longest route or limit name: `<route>.<limit>` names a rule.
pub const MAX_PART_LEN: usize = (MAX_NAME_LEN - 1) / 2;

impl GatewayConfig {
    /// Loads the gateway file `path`.
    ///
    /// # Errors
    ///
    /// Every problem found, each naming its line and column.
    pub fn load(path: &Path) -> Result<GatewayConfig, ConfigErrors> {
        let text = super::read(path).map_err(|e| ConfigErrors(vec![e]))?;
        GatewayConfig::from_text(path, &text)
    }

    /// Builds the gateway configuration of `text`, read from `file`.
    ///
    /// # Errors
    ///
    /// Every problem found, each naming its line and column.
    pub fn from_text(file: &Path, text: &str) -> Result<GatewayConfig, ConfigErrors> {
        let mut errors = Vec::new();
        let built = compile::build(file, text, &mut errors);
        // In file order, whatever order they were found in.
        errors.sort_by_key(|e| (e.line, e.column));
        match built {
            Some(config) if errors.is_empty() => Ok(config),
            _ => Err(ConfigErrors(errors)),
        }
    }

    /// The gateway's routes and settings as `/v1/gateway` shows them.
    pub(crate) fn view(&self) -> serde_json::Value {
        let routes: Vec<serde_json::Value> = self
            .routes
            .iter()
            .map(|route| {
                serde_json::json!({
                    "name": route.name,
                    "host": route.host.as_ref().map(ToString::to_string),
                    "path_prefix": route.path_prefix,
                    "methods": route.methods.iter().map(Method::as_str).collect::<Vec<_>>(),
                    "upstreams": route.upstreams.iter().map(ToString::to_string).collect::<Vec<_>>(),
                    "strip_prefix": route.strip_prefix,
                    "preserve_host": route.preserve_host,
                    "http2": route.http2,
                    "limits": route.limits.iter().map(|l| serde_json::json!({
                        "rule": l.rule().and_then(Rule::name),
                        "key": l.key.name(),
                        "limit": l.limit.view(),
                        "delay_ms": l.delay.map(|d| d.as_millis()),
                        "burst": l.burst,
                    })).collect::<Vec<_>>(),
                    "max_in_flight": route.in_flight.iter().map(|l| serde_json::json!({
                        "limit": l.limit.name(),
                        "key": l.key.name(),
                        "max_in_flight": l.limit.limit(),
                        "lease_ttl_ms": l.limit.ttl_ms(),
                    })).collect::<Vec<_>>(),
                    "source": route.source,
                })
            })
            .collect();
        let tls = self.tls.as_ref().map(|tls| {
            let certificates = tls.certificates.iter().map(|c| {
                serde_json::json!({ "cert_file": c.cert_file.to_string_lossy(), "key_file": c.key_file.to_string_lossy() })
            });
            serde_json::json!({ "certificates": certificates.collect::<Vec<_>>() })
        });
        serde_json::json!({ "file": self.file.to_string_lossy(), "hash": self.hash, "tls": tls, "routes": routes })
    }
}
