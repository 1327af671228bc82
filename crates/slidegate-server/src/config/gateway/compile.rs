//! The gateway file compiled: its routes, every value checked, every
//! problem collected with its line and column (the settings in
//! [`settings`](super::settings), the limits in [`limits`](super::limits)).

use std::path::Path;

use http::{Method, Uri};
use serde_saphyr::Spanned;
use sha2::{Digest, Sha256};
use slidegate::Rule;

use super::limits::{limits, valid_name};
use super::order::unreachable;
use super::settings::settings;
use super::tls::tls;
use super::upstream_tls::upstream_tls;
use super::yaml::{GatewayYaml, RouteYaml};
use super::{
    GatewayConfig, HostMatch, MAX_PART_LEN, MAX_ROUTES, MAX_UPSTREAMS, Route, RouteInFlight, RouteLimit,
};
use crate::config::build::{Builder, in_file_order, tolerant};
use crate::config::error::ConfigError;
use crate::config::yaml::position;

/// Compiles the gateway file's `text`, adding every problem to `errors`,
/// in file order.
pub(super) fn build(file: &Path, text: &str, errors: &mut Vec<ConfigError>) -> Option<GatewayConfig> {
    let first = errors.len();
    let built = build_of(file, text, errors);
    in_file_order(&mut errors[first..]);
    built
}

fn build_of(file: &Path, text: &str, errors: &mut Vec<ConfigError>) -> Option<GatewayConfig> {
    let options = || {
        let mut options = serde_saphyr::Options::default();
        let mut budget = options.budget.unwrap_or_default();
        // routes → route → limits → limit → penalty: a handful of levels.
        budget.max_depth = 16;
        options.budget = Some(budget);
        options
    };
    let (yaml, set_aside): (GatewayYaml, _) =
        tolerant::parse(file, text, options, &["routes", "limits"], errors)?;
    let mut builder = Builder::for_gateway(file, errors);
    // Routes set aside were reported: an empty list left is no problem more.
    if set_aside > 0 && yaml.routes.as_ref().is_none_or(|routes| routes.value.is_empty()) {
        return None;
    }
    let settings = settings(&mut builder, &yaml);
    let mut hasher = Sha256::new();
    hasher.update(file.to_string_lossy().as_bytes());
    hasher.update([0]);
    hasher.update(text.as_bytes());
    let dir = file.parent().unwrap_or(Path::new("."));
    let tls = tls(&mut builder, yaml.tls, dir, &mut hasher);
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
    let (shared, shared_in_flight) = limits(&mut builder, yaml.limits.unwrap_or_default(), "gateway");
    let mut routes: Vec<Route> = Vec::new();
    // Every route name written, with where: a duplicate of a refused route
    // is a duplicate too.
    let mut names: Vec<(String, String)> = Vec::new();
    let mut positions = Vec::new();
    for route in routes_yaml.value {
        let at = position(&route);
        let shared = (&shared[..], &shared_in_flight[..]);
        if let Some(route) = self::route(&mut builder, route, shared, &mut names, (dir, &mut hasher)) {
            routes.push(route);
            positions.push(at);
        }
    }
    let warnings = unreachable(&routes)
        .into_iter()
        .map(|(never, first)| {
            let (route, taker) = (&routes[never], &routes[first]);
            ConfigError::at(
                file,
                positions[never],
                format!(
                    "route `{}` can never match: route `{}` (at {}) takes every request it would; \
                     give it a host, a longer path_prefix or methods, or remove it",
                    route.name, taker.name, taker.source
                ),
            )
        })
        .collect();
    let hash = hasher.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect();
    Some(GatewayConfig { settings, routes, tls, file: file.to_owned(), hash, warnings })
}

fn route(
    builder: &mut Builder<'_>,
    yaml: Spanned<RouteYaml>,
    (shared, shared_in_flight): (&[RouteLimit], &[RouteInFlight]),
    names: &mut Vec<(String, String)>,
    (dir, hash): (&Path, &mut Sha256),
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
    let http2 = yaml.http2.unwrap_or(false);
    let any_https = upstreams.iter().any(|u| u.scheme_str() == Some("https"));
    let upstream_tls = upstream_tls(builder, yaml.upstream_tls, (any_https, http2), dir, hash);
    let source = builder.source(at);
    // A route whose name is refused still has its limits checked.
    let (own, own_in_flight) =
        limits(builder, yaml.limits.unwrap_or_default(), name.as_deref().unwrap_or("route"));
    let name = name?;
    let mut route_limits: Vec<RouteLimit> = shared.to_vec();
    route_limits.extend(own);
    let mut in_flight: Vec<RouteInFlight> = shared_in_flight.to_vec();
    in_flight.extend(own_in_flight);
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
    // One layer charges a route's budgets from the responses: one header.
    let budgets = route_limits.iter().filter(|l| l.rule().is_some_and(Rule::is_budget));
    let headers: Vec<Option<&http::HeaderName>> = budgets.map(|l| l.cost_header.as_ref()).collect();
    if headers.iter().any(Option::is_some) && headers.windows(2).any(|w| w[0] != w[1]) {
        builder.error(
            at,
            format!(
                "route `{name}`: its budgets (the gateway's included) must all read the same \
                 `cost_header`, or none"
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
        http2,
        upstream_tls,
        limits: route_limits,
        in_flight,
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
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        return Err(format!("upstream `{text}` must start with http:// or https://"));
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
