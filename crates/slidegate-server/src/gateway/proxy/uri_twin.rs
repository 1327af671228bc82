//! The twin of [`Target::upstream_uri`]'s shortcut: a request's own path
//! and query, passed on as they are when nothing is to change, are what
//! the general path builds from them.

use std::path::Path;

use http::Uri;

use super::{Clients, Target};
use crate::config::GatewayConfig;

/// The target of a route to `upstream` (no base path, no prefix cut).
fn target(upstream: &str, http2: bool) -> Target {
    let yaml = format!("routes:\n  - name: r\n    http2: {http2}\n    upstreams: [{upstream}]\n");
    let config = GatewayConfig::from_text(Path::new("gateway.yaml"), &yaml)
        .unwrap_or_else(|e| panic!("the gateway file loads: {e}"));
    let (route, settings) = (&config.routes[0], &config.settings);
    let trust = slidegate_tower::ClientIp::trusting(&settings.trusted_proxies).expect("no proxies");
    Target::new(route, settings, &Clients::new(settings), trust, Default::default())
}

#[test]
fn a_path_passed_on_as_it_is_is_what_the_general_path_builds() {
    for http2 in [false, true] {
        let shortcut = target("http://127.0.0.1:9000", http2);
        // Cutting an empty prefix changes nothing, but takes the general path.
        let mut general = target("http://127.0.0.1:9000", http2);
        general.strip_prefix = Some(String::new());
        for uri in
            ["/", "/a?b=c", "/a/b/", "/%20x?q=%2F&r", "/a?", "/?", "/a//b?x=1&x=2", "http://h.test/p?q"]
        {
            let uri: Uri = uri.parse().expect("a URI");
            assert!(shortcut.strip_prefix.is_none() && shortcut.upstreams[0].base_path.is_empty());
            let (fast, slow) = (shortcut.upstream_uri(0, &uri), general.upstream_uri(0, &uri));
            assert_eq!(fast, slow, "{uri} (http2: {http2})");
            assert!(fast.is_some(), "{uri}");
        }
    }
}
