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
use serde::Deserialize;
use serde_saphyr::Spanned;
use sha2::{Digest, Sha256};
use slidegate::Rule;
use slidegate::limits::MAX_NAME_LEN;
use slidegate_tower::{ForwardedHeader, MissingKey};

use super::build::{Builder, yaml_error};
use super::error::{ConfigError, ConfigErrors};
use super::limit::{Enforcement, Limit};
use super::yaml::{PenaltyYaml, RateLimitYaml, Scalar, position};

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
    /// The file it was loaded from.
    pub file: PathBuf,
    /// A digest of the file (16 hex digits).
    pub hash: String,
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
            message: "Too Many Requests".to_owned(),
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
    /// Whether the upstreams speak HTTP/2 without TLS (h2c, e.g. gRPC servers).
    pub http2: bool,
    /// The gateway's limits and the route's own, decided together.
    pub limits: Vec<RouteLimit>,
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
    /// The rule (named).
    pub rule: Rule,
    /// Whose requests it counts.
    pub key: KeySpec,
    /// What a request without the key does.
    pub missing: MissingKey,
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

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GatewayYaml {
    trusted_proxies: Option<Vec<Spanned<String>>>,
    client_ip_header: Option<Spanned<String>>,
    ipv6_prefix: Option<Spanned<Scalar>>,
    ban_status: Option<Spanned<Scalar>>,
    message: Option<Spanned<String>>,
    connect_timeout: Option<Spanned<String>>,
    response_timeout: Option<Spanned<String>>,
    upstream_down_for: Option<Spanned<String>>,
    max_connections_per_ip: Option<Spanned<Scalar>>,
    max_header_bytes: Option<Spanned<Scalar>>,
    limits: Option<Vec<Spanned<LimitYaml>>>,
    routes: Option<Spanned<Vec<Spanned<RouteYaml>>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RouteYaml {
    name: Option<Spanned<String>>,
    host: Option<Spanned<String>>,
    path_prefix: Option<Spanned<String>>,
    methods: Option<Vec<Spanned<String>>>,
    upstreams: Option<Spanned<Vec<Spanned<String>>>>,
    strip_prefix: Option<bool>,
    preserve_host: Option<bool>,
    http2: Option<bool>,
    limits: Option<Vec<Spanned<LimitYaml>>>,
}

/// A limit as written: the rules' fields (`requests_per_unit` with `unit`
/// or `window`, `algorithm`, `penalty`), a `key` and `on_missing`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitYaml {
    key: Option<Spanned<String>>,
    on_missing: Option<Spanned<String>>,
    name: Option<Spanned<String>>,
    unit: Option<Spanned<String>>,
    requests_per_unit: Option<Spanned<Scalar>>,
    window: Option<Spanned<String>>,
    algorithm: Option<Spanned<String>>,
    penalty: Option<Spanned<PenaltyYaml>>,
}

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
        let built = build(file, text, &mut errors);
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
                        "rule": l.rule.name(),
                        "key": l.key.name(),
                        "limit": l.limit.view(),
                    })).collect::<Vec<_>>(),
                    "source": route.source,
                })
            })
            .collect();
        serde_json::json!({ "file": self.file, "hash": self.hash, "routes": routes })
    }
}

fn build(file: &Path, text: &str, errors: &mut Vec<ConfigError>) -> Option<GatewayConfig> {
    let mut options = serde_saphyr::Options::default();
    let mut budget = options.budget.unwrap_or_default();
    // routes → route → limits → limit → penalty: a handful of levels.
    budget.max_depth = 16;
    options.budget = Some(budget);
    let yaml: GatewayYaml = match serde_saphyr::from_str_with_options(text, options) {
        Ok(yaml) => yaml,
        Err(error) => {
            errors.push(yaml_error(file, &error));
            return None;
        }
    };
    let mut builder = Builder::for_gateway(file, errors);
    let settings = settings(&mut builder, &yaml);
    let Some(routes_yaml) = yaml.routes else {
        // `routes:` written without a value reads as no `routes`: say where it stands.
        let written = text.lines().position(|line| {
            line.strip_prefix("routes:")
                .is_some_and(|rest| rest.trim().is_empty() || rest.trim().starts_with('#'))
        });
        match written {
            Some(line) => builder.error(
                (u32::try_from(line + 1).unwrap_or(u32::MAX), 1),
                "`routes` has no value: give a list of routes",
            ),
            None => builder.error((1, 1), "the gateway file has no `routes`: give at least one"),
        }
        return None;
    };
    if routes_yaml.value.is_empty() {
        builder.error(position(&routes_yaml), "`routes` is empty: give at least one");
    }
    if routes_yaml.value.len() > MAX_ROUTES {
        builder.error(position(&routes_yaml), format!("more than {MAX_ROUTES} routes"));
        return None;
    }
    let shared = limits(&mut builder, yaml.limits.unwrap_or_default(), "gateway");
    let mut routes: Vec<Route> = Vec::new();
    // Every route name written, with where: a duplicate of a refused route
    // is a duplicate too.
    let mut names: Vec<(String, String)> = Vec::new();
    for route in routes_yaml.value {
        if let Some(route) = self::route(&mut builder, route, &shared, &mut names) {
            routes.push(route);
        }
    }
    let mut hasher = Sha256::new();
    hasher.update(file.to_string_lossy().as_bytes());
    hasher.update([0]);
    hasher.update(text.as_bytes());
    let hash = hasher.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect();
    Some(GatewayConfig { settings, routes, file: file.to_owned(), hash })
}

/// A whole number in `range`, or a message naming `what`.
fn whole(
    builder: &mut Builder<'_>,
    value: &Spanned<Scalar>,
    what: &str,
    range: std::ops::RangeInclusive<i128>,
) -> Option<i128> {
    match value.value.whole() {
        Ok(n) if range.contains(&n) => Some(n),
        Ok(n) => {
            builder.error(
                position(value),
                format!("`{what}` must be from {} to {}, got {n}", range.start(), range.end()),
            );
            None
        }
        Err(text) => {
            builder.error(position(value), format!("`{what}` must be a whole number, got `{text}`"));
            None
        }
    }
}

fn duration(builder: &mut Builder<'_>, value: &Spanned<String>, what: &str) -> Option<Duration> {
    match humantime::parse_duration(value.value.trim()) {
        Ok(d) if !d.is_zero() && d <= Duration::from_secs(24 * 3600) => Some(d),
        Ok(_) => {
            builder.error(position(value), format!("`{what}` must be longer than zero and at most 24h"));
            None
        }
        Err(e) => {
            builder.error(
                position(value),
                format!("`{what}: {}`: {e} (expected a duration such as 500ms, 5s or 1m)", value.value),
            );
            None
        }
    }
}

fn settings(builder: &mut Builder<'_>, yaml: &GatewayYaml) -> Settings {
    let mut settings = Settings::default();
    if let Some(proxies) = &yaml.trusted_proxies {
        for proxy in proxies {
            match slidegate_tower::ClientIp::trusting([proxy.value.as_str()]) {
                Ok(_) => settings.trusted_proxies.push(proxy.value.trim().to_owned()),
                Err(message) => builder.error(position(proxy), message),
            }
        }
    }
    if let Some(header) = &yaml.client_ip_header {
        match header.value.trim().to_ascii_lowercase().as_str() {
            "x-forwarded-for" => settings.client_ip_header = ForwardedHeader::XForwardedFor,
            "forwarded" => settings.client_ip_header = ForwardedHeader::Forwarded,
            "x-real-ip" => settings.client_ip_header = ForwardedHeader::XRealIp,
            other => builder.error(
                position(header),
                format!(
                    "unknown `client_ip_header: {other}`: expected x-forwarded-for, forwarded or x-real-ip"
                ),
            ),
        }
    }
    if let Some(prefix) = &yaml.ipv6_prefix
        && let Some(bits) = whole(builder, prefix, "ipv6_prefix", 1..=128)
    {
        settings.ipv6_prefix = u8::try_from(bits).unwrap_or(128);
    }
    if let Some(status) = &yaml.ban_status {
        match status.value.whole() {
            Ok(429) => settings.ban_status = StatusCode::TOO_MANY_REQUESTS,
            Ok(403) => settings.ban_status = StatusCode::FORBIDDEN,
            Ok(code) => {
                builder.error(position(status), format!("`ban_status` must be 429 or 403, got {code}"))
            }
            Err(text) => {
                builder.error(position(status), format!("`ban_status` must be 429 or 403, got `{text}`"))
            }
        }
    }
    if let Some(message) = &yaml.message {
        if message.value.trim().is_empty() || message.value.len() > 1024 {
            builder.error(position(message), "`message` must be 1 to 1024 bytes of text");
        } else {
            settings.message = message.value.clone();
        }
    }
    for (value, what, slot) in [
        (&yaml.connect_timeout, "connect_timeout", &mut settings.connect_timeout),
        (&yaml.response_timeout, "response_timeout", &mut settings.response_timeout),
        (&yaml.upstream_down_for, "upstream_down_for", &mut settings.upstream_down_for),
    ] {
        if let Some(value) = value
            && let Some(d) = duration(builder, value, what)
        {
            *slot = d;
        }
    }
    if let Some(cap) = &yaml.max_connections_per_ip
        && let Some(n) = whole(builder, cap, "max_connections_per_ip", 0..=1_000_000)
    {
        settings.max_connections_per_ip = u32::try_from(n).unwrap_or(0);
    }
    if let Some(bytes) = &yaml.max_header_bytes {
        let range =
            i128::try_from(MIN_HEADER_BYTES).unwrap_or(0)..=i128::try_from(MAX_HEADER_BYTES).unwrap_or(0);
        if let Some(n) = whole(builder, bytes, "max_header_bytes", range) {
            settings.max_header_bytes = usize::try_from(n).unwrap_or(MIN_HEADER_BYTES);
        }
    }
    settings
}

/// The longest route or limit name: `<route>.<limit>` names a rule.
pub const MAX_PART_LEN: usize = (MAX_NAME_LEN - 1) / 2;

/// Whether `name` can be part of a rule's name.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_PART_LEN
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
}

fn route(
    builder: &mut Builder<'_>,
    yaml: Spanned<RouteYaml>,
    shared: &[RouteLimit],
    names: &mut Vec<(String, String)>,
) -> Option<Route> {
    let at = position(&yaml);
    let yaml = yaml.value;
    let errors_before = builder.error_count();
    let name = match &yaml.name {
        None => {
            builder.error(at, "a route needs a `name` (its limits, metrics and the status page use it)");
            None
        }
        Some(name) if !valid_name(name.value.trim()) => {
            builder.error(
                position(name),
                format!(
                    "route name `{}` must be 1 to {} characters of A-Z a-z 0-9 _ -",
                    name.value, MAX_PART_LEN
                ),
            );
            None
        }
        Some(name) if name.value.trim() == "gateway" => {
            builder
                .error(position(name), "`gateway` names the gateway's own limits: call the route otherwise");
            None
        }
        Some(name) => {
            let name = name.value.trim().to_owned();
            match names.iter().find(|(seen, _)| *seen == name) {
                Some((_, first)) => {
                    builder.error(at, format!("route `{name}` is already defined at {first}"))
                }
                None => names.push((name.clone(), builder.source(at))),
            }
            Some(name)
        }
    };
    let host = yaml.host.as_ref().and_then(|host| {
        let text = host.value.trim().to_ascii_lowercase();
        let (suffix, bare) = match text.strip_prefix("*.") {
            Some(rest) => (true, rest.to_owned()),
            None => (false, text.clone()),
        };
        let ok = !bare.is_empty()
            && bare.len() <= 253
            && bare.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && !label.starts_with('-')
                    && !label.ends_with('-')
                    && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            });
        if !ok {
            builder.error(
                position(host),
                format!("`host: {}` is not a host name (e.g. api.example.com or *.example.com)", host.value),
            );
            return None;
        }
        Some(if suffix { HostMatch::Suffix(format!(".{bare}")) } else { HostMatch::Exact(bare) })
    });
    let path_prefix = match &yaml.path_prefix {
        None => "/".to_owned(),
        Some(prefix) => {
            let text = prefix.value.trim();
            let plain = text.chars().all(|c| c.is_ascii_graphic() && c != '?' && c != '#');
            if !text.starts_with('/') || !plain || crate::gateway::has_dot_segment(text) {
                builder.error(
                    position(prefix),
                    format!(
                        "`path_prefix: {}` must be a path starting with `/`, of printable ASCII \
                         (percent-encode the rest, as requests carry it), without `.` or `..` \
                         segments, `?` or `#`",
                        prefix.value
                    ),
                );
            }
            text.to_owned()
        }
    };
    let mut methods = Vec::new();
    for method in yaml.methods.unwrap_or_default() {
        let text = method.value.trim().to_ascii_uppercase();
        match Method::from_bytes(text.as_bytes()) {
            Ok(m) if !text.is_empty() => methods.push(m),
            _ => builder.error(position(&method), format!("`{}` is not an HTTP method", method.value)),
        }
    }
    let mut upstreams = Vec::new();
    match &yaml.upstreams {
        None => builder.error(at, "a route needs `upstreams`: one or more http://host:port URLs"),
        Some(list) if list.value.is_empty() => {
            builder.error(position(list), "`upstreams` is empty: give one or more http://host:port URLs")
        }
        Some(list) if list.value.len() > MAX_UPSTREAMS => {
            builder.error(position(list), format!("a route takes at most {MAX_UPSTREAMS} upstreams"))
        }
        Some(list) => {
            for upstream in &list.value {
                match upstream_uri(upstream.value.trim()) {
                    Ok(uri) => upstreams.push(uri),
                    Err(message) => builder.error(position(upstream), message),
                }
            }
        }
    }
    let source = builder.source(at);
    // A route whose name is refused still has its limits checked.
    let own = limits(builder, yaml.limits.unwrap_or_default(), name.as_deref().unwrap_or("route"));
    let name = name?;
    let mut route_limits: Vec<RouteLimit> = shared.to_vec();
    route_limits.extend(own);
    if route_limits.len() > slidegate::limits::MAX_DIMENSIONS {
        builder.error(
            at,
            format!(
                "route `{name}` has {} limits with the gateway's: at most {}",
                route_limits.len(),
                slidegate::limits::MAX_DIMENSIONS
            ),
        );
    }
    if builder.error_count() > errors_before {
        return None;
    }
    Some(Route {
        name,
        host,
        path_prefix,
        methods,
        upstreams,
        strip_prefix: yaml.strip_prefix.unwrap_or(false),
        preserve_host: yaml.preserve_host.unwrap_or(true),
        http2: yaml.http2.unwrap_or(false),
        limits: route_limits,
        source,
    })
}

/// An upstream URL: `http://host:port` with an optional base path.
fn upstream_uri(text: &str) -> Result<Uri, String> {
    if let Some((scheme, rest)) = text.split_once("://")
        && rest.split(['/', '?', '#']).next().is_some_and(|authority| authority.contains('@'))
    {
        // Said without repeating the secret.
        return Err(format!("upstream `{scheme}://…@…` must not carry credentials"));
    }
    if text.contains('#') {
        return Err(format!("upstream `{text}` must not have a fragment"));
    }
    let uri: Uri = text.parse().map_err(|e| format!("upstream `{text}` is not a URL: {e}"))?;
    match uri.scheme_str() {
        Some("http") => {}
        Some("https") => {
            return Err(format!(
                "upstream `{text}`: https upstreams are not supported yet; reach them through a local \
                 TLS proxy or over a private network with http://"
            ));
        }
        _ => return Err(format!("upstream `{text}` must start with http://")),
    }
    if uri.authority().is_none_or(|a| a.host().is_empty()) {
        return Err(format!("upstream `{text}` names no host"));
    }
    if uri.query().is_some() {
        return Err(format!("upstream `{text}` must not have a query"));
    }
    let authority = uri.authority().map(|a| a.as_str()).unwrap_or_default();
    // The port as written (after an IPv6 literal's `]`, or the last `:`).
    let port_text = match authority.strip_prefix('[') {
        Some(v6) => v6.split_once(']').and_then(|(_, rest)| rest.strip_prefix(':')),
        None => authority.rsplit_once(':').map(|(_, port)| port),
    };
    match (port_text, uri.port_u16()) {
        (Some(_), Some(0)) => return Err(format!("upstream `{text}`: port 0 is no port to connect to")),
        (Some(_), None) => return Err(format!("upstream `{text}`: the port must be 1 to 65535")),
        _ => {}
    }
    if crate::gateway::has_dot_segment(uri.path()) {
        return Err(format!("upstream `{text}`: its path must not have `.` or `..` segments"));
    }
    Ok(uri)
}

/// The limits of a route (or the gateway's, `scope` "gateway").
fn limits(builder: &mut Builder<'_>, yaml: Vec<Spanned<LimitYaml>>, scope: &str) -> Vec<RouteLimit> {
    let mut out: Vec<RouteLimit> = Vec::new();
    for (index, limit) in yaml.into_iter().enumerate() {
        let at = position(&limit);
        let limit = limit.value;
        let key = match &limit.key {
            None => {
                builder.error(
                    at,
                    "a limit needs a `key`: global, client_ip, peer_ip, path, route or header:<name>",
                );
                None
            }
            Some(key) => match KeySpec::parse(&key.value) {
                Ok(key) => Some(key),
                Err(message) => {
                    builder.error(position(key), message);
                    None
                }
            },
        };
        let missing = match limit.on_missing.as_ref() {
            None => Some(MissingKey::default()),
            Some(m) => match m.value.trim() {
                "shared" => Some(MissingKey::default()),
                "skip" => Some(MissingKey::Skip),
                "reject" => Some(MissingKey::Reject),
                other => {
                    builder.error(
                        position(m),
                        format!("unknown `on_missing: {other}`: expected shared, skip or reject"),
                    );
                    None
                }
            },
        };
        let name = match (&limit.name, &key) {
            (Some(name), _) if !valid_name(name.value.trim()) => {
                builder.error(
                    position(name),
                    format!(
                        "limit name `{}` must be 1 to {} characters of A-Z a-z 0-9 _ -",
                        name.value, MAX_PART_LEN
                    ),
                );
                None
            }
            (Some(name), _) => Some(name.value.trim().to_owned()),
            (None, Some(key)) => {
                let name = key.name().replace(':', "-");
                if valid_name(&name) {
                    Some(name)
                } else {
                    builder.error(
                        at,
                        format!(
                            "this limit needs a `name`: its key `{}` makes no name of 1 to {MAX_PART_LEN} \
                             characters of A-Z a-z 0-9 _ -",
                            key.name()
                        ),
                    );
                    None
                }
            }
            (None, None) => None,
        };
        let written = RateLimitYaml {
            name: None,
            replaces: None,
            unit: limit.unit,
            requests_per_unit: limit.requests_per_unit,
            unlimited: None,
            algorithm: limit.algorithm,
            window: limit.window,
            penalty: limit.penalty,
        };
        let stat_key = format!("{scope}.{}", name.as_deref().unwrap_or(""));
        let built = builder.limit(written, at, index, false, &stat_key);
        let (Some(key), Some(missing), Some(name), Some(mut built)) = (key, missing, name, built) else {
            continue;
        };
        let rule_name = format!("{scope}.{name}");
        let rule = match &built.enforcement {
            Enforcement::Rule(rule) => rule.clone().named(&rule_name),
            Enforcement::Block | Enforcement::Unlimited => {
                builder.error(
                    at,
                    "`requests_per_unit` must be at least 1 (to refuse a route's requests, leave it out)",
                );
                continue;
            }
        };
        let rule = match rule {
            Ok(rule) => rule,
            Err(error) => {
                builder.error(at, format!("this limit cannot be enforced: {error}"));
                continue;
            }
        };
        if let Some(other) = out.iter().find(|l| l.rule.name() == Some(rule_name.as_str())) {
            builder.error(
                at,
                format!(
                    "two limits of `{scope}` are called `{name}` (the first at {}); give each a `name`",
                    other.limit.source
                ),
            );
            continue;
        }
        built.name = Some(rule_name);
        built.enforcement = Enforcement::Rule(rule.clone());
        out.push(RouteLimit { limit: Arc::new(built), rule, key, missing });
    }
    out
}
