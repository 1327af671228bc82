//! The gateway's file: a valid file compiles to exactly what it says, the
//! defaults are the documented ones, every malformed file is refused with
//! its message at the right file, line and column (every problem listed),
//! and hostile input (random bytes, deep nesting, alias bombs, huge files)
//! is an error, never a panic or a hang.

#[path = "support/config.rs"]
mod config_support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use config_support::{assert_at, assert_whole, error, errors};
use http::{HeaderName, Method, StatusCode};
use slidegate::Algorithm;
use slidegate_server::config::{
    ConfigErrors, GatewayConfig, GatewaySettings, HostMatch, KeySpec, MAX_FILE_BYTES, MAX_HEADER_BYTES,
    MAX_ROUTES, MAX_UPSTREAMS, MIN_HEADER_BYTES, Route, RouteLimit, Unit,
};
use slidegate_tower::{ForwardedHeader, MissingKey};

/// The path a test's text is loaded as.
const FILE: &str = "gateway/test.yaml";

/// Loads `yaml` as the gateway's file, [`FILE`].
fn load(yaml: &str) -> Result<GatewayConfig, ConfigErrors> {
    GatewayConfig::from_text(Path::new(FILE), yaml)
}

/// The configuration `yaml` compiles to (it must compile).
#[track_caller]
fn compiled(yaml: &str) -> GatewayConfig {
    match load(yaml) {
        Ok(config) => config,
        Err(errors) => panic!("expected the gateway file to load, got:\n{errors}\n---\n{yaml}"),
    }
}

/// `setting` (from 1:1) and then a route `api`.
fn with_setting(setting: &str) -> String {
    format!("{setting}\nroutes:\n  - name: api\n    upstreams: [http://127.0.0.1:9000]\n")
}

/// A file of one route `api` whose one limit is `limit`, a flow mapping
/// standing at 5:9.
fn with_limit(limit: &str) -> String {
    format!("routes:\n  - name: api\n    upstreams: [http://127.0.0.1:9000]\n    limits:\n      - {limit}\n")
}

/// The names of a route's limits' rules.
fn rule_names(route: &Route) -> Vec<&str> {
    route.limits.iter().map(|l| l.rule().unwrap().name().expect("every route limit is named")).collect()
}

fn source(line: u32, column: u32) -> String {
    format!("{FILE}:{line}:{column}")
}

// ---------------------------------------------------------------------------
// A valid file.

const FULL: &str = "\
# Every field the gateway file has.
trusted_proxies: [10.0.0.0/8, ' 192.168.1.1 ', 'fd00::/8']
client_ip_header: Forwarded
ipv6_prefix: 64
ban_status: 403
message: Slow down, please
connect_timeout: 250ms
response_timeout: 1m
upstream_down_for: 3s
max_connections_per_ip: 0
max_header_bytes: 65536
limits:
  - key: client_ip
    requests_per_unit: 100
    unit: second
  - key: route
    name: per-route
    requests_per_unit: 5000
    window: 90s
    algorithm: counter
routes:
  - name: login
    host: Shop.Example.COM
    path_prefix: /login
    methods: [post, PUT]
    upstreams: [http://127.0.0.1:9000]
    strip_prefix: true
    preserve_host: false
    http2: false
    limits:
      - key: client_ip
        name: login-burst
        on_missing: skip
        requests_per_unit: 5
        window: 1m
        algorithm: gcra
        penalty:
          window: 10m
          warn_after: 3
          ban_after: 10
          ban_for: 1h
      - key: header:X-Api-Key
        on_missing: reject
        requests_per_unit: 50
        unit: Minute
        algorithm: fixed
  - name: grpc
    host: '*.internal.example.com'
    path_prefix: /pkg.Service/
    upstreams:
      - http://10.1.0.1:50051
      - ' http://[::1]:50052/base '
    http2: true
    limits:
      - { key: peer_ip, requests_per_unit: 1000, unit: hour, algorithm: log }
      - { key: path, on_missing: shared, requests_per_unit: 10, unit: day }
      - { key: global, requests_per_unit: 1, unit: week }
  - name: api
    upstreams: [http://api.internal:8080/v2/]
";

#[test]
fn full_file_settings() {
    let config = compiled(FULL);
    assert_eq!(config.file, Path::new(FILE));
    assert_eq!(config.hash.len(), 16, "{}", config.hash);
    assert!(config.hash.chars().all(|c| c.is_ascii_hexdigit()), "{}", config.hash);

    let s = &config.settings;
    assert_eq!(s.trusted_proxies, ["10.0.0.0/8", "192.168.1.1", "fd00::/8"]);
    assert_eq!(s.client_ip_header, ForwardedHeader::Forwarded);
    assert_eq!(s.ipv6_prefix, 64);
    assert_eq!(s.ban_status, StatusCode::FORBIDDEN);
    assert_eq!(s.message, "Slow down, please");
    assert_eq!(s.connect_timeout, Duration::from_millis(250));
    assert_eq!(s.response_timeout, Duration::from_secs(60));
    assert_eq!(s.upstream_down_for, Duration::from_secs(3));
    assert_eq!(s.max_connections_per_ip, 0);
    assert_eq!(s.max_header_bytes, 65536);
}

#[test]
fn full_file_routes() {
    let config = compiled(FULL);
    let names: Vec<&str> = config.routes.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["login", "grpc", "api"], "file order");

    let login = &config.routes[0];
    assert_eq!(login.host, Some(HostMatch::Exact("shop.example.com".into())));
    assert_eq!(login.path_prefix, "/login");
    assert_eq!(login.methods, [Method::POST, Method::PUT]);
    let upstreams: Vec<String> = login.upstreams.iter().map(ToString::to_string).collect();
    assert_eq!(upstreams, ["http://127.0.0.1:9000/"]);
    assert!(login.strip_prefix);
    assert!(!login.preserve_host);
    assert!(!login.http2);
    assert_eq!(login.source, source(22, 5));

    let grpc = &config.routes[1];
    assert_eq!(grpc.host, Some(HostMatch::Suffix(".internal.example.com".into())));
    assert_eq!(grpc.path_prefix, "/pkg.Service/");
    assert!(grpc.methods.is_empty());
    let upstreams: Vec<String> = grpc.upstreams.iter().map(ToString::to_string).collect();
    assert_eq!(upstreams, ["http://10.1.0.1:50051/", "http://[::1]:50052/base"]);
    assert_eq!(grpc.upstreams[1].port_u16(), Some(50052));
    assert_eq!(grpc.upstreams[1].path(), "/base");
    assert!(!grpc.strip_prefix);
    assert!(grpc.preserve_host);
    assert!(grpc.http2);
    assert_eq!(grpc.source, source(47, 5));

    let api = &config.routes[2];
    assert_eq!(api.host, None);
    assert_eq!(api.path_prefix, "/");
    assert!(api.methods.is_empty());
    assert_eq!(api.upstreams[0].to_string(), "http://api.internal:8080/v2/");
    assert!(!api.strip_prefix && api.preserve_host && !api.http2);
    assert_eq!(api.source, source(58, 5));
}

#[test]
fn full_file_hosts_match() {
    let config = compiled(FULL);
    let exact = config.routes[0].host.clone().unwrap();
    assert!(exact.matches("shop.example.com"));
    assert!(!exact.matches("www.shop.example.com"));
    assert!(!exact.matches("example.com"));
    assert_eq!(exact.to_string(), "shop.example.com");

    let suffix = config.routes[1].host.clone().unwrap();
    assert!(suffix.matches("a.internal.example.com"));
    assert!(suffix.matches("a.b.internal.example.com"));
    assert!(!suffix.matches("internal.example.com"), "the bare domain is not a subdomain");
    assert!(!suffix.matches(".internal.example.com"));
    assert!(!suffix.matches("evilinternal.example.com"));
    assert_eq!(suffix.to_string(), "*.internal.example.com");
}

#[test]
fn full_file_limits() {
    let config = compiled(FULL);
    let [login, grpc, api] = config.routes.as_slice() else { panic!("three routes") };

    // The gateway's limits come first, on every route, then the route's own.
    assert_eq!(
        rule_names(login),
        ["gateway.client_ip", "gateway.per-route", "login.login-burst", "login.header-x-api-key"]
    );
    assert_eq!(
        rule_names(grpc),
        ["gateway.client_ip", "gateway.per-route", "grpc.peer_ip", "grpc.path", "grpc.global"]
    );
    assert_eq!(rule_names(api), ["gateway.client_ip", "gateway.per-route"]);
    // One limit shared by the routes, not a copy each.
    for route in [grpc, api] {
        assert!(Arc::ptr_eq(&login.limits[0].limit, &route.limits[0].limit));
        assert!(Arc::ptr_eq(&login.limits[1].limit, &route.limits[1].limit));
    }

    let ip: &RouteLimit = &login.limits[0];
    assert_eq!(ip.key, KeySpec::ClientIp);
    assert_eq!(ip.missing, MissingKey::default());
    assert_eq!(ip.rule().unwrap().limit(), 100);
    assert_eq!(ip.rule().unwrap().window(), Duration::from_secs(1));
    assert_eq!(ip.rule().unwrap().algorithm(), Algorithm::SlidingLog);
    assert!(ip.rule().unwrap().penalty().is_none());
    assert_eq!(ip.limit.name.as_deref(), Some("gateway.client_ip"));
    assert_eq!(ip.limit.requests_per_unit(), 100);
    assert_eq!(ip.limit.unit, Some(Unit::Second));
    assert_eq!(ip.limit.source, source(13, 5));

    let per_route = &login.limits[1];
    assert_eq!(per_route.key, KeySpec::Route);
    assert_eq!(per_route.rule().unwrap().limit(), 5000);
    assert_eq!(per_route.rule().unwrap().window(), Duration::from_secs(90));
    assert_eq!(per_route.rule().unwrap().algorithm(), Algorithm::SLIDING_COUNTER);
    assert_eq!(per_route.limit.unit, None, "90s is no unit");
    assert_eq!(per_route.limit.source, source(16, 5));

    let burst = &login.limits[2];
    assert_eq!(burst.key, KeySpec::ClientIp);
    assert_eq!(burst.missing, MissingKey::Skip);
    assert_eq!(burst.rule().unwrap().limit(), 5);
    assert_eq!(burst.rule().unwrap().window(), Duration::from_secs(60));
    assert_eq!(burst.rule().unwrap().algorithm(), Algorithm::Gcra);
    assert_eq!(burst.limit.unit, Some(Unit::Minute), "a 1m window is a minute");
    let penalty = burst.rule().unwrap().penalty().expect("a penalty");
    assert_eq!(penalty.window(), Duration::from_secs(600));
    assert_eq!(penalty.warn_threshold(), Some(3));
    assert_eq!(penalty.ban_threshold(), Some(10));
    assert_eq!(penalty.ban_for(), Some(Duration::from_secs(3600)));
    assert_eq!(burst.limit.source, source(31, 9));

    let api_key = &login.limits[3];
    assert_eq!(api_key.key, KeySpec::Header(HeaderName::from_static("x-api-key")));
    assert_eq!(api_key.key.name(), "header:x-api-key");
    assert_eq!(api_key.missing, MissingKey::Reject);
    assert_eq!(api_key.rule().unwrap().limit(), 50);
    assert_eq!(api_key.rule().unwrap().window(), Duration::from_secs(60));
    assert_eq!(api_key.rule().unwrap().algorithm(), Algorithm::FixedWindow);
    assert_eq!(api_key.limit.unit, Some(Unit::Minute));
    assert_eq!(api_key.limit.source, source(42, 9));

    let peer = &grpc.limits[2];
    assert_eq!(peer.key, KeySpec::PeerIp);
    assert_eq!(peer.missing, MissingKey::default());
    assert_eq!(
        (peer.rule().unwrap().limit(), peer.rule().unwrap().window()),
        (1000, Duration::from_secs(3600))
    );
    assert_eq!(peer.rule().unwrap().algorithm(), Algorithm::SlidingLog);
    assert_eq!(peer.limit.source, source(55, 9));
    let path = &grpc.limits[3];
    assert_eq!(path.key, KeySpec::Path);
    assert_eq!(path.missing, MissingKey::default(), "`shared` is the default");
    assert_eq!(
        (path.rule().unwrap().limit(), path.rule().unwrap().window()),
        (10, Duration::from_secs(86_400))
    );
    let global = &grpc.limits[4];
    assert_eq!(global.key, KeySpec::Global);
    assert_eq!(
        (global.rule().unwrap().limit(), global.rule().unwrap().window()),
        (1, Duration::from_secs(7 * 86_400))
    );
    assert_eq!(global.limit.unit, Some(Unit::Week));
}

#[test]
fn default_limit_names_come_from_the_key() {
    let config = compiled(
        "\
routes:
  - name: r
    upstreams: [http://h]
    limits:
      - { key: global, requests_per_unit: 1, unit: second }
      - { key: client_ip, requests_per_unit: 1, unit: second }
      - { key: peer_ip, requests_per_unit: 1, unit: second }
      - { key: path, requests_per_unit: 1, unit: second }
      - { key: route, requests_per_unit: 1, unit: second }
      - { key: 'header: X-Tenant ', requests_per_unit: 1, unit: second }
      - { key: header:x-tenant, name: tenant-minute, requests_per_unit: 1, unit: minute }
",
    );
    assert_eq!(
        rule_names(&config.routes[0]),
        ["r.global", "r.client_ip", "r.peer_ip", "r.path", "r.route", "r.header-x-tenant", "r.tenant-minute"]
    );
    assert_eq!(config.routes[0].limits[5].key, KeySpec::Header(HeaderName::from_static("x-tenant")));
}

#[test]
fn same_key_twice_with_names_is_fine() {
    let config = compiled(
        "\
limits:
  - { key: client_ip, requests_per_unit: 100, unit: second }
routes:
  - name: r
    upstreams: [http://h]
    limits:
      - { key: client_ip, requests_per_unit: 10, unit: second }
      - { key: client_ip, name: daily, requests_per_unit: 1000, unit: day }
",
    );
    assert_eq!(rule_names(&config.routes[0]), ["gateway.client_ip", "r.client_ip", "r.daily"]);
}

#[test]
fn load_reads_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gateway.yaml");
    std::fs::write(&path, FULL).unwrap();
    let loaded = GatewayConfig::load(&path).expect("loads");
    assert_eq!(loaded.file, path);
    assert_eq!(loaded.routes.len(), 3);
    assert_eq!(loaded.routes[0].source, format!("{}:22:5", path.display()));

    // The hash is the file's name and contents: the same for the same
    // file, another for another text.
    let again = GatewayConfig::load(&path).unwrap();
    assert_eq!(loaded.hash, again.hash);
    std::fs::write(&path, FULL.replace("5000", "5001")).unwrap();
    assert_ne!(GatewayConfig::load(&path).unwrap().hash, loaded.hash);
}

// ---------------------------------------------------------------------------
// Defaults.

#[test]
fn defaults() {
    let config = compiled("routes:\n  - name: only\n    upstreams: [http://127.0.0.1:9000]\n");
    let s = &config.settings;
    assert!(s.trusted_proxies.is_empty());
    assert_eq!(s.client_ip_header, ForwardedHeader::XForwardedFor);
    assert_eq!(s.ipv6_prefix, 128);
    assert_eq!(s.ban_status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(s.message, "Too Many Requests");
    assert_eq!(s.connect_timeout, Duration::from_secs(5));
    assert_eq!(s.response_timeout, Duration::from_secs(30));
    assert_eq!(s.upstream_down_for, Duration::from_secs(10));
    assert_eq!(s.max_connections_per_ip, 256);
    assert_eq!(s.max_header_bytes, 16 * 1024);

    // The documented defaults are `GatewaySettings::default()`.
    let d = GatewaySettings::default();
    assert_eq!(
        (d.ipv6_prefix, d.ban_status, d.max_connections_per_ip, d.max_header_bytes),
        (s.ipv6_prefix, s.ban_status, s.max_connections_per_ip, s.max_header_bytes)
    );
    assert_eq!(
        (d.connect_timeout, d.response_timeout, d.upstream_down_for),
        (s.connect_timeout, s.response_timeout, s.upstream_down_for)
    );

    let [route] = config.routes.as_slice() else { panic!("one route") };
    assert_eq!(route.name, "only");
    assert_eq!(route.host, None);
    assert_eq!(route.path_prefix, "/");
    assert!(route.methods.is_empty());
    assert!(!route.strip_prefix);
    assert!(route.preserve_host);
    assert!(!route.http2);
    assert!(route.limits.is_empty());
    assert_eq!(route.source, source(2, 5));
}

#[test]
fn settings_at_their_bounds() {
    let config = compiled(
        "\
ipv6_prefix: 1
ban_status: 429
max_header_bytes: 8192
max_connections_per_ip: 1000000
connect_timeout: 24h
client_ip_header: ' X-Real-IP '
routes:
  - name: r
    upstreams: [http://h]
",
    );
    let s = &config.settings;
    assert_eq!(s.ipv6_prefix, 1);
    assert_eq!(s.ban_status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(s.max_header_bytes, MIN_HEADER_BYTES);
    assert_eq!(s.max_connections_per_ip, 1_000_000);
    assert_eq!(s.connect_timeout, Duration::from_secs(86_400));
    assert_eq!(s.client_ip_header, ForwardedHeader::XRealIp);

    let config = compiled(&with_setting(&format!("max_header_bytes: {MAX_HEADER_BYTES}\nipv6_prefix: 128")));
    assert_eq!(config.settings.max_header_bytes, 1 << 20);
    assert_eq!(config.settings.ipv6_prefix, 128);
}

// ---------------------------------------------------------------------------
// Unknown keys, per level.

#[test]
fn unknown_top_level_key() {
    let e = error(&with_setting("route_timeout: 5s"));
    assert_at(&e, 1, 1, &["route_timeout", "routes"]);

    // `route:` for `routes:`.
    let e = error("route:\n  - name: api\n    upstreams: [http://h]\n");
    assert_at(&e, 1, 1, &["unknown field `route`"]);
}

#[test]
fn unknown_route_key() {
    let e = error("routes:\n  - name: api\n    upstream: [http://h]\n");
    assert_at(&e, 3, 5, &["unknown field `upstream`", "upstreams"]);

    // A setting inside a route.
    let e = error("routes:\n  - name: api\n    upstreams: [http://h]\n    ban_status: 403\n");
    assert_at(&e, 4, 5, &["ban_status"]);
}

/// A route or limit the parser cannot read is reported and set aside; the
/// rest of the file is still read and checked, every problem in file order.
#[test]
fn shape_errors_in_several_routes_are_all_listed() {
    let all = errors(
        "\
routes:
  - name: a
    upstream: [http://h]
  - name: b
    upstreams: [http://h]
    limits:
      - { key: client_ip, requests_per_unit: [1], window: 1m }
      - { key: path, requests_per_unit: 1, window: 1m, colour: red }
  - name: c
    upstreams: [http://h]
    limits:
      - { key: client_ip, requests_per_unit: 1, unit: fortnight }
",
    );
    let found: Vec<(u32, &str)> = all.iter().map(|e| (e.line, e.message.as_str())).collect();
    assert_eq!(found.len(), 4, "{all:#?}");
    let expected = [
        (3, "unknown field `upstream`"),
        (7, "not a list or a map"),
        (8, "unknown field `colour`"),
        (12, "unknown unit `fortnight`"),
    ];
    for ((line, message), (want_line, needle)) in found.iter().zip(expected) {
        assert_eq!(*line, want_line, "{message}");
        assert!(message.contains(needle), "line {line}: {message:?} lacks {needle:?}");
    }
}

#[test]
fn a_route_that_can_never_match_is_a_warning() {
    let route = |name: &str, extra: &str| format!("  - name: {name}\n    upstreams: [http://h]\n{extra}");
    let file = |routes: &[String]| format!("routes:\n{}", routes.concat());
    let warned = |routes: &[String]| {
        let config = load(&file(routes)).unwrap_or_else(|e| panic!("it loads: {e}"));
        assert_eq!(config.routes.len(), routes.len());
        config.warnings
    };

    // A second catch-all.
    let w = warned(&[route("a", ""), route("b", "")]);
    assert_eq!(w.len(), 1, "{w:?}");
    assert_at(&w[0], 4, 5, &["route `b` can never match", "route `a` (at ", "path_prefix"]);

    // A host suffix inside an earlier one, and methods an earlier route
    // of the same prefix takes all of.
    let wide = route("wide", "    host: '*.example.com'\n");
    let narrow = route("narrow", "    host: '*.api.example.com'\n");
    let w = warned(&[wide, narrow]);
    assert_at(&w[0], 5, 5, &["route `narrow` can never match", "route `wide`"]);
    let both = route("both", "    path_prefix: /a\n    methods: [GET, POST]\n");
    let get = route("get", "    path_prefix: /a\n    methods: [GET]\n");
    assert_at(&warned(&[both.clone(), get.clone()])[0], 6, 5, &["route `get` can never match"]);

    // Reachable: the more specific route is tried first, whatever the
    // file order, and a route keeps the requests an earlier one leaves.
    let api = route("api", "    path_prefix: /api\n");
    let exact = route("exact", "    host: api.example.com\n");
    let all = route("all", "");
    for routes in [vec![all.clone(), api.clone()], vec![all.clone(), exact], vec![get, both, all]] {
        assert_eq!(warned(&routes), [], "{routes:?}");
    }
}

#[test]
fn unknown_limit_key() {
    // A rules file's `replaces` is not a gateway limit's: named as the
    // rules file's, with what the gateway does instead.
    let e = error(&with_limit("{ key: path, requests_per_unit: 1, unit: second, replaces: [] }"));
    assert_at(&e, 5, 68, &["`replaces` is a rules file's field", "every limit of a route applies"]);

    // Nor is `unlimited`.
    let e = error(&with_limit("{ key: path, requests_per_unit: 1, unit: second, unlimited: true }"));
    assert_at(&e, 5, 69, &["`unlimited` is a rules file's field", "without `limits`"]);

    // In the gateway's own limits too.
    let e = error("limits:\n  - key: path\n    rps: 5\nroutes:\n  - name: api\n    upstreams: [http://h]\n");
    assert_at(&e, 3, 5, &["unknown field `rps`"]);
}

#[test]
fn unknown_penalty_key() {
    let e = error(
        "\
routes:
  - name: api
    upstreams: [http://h]
    limits:
      - key: client_ip
        requests_per_unit: 5
        unit: second
        penalty:
          window: 1m
          ban_after: 3
          ban_for: 1h
          warn_at: 1
",
    );
    assert_at(&e, 12, 11, &["unknown field `warn_at`", "warn_after"]);
}

// ---------------------------------------------------------------------------
// Routes.

#[test]
fn no_routes() {
    let e = error("message: hello\n");
    assert_at(&e, 1, 1, &["no `routes`"]);

    // Nothing at all.
    let e = error("");
    assert_at(&e, 1, 1, &["no `routes`"]);
    let e = error("# only a comment\n\n");
    assert_at(&e, 1, 1, &["no `routes`"]);
}

#[test]
fn empty_routes() {
    let e = error("routes: []\n");
    assert_at(&e, 1, 9, &["`routes` is empty"]);
}

#[test]
fn routes_without_a_value_is_reported_where_it_stands() {
    // `routes:` with no value is reported where it stands (line 3), not
    // as a file without `routes`.
    let e = error("message: hello\n\nroutes:\n");
    assert!(e.message.contains("routes"), "{e}");
    assert_eq!(e.line, 3, "the error names the line of `routes:`: {e}");
}

#[test]
fn routes_of_the_wrong_shape() {
    let e = error("routes: {api: 1}\n");
    assert_at(&e, 1, 9, &["sequence"]);
    let e = error("routes:\n  - api\n");
    assert_at(&e, 2, 5, &["mapping"]);
    let e = error("- routes\n");
    assert_at(&e, 1, 1, &["mapping"]);
}

#[test]
fn route_without_name() {
    let e = error("routes:\n  - path_prefix: /x\n    upstreams: [http://h]\n");
    assert_at(&e, 2, 5, &["a route needs a `name`"]);
}

#[test]
fn bad_route_names() {
    for (name, column) in [("a.b", 11), ("'my route'", 11), ("''", 11), ("api/v1", 11), ("ünï", 11)] {
        let e = error(&format!("routes:\n  - name: {name}\n    upstreams: [http://h]\n"));
        assert_at(&e, 2, column, &["route name", "1 to 31 characters of A-Z a-z 0-9 _ -"]);
    }
    // 31 characters are fine, 32 are too many (`<route>.<limit>` names a
    // rule of at most 64).
    let long = "r".repeat(31);
    let config = compiled(&format!("routes:\n  - name: {long}\n    upstreams: [http://h]\n"));
    assert_eq!(config.routes[0].name, long);
    let e = error(&format!("routes:\n  - name: {long}x\n    upstreams: [http://h]\n"));
    assert_at(&e, 2, 11, &[&format!("route name `{long}x`")]);
}

#[test]
fn route_named_gateway() {
    let e = error("routes:\n  - name: gateway\n    upstreams: [http://h]\n");
    assert_at(&e, 2, 11, &["`gateway`", "call the route otherwise"]);
}

#[test]
fn duplicate_route_names() {
    let e = error(
        "\
routes:
  - name: api
    upstreams: [http://h]
  - name: other
    upstreams: [http://h]
  - name: ' api'
    upstreams: [http://h]
",
    );
    assert_at(&e, 6, 5, &["route `api` is already defined at", &source(2, 5)]);
}

#[test]
fn bad_hosts() {
    for host in [
        "'*'",
        "'*.'",
        "example.com.",
        "a..b",
        "api.example.com:8080",
        "'[::1]'",
        "a_b.com",
        "'*.*.x.com'",
        "''",
        "'a b'",
    ] {
        let e = error(&format!("routes:\n  - name: api\n    host: {host}\n    upstreams: [http://h]\n"));
        assert_at(&e, 3, 11, &["is not a host name", "*.example.com"]);
    }
    let long = format!("{}.com", "a".repeat(250));
    let e = error(&format!("routes:\n  - name: api\n    host: {long}\n    upstreams: [http://h]\n"));
    assert_at(&e, 3, 11, &["is not a host name"]);
}

#[test]
fn bad_path_prefixes() {
    for prefix in ["api", "''", "/a/../b", "/a/./b", "/..", "/a/%2E%2e/b", "'/a?x=1'", "'/a#top'", "'/a b'"] {
        let e =
            error(&format!("routes:\n  - name: api\n    path_prefix: {prefix}\n    upstreams: [http://h]\n"));
        assert_at(&e, 3, 18, &["path_prefix", "starting with `/`", "`..`"]);
    }
    // Requests are matched in their normal form; so must a prefix be written.
    for (prefix, form) in [("//api", "/api"), ("/%61pi/", "/api/"), ("/x%2a", "/x%2A")] {
        let e =
            error(&format!("routes:\n  - name: api\n    path_prefix: {prefix}\n    upstreams: [http://h]\n"));
        assert_at(&e, 3, 18, &["normal form", &format!("write `{form}`")]);
    }
    for prefix in ["/api;v=1", "'/a\\b'", "/a%2Fb", "/a%zz"] {
        let e =
            error(&format!("routes:\n  - name: api\n    path_prefix: {prefix}\n    upstreams: [http://h]\n"));
        assert_at(&e, 3, 18, &["path_prefix", "normal form"]);
    }
    // Dots inside a segment are no dot segment.
    let config =
        compiled("routes:\n  - name: api\n    path_prefix: /a..b/.well-known\n    upstreams: [http://h]\n");
    assert_eq!(config.routes[0].path_prefix, "/a..b/.well-known");
}

#[test]
fn bad_methods() {
    let all = errors("routes:\n  - name: api\n    methods: [GET, 'GE T', '']\n    upstreams: [http://h]\n");
    assert_eq!(all.len(), 2, "{all:#?}");
    assert_at(&all[0], 3, 20, &["`GE T` is not an HTTP method"]);
    assert_at(&all[1], 3, 28, &["`` is not an HTTP method"]);

    let e = error("routes:\n  - name: api\n    methods: [[GET]]\n    upstreams: [http://h]\n");
    assert_eq!((e.line, e.column), (3, 15), "{e}");
}

#[test]
fn missing_or_empty_upstreams() {
    let e = error("routes:\n  - name: api\n    path_prefix: /\n");
    assert_at(&e, 2, 5, &["a route needs `upstreams`", "http://host:port"]);
    let e = error("routes:\n  - name: api\n    upstreams: []\n");
    assert_at(&e, 3, 16, &["`upstreams` is empty"]);
}

#[test]
fn upstreams_of_other_schemes() {
    let e = error("routes:\n  - name: api\n    upstreams: [http://a, ftp://b.example.com]\n");
    assert_at(&e, 3, 27, &["ftp://b.example.com", "must start with http:// or https://"]);
    // An https:// upstream's CA file is read with the file.
    let e = error(
        "routes:\n  - name: api\n    upstreams: [https://b]\n    upstream_tls: { ca_file: /nonexistent/ca.pem }\n",
    );
    assert_at(&e, 4, 19, &["upstream_tls", "/nonexistent/ca.pem: cannot read"]);
}

#[test]
fn bad_upstreams() {
    for (upstream, needle) in [
        ("http://", "is not a URL"),
        ("http:///path", "is not a URL"),
        ("'http://a b'", "is not a URL"),
        ("ftp://h", "must start with http://"),
        ("127.0.0.1:9000", "must start with http://"),
        ("/just/a/path", "must start with http://"),
        ("http://h:9000/base?x=1", "must not have a query"),
        ("http://user:secret@h:9000", "must not carry credentials"),
        ("http://token@h", "must not carry credentials"),
    ] {
        let e = error(&format!("routes:\n  - name: api\n    upstreams:\n      - {upstream}\n"));
        assert_at(&e, 4, 9, &[needle]);
    }
}

#[test]
fn upstream_ports_out_of_range_are_refused() {
    // The URL parser keeps `:99999` though its port is no u16: unchecked,
    // the connector would dial port 80 of the host instead.
    for upstream in ["http://127.0.0.1:99999", "http://127.0.0.1:65536", "http://h:123456789"] {
        let all = errors(&format!("routes:\n  - name: api\n    upstreams: [{upstream}]\n"));
        assert_eq!(all.len(), 1, "{all:#?}");
        assert_at(&all[0], 3, 17, &[upstream]);
    }
    // The largest port is fine.
    let config = compiled("routes:\n  - name: api\n    upstreams: [http://h:65535]\n");
    assert_eq!(config.routes[0].upstreams[0].port_u16(), Some(65535));
}

#[test]
fn too_many_upstreams() {
    let list: Vec<String> = (0..=MAX_UPSTREAMS).map(|i| format!("http://10.0.0.{}:80", i % 250)).collect();
    let e = error(&format!("routes:\n  - name: api\n    upstreams: [{}]\n", list.join(", ")));
    assert_at(&e, 3, 16, &["at most 64 upstreams"]);
    // 64 are fine.
    let config = compiled(&format!("routes:\n  - name: api\n    upstreams: [{}]\n", list[1..].join(", ")));
    assert_eq!(config.routes[0].upstreams.len(), MAX_UPSTREAMS);
}

#[test]
fn too_many_routes() {
    let mut yaml = String::from("routes:\n");
    for i in 0..=MAX_ROUTES {
        yaml.push_str(&format!("  - {{ name: r{i}, upstreams: [http://h] }}\n"));
    }
    let e = error(&yaml);
    assert_at(&e, 2, 3, &["more than 1000 routes"]);
}

#[test]
fn too_many_limits_on_a_route() {
    // The gateway's limits count towards a route's 64.
    let mut yaml = String::from("limits:\n");
    for i in 0..40 {
        yaml.push_str(&format!("  - {{ key: path, name: g{i}, requests_per_unit: 1, unit: second }}\n"));
    }
    yaml.push_str("routes:\n  - name: fine\n    upstreams: [http://h]\n  - name: full\n    upstreams: [http://h]\n    limits:\n");
    for i in 0..25 {
        yaml.push_str(&format!("      - {{ key: path, name: r{i}, requests_per_unit: 1, unit: second }}\n"));
    }
    let e = error(&yaml);
    assert_at(&e, 45, 5, &["route `full` has 65 limits", "at most 64"]);
}

// ---------------------------------------------------------------------------
// Limits.

#[test]
fn limit_without_key() {
    let e = error(&with_limit("{ requests_per_unit: 1, unit: second }"));
    assert_at(&e, 5, 9, &["a limit needs a `key`", "header:<name>"]);
}

#[test]
fn unknown_limit_key_name() {
    let e = error(&with_limit("{ key: user, requests_per_unit: 1, unit: second }"));
    assert_at(&e, 5, 16, &["unknown key `user`", "client_ip"]);
    // `header` without a name.
    let e = error(&with_limit("{ key: header, requests_per_unit: 1, unit: second }"));
    assert_at(&e, 5, 16, &["unknown key `header`"]);
}

#[test]
fn bad_header_name() {
    let e = error(&with_limit("{ key: 'header:x api', requests_per_unit: 1, unit: second }"));
    assert_at(&e, 5, 16, &["`x api` is not a header name"]);
    let e = error(&with_limit("{ key: 'header:', requests_per_unit: 1, unit: second }"));
    assert_at(&e, 5, 16, &["is not a header name"]);
    let e = error(&with_limit("{ key: 'header:x-é', requests_per_unit: 1, unit: second }"));
    assert_at(&e, 5, 16, &["is not a header name"]);
}

#[test]
fn unknown_on_missing() {
    let e = error(&with_limit("{ key: path, on_missing: drop, requests_per_unit: 1, unit: second }"));
    assert_at(&e, 5, 34, &["unknown `on_missing: drop`", "shared, skip or reject"]);
}

#[test]
fn bad_limit_names() {
    let e = error(&with_limit("{ key: path, name: a.b, requests_per_unit: 1, unit: second }"));
    assert_at(&e, 5, 28, &["limit name `a.b`", "1 to 31 characters"]);
    let e = error(&with_limit(&format!(
        "{{ key: path, name: {}, requests_per_unit: 1, unit: second }}",
        "n".repeat(32)
    )));
    assert_at(&e, 5, 28, &["limit name"]);
}

#[test]
fn longest_route_and_limit_names_fit_together() {
    // A route name and a limit name each as long as allowed make a rule
    // name that fits (a name never written is never what is refused).
    let long = "n".repeat(31);
    let yaml = format!(
        "routes:\n  - name: {long}\n    upstreams: [http://h]\n    limits:\n      - {{ key: path, name: {long}, requests_per_unit: 1, unit: second }}\n"
    );
    if let Err(ConfigErrors(all)) = GatewayConfig::from_text(Path::new(FILE), &yaml) {
        for e in &all {
            assert!(!e.message.contains("cannot be enforced"), "{e}");
            assert!((e.line, e.column) == (2, 11) || (e.line, e.column) == (5, 28), "at a name: {e}");
        }
    }
}

#[test]
fn zero_requests_per_unit() {
    let e = error(&with_limit("{ key: path, requests_per_unit: 0, unit: second }"));
    assert_at(&e, 5, 9, &["`requests_per_unit` must be at least 1"]);
    // With a penalty: the penalty is what is wrong.
    let e = error(&with_limit(
        "{ key: path, requests_per_unit: 0, unit: second, penalty: { window: 1m, warn_after: 1 } }",
    ));
    assert_at(&e, 5, 67, &["a penalty has nothing to add"]);
    // A gateway limit of 0.
    let e = error(
        "limits:\n  - { key: path, requests_per_unit: 0, unit: second }\nroutes:\n  - name: a\n    upstreams: [http://h]\n",
    );
    assert_at(&e, 2, 5, &["must be at least 1"]);
}

#[test]
fn bad_requests_per_unit() {
    let e = error(&with_limit("{ key: path, requests_per_unit: -1, unit: second }"));
    assert_at(&e, 5, 41, &["`requests_per_unit` must be 0 or more, got -1"]);
    let e = error(&with_limit("{ key: path, requests_per_unit: 1.5, unit: second }"));
    assert_at(&e, 5, 41, &["whole number", "1.5"]);
    let e = error(&with_limit("{ key: path, requests_per_unit: lots, unit: second }"));
    assert_at(&e, 5, 41, &["whole number", "lots"]);
    let e = error(&with_limit("{ key: path, requests_per_unit: 4294967296, unit: second }"));
    assert_at(&e, 5, 41, &["at most 4294967295"]);
    let e = error(&with_limit("{ key: path, unit: second }"));
    assert_at(&e, 5, 9, &["needs `requests_per_unit`"]);
}

#[test]
fn missing_unit_and_window() {
    let e = error(
        "\
routes:
  - name: api
    upstreams: [http://h]
    limits:
      - key: global
        requests_per_unit: 3
",
    );
    assert_at(&e, 5, 9, &["`unit`", "`window`"]);
}

#[test]
fn missing_unit_and_window_suggests_only_what_a_gateway_limit_takes() {
    // The message names what a gateway limit takes (not `unlimited`, which
    // the rules files take and a gateway limit refuses).
    let e = error(&with_limit("{ key: global, requests_per_unit: 3 }"));
    assert_at(&e, 5, 9, &["`unit`", "`window`"]);
    assert!(!e.message.contains("unlimited"), "suggests a field the gateway refuses: {e}");
}

#[test]
fn unit_and_window_both() {
    let e = error(&with_limit("{ key: path, requests_per_unit: 1, unit: second, window: 5m }"));
    assert_at(&e, 5, 66, &["give `unit` or `window`, not both"]);
}

#[test]
fn bad_unit() {
    let e = error(&with_limit("{ key: path, requests_per_unit: 1, unit: fortnight }"));
    assert_at(&e, 5, 50, &["unknown unit `fortnight`", "second, minute"]);
}

#[test]
fn bad_windows() {
    let e = error(&with_limit("{ key: path, requests_per_unit: 1, window: 5 parsecs }"));
    assert_at(&e, 5, 52, &["`window: 5 parsecs`", "90s"]);
    let e = error(&with_limit("{ key: path, requests_per_unit: 1, window: 0s }"));
    assert_at(&e, 5, 52, &["`window` must be longer than zero"]);
    let e = error(&with_limit("{ key: path, requests_per_unit: 1, window: 400d }"));
    assert_at(&e, 5, 52, &["`window: 400d`", "366 days"]);
    let e = error(&with_limit("{ key: path, requests_per_unit: 1, window: 1500us }"));
    assert_at(&e, 5, 9, &["cannot be enforced", "milliseconds"]);
}

#[test]
fn bad_algorithm() {
    let e = error(&with_limit("{ key: path, requests_per_unit: 1, unit: second, algorithm: leaky }"));
    assert_at(&e, 5, 69, &["unknown algorithm `leaky`", "log, counter, fixed or gcra"]);
    // An algorithm the rule cannot take (more counter buckets than milliseconds).
    let e = error(&with_limit("{ key: path, requests_per_unit: 1, window: 5ms, algorithm: counter }"));
    assert_at(&e, 5, 9, &["cannot be enforced", "buckets"]);
}

/// The one limit of route `api` with `penalty` (block style, from 8:9).
fn with_penalty(penalty: &str) -> String {
    format!(
        "routes:\n  - name: api\n    upstreams: [http://h]\n    limits:\n      - key: client_ip\n        requests_per_unit: 5\n        unit: second\n        penalty:\n{penalty}"
    )
}

#[test]
fn penalty_problems() {
    // No window: said at the penalty (see the next test).
    let e = error(&with_penalty("          ban_after: 3\n          ban_for: 1h\n"));
    assert_at(&e, 9, 11, &["a `penalty` needs a `window`"]);
    // A window that is no duration.
    let e = error(&with_penalty("          window: soon\n"));
    assert_at(&e, 9, 19, &["penalty `window: soon`"]);
    // A zero window.
    let e = error(&with_penalty("          window: 0s\n"));
    assert_at(&e, 9, 19, &["penalty:", "violation window"]);
    // A warning after no violation.
    let e = error(&with_penalty("          window: 1m\n          warn_after: 0\n"));
    assert_at(&e, 10, 23, &["penalty:", "warn_after"]);
    // A ban without its length, a length without its ban.
    let e = error(&with_penalty("          window: 1m\n          ban_after: 3\n"));
    assert_at(&e, 10, 22, &["`ban_after` needs `ban_for`"]);
    let e = error(&with_penalty("          window: 1m\n          ban_for: 1h\n"));
    assert_at(&e, 10, 20, &["`ban_for` needs `ban_after`"]);
    // A ban length that is no duration.
    let e =
        error(&with_penalty("          window: 1m\n          ban_after: 3\n          ban_for: forever\n"));
    assert_at(&e, 11, 20, &["penalty `ban_for: forever`"]);
    // The warning after the ban.
    let e = error(&with_penalty(
        "          window: 1m\n          warn_after: 5\n          ban_after: 3\n          ban_for: 1h\n",
    ));
    assert_at(&e, 5, 9, &["warn_after (5) must be below ban_after (3)"]);
    // A negative count.
    let e = error(&with_penalty("          window: 1m\n          warn_after: -1\n"));
    assert_eq!(e.line, 10, "{e}");
    // Not a mapping.
    let e = error(&with_penalty("          - 1m\n"));
    assert_eq!(e.line, 9, "{e}");
}

#[test]
fn penalty_without_window_is_reported_at_the_penalty() {
    // A penalty without `window` is reported at the penalty, as every other
    // missing field is (the YAML reader would report it at the mapping's
    // last key, a line with nothing wrong).
    let e = error(&with_penalty("          ban_after: 3\n          ban_for: 1h\n"));
    assert_at(&e, 9, 11, &["window"]);
    let e = error(&with_limit(
        "{ key: path, requests_per_unit: 1, unit: second, penalty: { warn_after: 1, ban_after: 3, ban_for: 1h } }",
    ));
    assert_at(&e, 5, 67, &["window"]);
}

#[test]
fn two_unnamed_limits_with_the_same_key() {
    let e = error(
        "\
routes:
  - name: api
    upstreams: [http://h]
    limits:
      - { key: client_ip, requests_per_unit: 1, unit: second }
      - { key: client_ip, requests_per_unit: 10, unit: minute }
",
    );
    assert_at(&e, 6, 9, &["two limits of `api` are called `client_ip`", &source(5, 9), "give each a `name`"]);

    // In the gateway's own limits.
    let e = error(
        "\
limits:
  - { key: header:x-user, requests_per_unit: 1, unit: second }
  - { key: 'header:X-User', requests_per_unit: 10, unit: minute }
routes:
  - name: api
    upstreams: [http://h]
",
    );
    assert_at(&e, 3, 5, &["two limits of `gateway` are called `header-x-user`", "give each a `name`"]);

    // A name equal to another limit's default name.
    let e = error(&format!(
        "{}      - {{ key: path, name: client_ip, requests_per_unit: 1, unit: second }}\n",
        with_limit("{ key: client_ip, requests_per_unit: 1, unit: second }")
    ));
    assert_at(&e, 6, 9, &["called `client_ip`"]);
}

// ---------------------------------------------------------------------------
// Settings.

#[test]
fn bad_trusted_proxies() {
    let all = errors(&with_setting("trusted_proxies: [10.0.0.0/8, 10.0.0.0/33, proxy.local]"));
    assert_eq!(all.len(), 2, "{all:#?}");
    assert_at(&all[0], 1, 31, &["10.0.0.0/33", "neither an IP address nor a CIDR range"]);
    assert_at(&all[1], 1, 44, &["proxy.local"]);
    let e = error(&with_setting("trusted_proxies: 10.0.0.0/8"));
    assert_eq!(e.line, 1, "{e}");
}

#[test]
fn bad_client_ip_header() {
    let e = error(&with_setting("client_ip_header: X-Client-IP"));
    assert_at(
        &e,
        1,
        19,
        &["unknown `client_ip_header: x-client-ip`", "x-forwarded-for, forwarded or x-real-ip"],
    );
}

#[test]
fn bad_ipv6_prefix() {
    for bits in ["0", "129", "-1"] {
        let e = error(&with_setting(&format!("ipv6_prefix: {bits}")));
        assert_at(&e, 1, 14, &["`ipv6_prefix` must be from 1 to 128", &format!("got {bits}")]);
    }
    let e = error(&with_setting("ipv6_prefix: /64"));
    assert_at(&e, 1, 14, &["`ipv6_prefix` must be a whole number, got `/64`"]);
}

#[test]
fn bad_ban_status() {
    let e = error(&with_setting("ban_status: 500"));
    assert_at(&e, 1, 13, &["`ban_status` must be 429 or 403, got 500"]);
    let e = error(&with_setting("ban_status: 404"));
    assert_at(&e, 1, 13, &["`ban_status` must be 429 or 403, got 404"]);
    let e = error(&with_setting("ban_status: Forbidden"));
    assert_at(&e, 1, 13, &["`ban_status` must be 429 or 403, got `Forbidden`"]);
    // Written as text, a number is still one.
    assert_eq!(compiled(&with_setting("ban_status: '403'")).settings.ban_status, StatusCode::FORBIDDEN);
}

#[test]
fn bad_message() {
    let e = error(&with_setting("message: '  '"));
    assert_at(&e, 1, 10, &["`message` must be 1 to 1024 bytes"]);
    let e = error(&with_setting(&format!("message: {}", "x".repeat(1025))));
    assert_at(&e, 1, 10, &["`message`"]);
}

#[test]
fn bad_timeouts() {
    for what in ["connect_timeout", "response_timeout", "upstream_down_for"] {
        let column = u32::try_from(what.len()).unwrap() + 3;
        let e = error(&with_setting(&format!("{what}: 0s")));
        assert_at(&e, 1, column, &[what, "longer than zero and at most 24h"]);
        let e = error(&with_setting(&format!("{what}: 25h")));
        assert_at(&e, 1, column, &[what, "at most 24h"]);
        let e = error(&with_setting(&format!("{what}: soon")));
        assert_at(&e, 1, column, &[&format!("`{what}: soon`"), "500ms, 5s or 1m"]);
        let e = error(&with_setting(&format!("{what}: 5")));
        assert_at(&e, 1, column, &[&format!("`{what}: 5`"), "time unit"]);
    }
}

#[test]
fn bad_max_header_bytes() {
    let e = error(&with_setting("max_header_bytes: 8191"));
    assert_at(&e, 1, 19, &["`max_header_bytes` must be from 8192 to 1048576, got 8191"]);
    let e = error(&with_setting("max_header_bytes: 1048577"));
    assert_at(&e, 1, 19, &["from 8192 to 1048576, got 1048577"]);
    let e = error(&with_setting("max_header_bytes: 16KiB"));
    assert_at(&e, 1, 19, &["whole number", "16KiB"]);
}

#[test]
fn bad_max_connections_per_ip() {
    let e = error(&with_setting("max_connections_per_ip: -1"));
    assert_at(&e, 1, 25, &["`max_connections_per_ip` must be from 0 to 1000000, got -1"]);
    let e = error(&with_setting("max_connections_per_ip: 1000001"));
    assert_at(&e, 1, 25, &["got 1000001"]);
    let e = error(&with_setting("max_connections_per_ip: 99999999999999999999999"));
    assert_eq!((e.line, e.column), (1, 25), "{e}");
}

// ---------------------------------------------------------------------------
// Every problem at once.

#[test]
fn several_problems_are_all_reported() {
    let yaml = "\
ipv6_prefix: 0
ban_status: 500
connect_timeout: 0s
max_header_bytes: 100
max_connections_per_ip: -1
trusted_proxies: [nope]
client_ip_header: via
limits:
  - { key: nobody, requests_per_unit: 1, unit: second }
routes:
  - name: first
    host: 'bad host'
    path_prefix: nope
    methods: ['B AD']
    upstreams: [ftp://aaa, http://b?q]
  - name: second
    upstreams: []
    limits:
      - { key: path, requests_per_unit: 1, unit: sec }
      - { key: path, requests_per_unit: 1, window: 1m, algorithm: best }
      - { key: path, on_missing: maybe, requests_per_unit: 1, unit: second }
  - name: third
    upstreams: [http://c]
  - name: third
    upstreams: [http://d]
  - upstreams: [http://e]
";
    let mut all = errors(yaml);
    all.sort_by_key(|e| (e.line, e.column));
    let positions: Vec<(u32, u32)> = all.iter().map(|e| (e.line, e.column)).collect();
    assert_eq!(
        positions,
        [
            (1, 14),
            (2, 13),
            (3, 18),
            (4, 19),
            (5, 25),
            (6, 19),
            (7, 19),
            (9, 12),
            (12, 11),
            (13, 18),
            (14, 15),
            (15, 17),
            (15, 28),
            (17, 16),
            (19, 50),
            (20, 67),
            (21, 34),
            (24, 5),
            (26, 5),
        ],
        "{all:#?}"
    );
    for (e, needle) in all.iter().zip([
        "ipv6_prefix",
        "ban_status",
        "connect_timeout",
        "max_header_bytes",
        "max_connections_per_ip",
        "nope",
        "client_ip_header",
        "unknown key `nobody`",
        "host",
        "path_prefix",
        "B AD",
        "must start with http:// or https://",
        "must not have a query",
        "`upstreams` is empty",
        "unknown unit `sec`",
        "unknown algorithm `best`",
        "on_missing",
        "route `third` is already defined at gateway/test.yaml:22:5",
        "needs a `name`",
    ]) {
        assert!(e.message.contains(needle), "`{needle}` missing from: {e}");
        assert_eq!(e.file, Path::new(FILE));
    }
}

#[test]
fn every_problem_of_a_badly_named_route_is_reported() {
    // A route whose name is missing or invalid has its limits checked too:
    // every problem is found in one run.
    let all = errors(
        "\
routes:
  - name: a.b
    host: 'bad host'
    upstreams: [http://h]
    limits:
      - { key: nobody, requests_per_unit: 1, unit: second }
  - host: 'worse host'
    upstreams: [http://h]
    limits:
      - { key: path, requests_per_unit: 1, unit: fortnight }
",
    );
    let positions: Vec<(u32, u32)> = all.iter().map(|e| (e.line, e.column)).collect();
    for at in [(2, 11), (3, 11), (6, 16), (7, 5), (7, 11), (10, 50)] {
        assert!(positions.contains(&at), "no error at {at:?}: {all:#?}");
    }
}

#[test]
fn a_duplicate_of_a_refused_route_is_reported() {
    // A second `api` is a duplicate even when the first has a problem of
    // its own.
    let all = errors(
        "\
routes:
  - name: api
    upstreams: [ftp://h]
  - name: api
    upstreams: [http://h]
",
    );
    let positions: Vec<(u32, u32)> = all.iter().map(|e| (e.line, e.column)).collect();
    assert!(positions.contains(&(3, 17)), "{all:#?}");
    assert!(positions.contains(&(4, 5)), "the second `api` is reported: {all:#?}");
}

// ---------------------------------------------------------------------------
// Reading files.

#[test]
fn missing_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent.yaml");
    let ConfigErrors(all) = GatewayConfig::load(&path).expect_err("no such file");
    assert_eq!(all.len(), 1, "{all:#?}");
    assert_whole(&all[0], &path, &["cannot read"]);
}

#[test]
fn errors_name_the_file_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gateway.yaml");
    std::fs::write(&path, "routes:\n  - name: api\n    upstreams: [ftp://h]\n").unwrap();
    let errors = GatewayConfig::load(&path).expect_err("ftp");
    assert_eq!(errors.errors().len(), 1);
    let e = &errors.errors()[0];
    assert_eq!((e.file.as_path(), e.line, e.column), (path.as_path(), 3, 17));
    assert_eq!(errors.to_string(), format!("{}:3:17: {}", path.display(), e.message));
}

#[test]
fn non_utf8_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("latin1.yaml");
    std::fs::write(&path, b"message: caf\xe9\nroutes:\n  - name: a\n    upstreams: [http://h]\n").unwrap();
    let ConfigErrors(all) = GatewayConfig::load(&path).expect_err("not UTF-8");
    assert_eq!(all.len(), 1, "{all:#?}");
    assert_whole(&all[0], &path, &["UTF-8", "12"]);
}

#[test]
fn oversized_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.yaml");
    let mut text = b"routes:\n  - name: a\n    upstreams: [http://h]\n".to_vec();
    text.resize(usize::try_from(MAX_FILE_BYTES).unwrap() + 1, b'#');
    std::fs::write(&path, &text).unwrap();
    let ConfigErrors(all) = GatewayConfig::load(&path).expect_err("too big");
    assert_eq!(all.len(), 1, "{all:#?}");
    assert_whole(&all[0], &path, &[&(MAX_FILE_BYTES + 1).to_string(), &MAX_FILE_BYTES.to_string()]);

    // Exactly the limit is read (and is a valid file, mostly comment).
    text.truncate(usize::try_from(MAX_FILE_BYTES).unwrap());
    std::fs::write(&path, &text).unwrap();
    assert!(GatewayConfig::load(&path).is_ok());
}

// ---------------------------------------------------------------------------
// Hostile input.

/// Runs `f` on a thread of its own (std's default stack, as a server's
/// worker threads have) and joins it: a panic fails the test.
fn on_a_thread(f: impl FnOnce() + Send + 'static) {
    std::thread::spawn(f).join().expect("the gateway loader panicked");
}

/// A deterministic byte stream (xorshift64*).
fn random_bytes(len: usize, mut seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        seed ^= seed >> 12;
        seed ^= seed << 25;
        seed ^= seed >> 27;
        out.extend_from_slice(&seed.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(len);
    out
}

#[test]
fn random_bytes_are_an_error() {
    on_a_thread(|| {
        // From disk: not UTF-8.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("random.yaml");
        std::fs::write(&path, random_bytes(1 << 20, 0x5EED_1234_ABCD_0001)).unwrap();
        let ConfigErrors(all) = GatewayConfig::load(&path).expect_err("random bytes");
        assert_eq!(all.len(), 1, "{all:#?}");
        assert_whole(&all[0], &path, &["UTF-8"]);

        // As text (lossy), through the YAML reader.
        for seed in [1u64, 2, 3] {
            let text = String::from_utf8_lossy(&random_bytes(1 << 20, seed)).into_owned();
            assert!(!errors(&text).is_empty());
        }
        // Random YAML-ish ASCII: lines, colons, dashes, anchors, brackets.
        for seed in [4u64, 5, 6] {
            let text: String = random_bytes(1 << 20, seed)
                .into_iter()
                .map(|b| match b % 100 {
                    0..=9 => '\n',
                    10..=14 => ':',
                    15..=24 => ' ',
                    25..=27 => '-',
                    28 => '&',
                    29 => '*',
                    30 => '[',
                    31 => '{',
                    32 => ']',
                    33 => '}',
                    n => char::from(b'a' + (n % 26)),
                })
                .collect();
            assert!(!errors(&text).is_empty());
        }
    });
}

#[test]
fn deeply_nested_documents_are_an_error() {
    on_a_thread(|| {
        let depth = 10_000;
        let deep = |open: &str, close: &str| format!("{}1{}", open.repeat(depth), close.repeat(depth));
        for yaml in [
            // The whole document.
            deep("[", "]"),
            deep("{a: ", "}"),
            // Where routes stand.
            format!("routes: {}\n", deep("[", "]")),
            // Under an unknown key.
            format!("extra: {}\nroutes: []\n", deep("{a: ", "}")),
            // Where a number stands (read as any scalar first).
            format!("ipv6_prefix: {}\nroutes: []\n", deep("[", "]")),
            with_limit(&format!("{{ key: path, requests_per_unit: {}, unit: second }}", deep("[", "]"))),
            // In a penalty, the deepest level a file has.
            with_limit(&format!(
                "{{ key: path, requests_per_unit: 1, unit: second, penalty: {} }}",
                deep("{window: ", "}")
            )),
        ] {
            let all = errors(&yaml);
            assert!(all.len() < 10, "one error, not one per level: {all:#?}");
        }

        // Block style: routes in routes.
        let mut yaml = String::from("routes:\n");
        for level in 0..2_000 {
            yaml.push_str(&format!("{}  - limits:\n", " ".repeat(level * 4)));
        }
        assert!(errors(&yaml).len() < 10);
    });
}

#[test]
fn nesting_just_past_the_budget_is_an_error() {
    on_a_thread(|| {
        for depth in [8, 12, 15, 16, 17, 20, 32, 33, 64] {
            let yaml = format!("routes: {}1{}\n", "[".repeat(depth), "]".repeat(depth));
            let all = errors(&yaml);
            assert!(!all.is_empty() && all.len() < 10, "depth {depth}: {all:#?}");
        }
    });
}

/// A "billion laughs" document: 9 levels of 9 aliases (9^9 leaves if
/// expanded), under `indent`.
fn laughs(indent: &str) -> String {
    let mut yaml = format!("{indent}lol0: &lol0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for level in 1..=9 {
        let refs: Vec<String> = (0..9).map(|_| format!("*lol{}", level - 1)).collect();
        yaml.push_str(&format!("{indent}lol{level}: &lol{level} [{}]\n", refs.join(", ")));
    }
    yaml
}

/// The same bomb as one flow sequence, each level anchored in it and
/// aliasing the one before: where a value is read whole (a number is read
/// as any scalar first), every alias would be expanded.
fn laughs_flow() -> String {
    let mut items = vec!["&l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]".to_owned()];
    for level in 1..=9 {
        let refs = vec![format!("*l{}", level - 1); 9];
        items.push(format!("&l{level} [{}]", refs.join(", ")));
    }
    format!("[{}]", items.join(", "))
}

#[test]
fn alias_bomb_is_an_error() {
    on_a_thread(|| {
        // At the top level, where unknown keys fail the file anyway.
        assert!(!errors(&format!("{}routes: *lol9\n", laughs(""))).is_empty());
        // Under an unknown key of a route.
        let yaml = format!(
            "routes:\n  - name: api\n    upstreams: [http://h]\n    x-anchors:\n{}",
            laughs("      ")
        );
        assert!(!errors(&yaml).is_empty());
        // Where settings are read.
        for field in [
            "ipv6_prefix",
            "ban_status",
            "max_header_bytes",
            "max_connections_per_ip",
            "message",
            "connect_timeout",
            "trusted_proxies",
            "limits",
            "routes",
        ] {
            let yaml = format!("{field}: {}\nroutes: []\n", laughs_flow());
            assert!(!errors(&yaml).is_empty(), "{field}");
        }
        // Where a limit's fields are read.
        for field in ["requests_per_unit", "key", "penalty", "window"] {
            let yaml = with_limit(&format!("{{ {field}: {} }}", laughs_flow()));
            assert!(!errors(&yaml).is_empty(), "{field}");
        }
        // Where a route's are.
        for field in ["name", "upstreams", "methods", "limits"] {
            let yaml = format!("routes:\n  - {{ {field}: {} }}\n", laughs_flow());
            assert!(!errors(&yaml).is_empty(), "{field}");
        }
    });
}

#[test]
fn a_few_aliases_are_fine() {
    let config = compiled(
        "\
routes:
  - name: a
    upstreams: &upstreams [http://10.0.0.1:80, http://10.0.0.2:80]
    limits:
      - &per-ip { key: client_ip, requests_per_unit: 5, unit: second }
  - name: b
    upstreams: *upstreams
    limits:
      - *per-ip
",
    );
    assert_eq!(config.routes[1].upstreams.len(), 2);
    assert_eq!(rule_names(&config.routes[1]), ["b.client_ip"]);
}

#[test]
fn path_buf_file_names_are_kept() {
    // A file name with spaces and dots, as the errors show it.
    let file = PathBuf::from("conf dir/gate.way.yaml");
    let ConfigErrors(all) =
        GatewayConfig::from_text(&file, "routes:\n  - name: a\n").expect_err("no upstreams");
    assert_eq!(all[0].file, file);
    assert_eq!(all[0].to_string(), format!("conf dir/gate.way.yaml:2:5: {}", all[0].message));
}

/// examples/gateway/gateway.yaml, which the README runs as written, loads.
#[test]
fn the_example_gateway_file_loads() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/gateway/gateway.yaml");
    let config = GatewayConfig::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<&str> = config.routes.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["login", "api", "site"]);
    assert_eq!(config.settings.ban_status, StatusCode::FORBIDDEN);
    assert_eq!(rule_names(&config.routes[0]), ["gateway.client_ip", "login.client_ip"]);
    assert_eq!(rule_names(&config.routes[1]), ["gateway.client_ip", "api.header-x-api-key"]);
    assert!(
        config.routes[0].limits[1].rule().unwrap().penalty().is_some(),
        "the login limit bans repeat offenders"
    );
}
