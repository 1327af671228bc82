//! The gateway file as written, and its compilation: every value checked,
//! every problem collected with its line and column.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use http::{Method, StatusCode, Uri};
use serde::Deserialize;
use serde_saphyr::Spanned;
use sha2::{Digest, Sha256};
use slidegate_tower::{ForwardedHeader, MissingKey};

use super::super::build::{Builder, yaml_error};
use super::super::error::ConfigError;
use super::super::limit::Enforcement;
use super::super::yaml::{PenaltyYaml, RateLimitYaml, Scalar, position};
use super::{
    GatewayConfig, HostMatch, KeySpec, MAX_HEADER_BYTES, MAX_PART_LEN, MAX_ROUTES, MAX_UPSTREAMS,
    MIN_HEADER_BYTES, Route, RouteLimit, Settings,
};

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
/// or `window`, `algorithm`, `penalty`, `shadow_mode`), a `key` and
/// `on_missing`.
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
    shadow_mode: Option<bool>,
}

pub(super) fn build(file: &Path, text: &str, errors: &mut Vec<ConfigError>) -> Option<GatewayConfig> {
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
            // Requests are matched in their normal form: a prefix in
            // another would never match.
            let hint = match crate::gateway::normalize_path(text) {
                Ok(form) if plain && form == text => None,
                Ok(form) if plain => Some(format!(": write `{form}`")),
                _ => Some(String::new()),
            };
            if let Some(hint) = hint {
                builder.error(
                    position(prefix),
                    format!(
                        "`path_prefix: {}` must be a path starting with `/`, of printable ASCII \
                         (percent-encode the rest, as requests carry it), in the normal form requests \
                         are matched in, without `.` or `..` segments, `;`, `\\`, `?` or `#`{hint}",
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
    if let Err(why) = crate::gateway::normalize_path(uri.path()) {
        return Err(format!("upstream `{text}`: {}", why.0.trim_end().replace("the path", "its path")));
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
            penalty: limit.penalty.map(Box::new),
        };
        let stat_key = format!("{scope}.{}", name.as_deref().unwrap_or(""));
        let shadow = limit.shadow_mode.unwrap_or(false);
        let built = builder.limit(written, at, index, shadow, &stat_key);
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
