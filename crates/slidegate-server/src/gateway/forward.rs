//! What a proxy changes in the headers it passes on: hop-by-hop headers
//! removed (RFC 9110 §7.6.1), the forwarding headers set.

use std::net::{IpAddr, SocketAddr};

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

/// Headers that describe one connection, never passed on. (`Trailer`,
/// which announces the trailer fields, is end to end: an HTTP/1.1 server
/// sends only the trailers it names.)
const HOP_BY_HOP: [HeaderName; 7] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

const PROXY_CONNECTION: HeaderName = HeaderName::from_static("proxy-connection");
const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");

/// In a request's extensions when its connection came over TLS: the
/// forwarding headers say `https`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OverTls;

/// Whether `headers` ask to switch protocols (`Connection: upgrade` and an
/// `Upgrade`), e.g. a WebSocket handshake.
pub(super) fn is_upgrade(headers: &HeaderMap) -> bool {
    headers.contains_key(header::UPGRADE) && has_token(headers, header::CONNECTION, "upgrade")
}

fn has_token(headers: &HeaderMap, name: HeaderName, token: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

/// Removes the hop-by-hop headers, and those `Connection` names. An
/// upgrade keeps `Upgrade` and `Connection: upgrade` (the upstream must
/// see the handshake); `TE: trailers` stays (gRPC needs it).
pub(super) fn remove_hop_by_hop(headers: &mut HeaderMap, upgrade: bool) {
    // One pass over the names finds the usual case, a head with none of
    // them, without hashing each of the ten names to remove it.
    let mut present = headers.keys().filter(|name| HOP_BY_HOP.contains(name) || **name == PROXY_CONNECTION);
    match (present.next(), present.next()) {
        (None, _) => return,
        // The other usual case: an answer's `Connection: keep-alive`, which
        // names no header to remove but `Keep-Alive` (absent here). A
        // `close` token names a header `close`: the general path removes it.
        (Some(name), None) if *name == header::CONNECTION && !upgrade && only_keep_alive(headers) => {
            headers.remove(header::CONNECTION);
            return;
        }
        _ => {}
    }
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|t| HeaderName::from_bytes(t.trim().as_bytes()).ok())
        .collect();
    let upgrade_value = if upgrade { headers.get(header::UPGRADE).cloned() } else { None };
    let trailers = has_token(headers, header::TE, "trailers");
    for name in named {
        headers.remove(name);
    }
    for name in HOP_BY_HOP {
        headers.remove(name);
    }
    headers.remove(PROXY_CONNECTION);
    if let Some(value) = upgrade_value {
        headers.insert(header::UPGRADE, value);
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    }
    if trailers {
        headers.insert(header::TE, HeaderValue::from_static("trailers"));
    }
}

/// Whether every `Connection` token is `keep-alive`.
fn only_keep_alive(headers: &HeaderMap) -> bool {
    headers.get_all(header::CONNECTION).iter().all(|value| {
        value
            .to_str()
            .is_ok_and(|value| value.split(',').all(|t| t.trim().eq_ignore_ascii_case("keep-alive")))
    })
}

/// Sets `X-Forwarded-For`, `-Proto`, `-Host` and `Forwarded` for a request
/// from `peer` for `host`. A trusted peer's are extended (it is a proxy
/// whose own forwarding headers are believed); anybody else's are
/// replaced, so an upstream never believes what a client wrote.
pub(super) fn set_forwarding(
    headers: &mut HeaderMap,
    peer: SocketAddr,
    trusted: bool,
    host_value: Option<&HeaderValue>,
    https: bool,
) {
    let proto = if https { "https" } else { "http" };
    let host = host_value.and_then(|h| h.to_str().ok());
    let ip = peer.ip().to_canonical();
    let mut xff = String::with_capacity(64);
    let mut forwarded = String::with_capacity(64 + host.map_or(0, str::len));
    // The four set below, in one growth of the map at most.
    headers.reserve(4);
    if trusted {
        if let Some(previous) = joined(headers, &X_FORWARDED_FOR) {
            xff.push_str(&previous);
            xff.push_str(", ");
        }
        if let Some(previous) = joined(headers, &header::FORWARDED) {
            forwarded.push_str(&previous);
            forwarded.push_str(", ");
        }
    } else {
        for name in [X_FORWARDED_FOR, X_FORWARDED_PROTO, X_FORWARDED_HOST, header::FORWARDED] {
            headers.remove(name);
        }
    }
    push_ip(&mut xff, ip);
    set(headers, X_FORWARDED_FOR, xff);
    if !trusted || !headers.contains_key(X_FORWARDED_PROTO) {
        headers.insert(X_FORWARDED_PROTO, HeaderValue::from_static(proto));
    }
    if let (Some(value), Some(_)) = (host_value, host)
        && (!trusted || !headers.contains_key(X_FORWARDED_HOST))
    {
        headers.insert(X_FORWARDED_HOST, value.clone());
    }
    // An IPv6 node is quoted and bracketed (RFC 7239 §6).
    let v6 = ip.is_ipv6();
    forwarded.push_str(if v6 { "for=\"[" } else { "for=" });
    push_ip(&mut forwarded, ip);
    forwarded.push_str(if v6 { "]\";proto=" } else { ";proto=" });
    forwarded.push_str(proto);
    if let Some(host) = host {
        forwarded.push_str(";host=\"");
        forwarded.extend(host.chars().filter(|c| *c != '"' && *c != '\\'));
        forwarded.push('"');
    }
    set(headers, header::FORWARDED, forwarded);
}

/// Writes `ip` as text: an IPv4 address's four numbers through `itoa`
/// (the formatter's padding support costs more than the address), IPv6
/// through the formatter.
fn push_ip(out: &mut String, ip: IpAddr) {
    match ip {
        IpAddr::V4(v4) => {
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    out.push('.');
                }
                out.push_str(itoa::Buffer::new().format(octet));
            }
        }
        IpAddr::V6(v6) => {
            use std::fmt::Write as _;
            let _ = write!(out, "{v6}");
        }
    }
}

/// A header's values joined with `, ` (several lines are one list).
fn joined(headers: &HeaderMap, name: &HeaderName) -> Option<String> {
    let mut values = headers.get_all(name).iter().filter_map(|v| v.to_str().ok()).peekable();
    values.peek()?;
    Some(values.collect::<Vec<_>>().join(", "))
}

/// Sets a header whose value was built from valid header text (an address,
/// a host the request carried), skipping it if it somehow is not. The
/// text becomes the value without a copy.
fn set(headers: &mut HeaderMap, name: HeaderName, value: String) {
    if let Ok(value) = HeaderValue::from_maybe_shared(bytes::Bytes::from(value)) {
        headers.insert(name, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn hop_by_hop_headers_go() {
        let mut h = HeaderMap::new();
        h.insert(header::CONNECTION, HeaderValue::from_static("keep-alive, x-secret"));
        h.insert("x-secret", HeaderValue::from_static("1"));
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert(header::TE, HeaderValue::from_static("trailers, deflate"));
        h.insert(header::TRANSFER_ENCODING, HeaderValue::from_static("chunked"));
        h.insert("x-kept", HeaderValue::from_static("1"));
        h.insert(header::TRAILER, HeaderValue::from_static("x-usage-tokens"));
        remove_hop_by_hop(&mut h, false);
        let names: Vec<&str> = h.keys().map(HeaderName::as_str).collect();
        assert_eq!(names, ["trailer", "x-kept", "te"], "`Trailer` is end to end");
        assert_eq!(h[header::TE], "trailers");
    }

    #[test]
    fn a_head_without_them_is_left_as_it_is() {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_static("example.com"));
        h.append("x-user", HeaderValue::from_static("a"));
        h.append("x-user", HeaderValue::from_static("b"));
        let before = h.clone();
        remove_hop_by_hop(&mut h, false);
        assert_eq!(h, before);
        h.insert(PROXY_CONNECTION, HeaderValue::from_static("keep-alive"));
        remove_hop_by_hop(&mut h, false);
        assert_eq!(h, before, "one of them is enough to look at every one");
    }

    /// The shortcut for a lone `Connection` header removes what the
    /// general path would: `close` names a header `close` too.
    #[test]
    fn a_lone_connection_header_goes_as_the_general_path_takes_it() {
        for value in ["keep-alive", "close", "Keep-Alive, close", "close, x-other"] {
            let mut h = HeaderMap::new();
            h.insert(header::CONNECTION, HeaderValue::from_static(value));
            h.insert("close", HeaderValue::from_static("1"));
            h.insert("x-kept", HeaderValue::from_static("1"));
            remove_hop_by_hop(&mut h, false);
            let mut names: Vec<&str> = h.keys().map(HeaderName::as_str).collect();
            names.sort_unstable();
            let expected: &[&str] = if value.contains("close") { &["x-kept"] } else { &["close", "x-kept"] };
            assert_eq!(names, expected, "{value}");
        }
    }

    #[test]
    fn upgrades_keep_their_handshake() {
        let mut h = HeaderMap::new();
        h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
        h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        assert!(is_upgrade(&h));
        remove_hop_by_hop(&mut h, true);
        assert_eq!(h[header::UPGRADE], "websocket");
        assert_eq!(h[header::CONNECTION], "upgrade");
    }

    #[test]
    fn addresses_are_written_as_the_formatter_writes_them() {
        let mut addresses: Vec<IpAddr> =
            ["0.0.0.0", "255.255.255.255", "10.0.100.9", "127.0.0.1", "2001:db8::1", "::ffff:1.2.3.4"]
                .iter()
                .map(|a| a.parse().unwrap())
                .collect();
        addresses.extend((0..=255u8).map(|n| IpAddr::from([n, 255 - n, n / 3, 7])));
        for ip in addresses {
            let mut written = String::new();
            push_ip(&mut written, ip);
            assert_eq!(written, ip.to_string());
        }
    }

    #[test]
    fn untrusted_forwarding_headers_are_replaced() {
        let mut h = HeaderMap::new();
        h.insert(X_FORWARDED_FOR, HeaderValue::from_static("1.2.3.4"));
        h.insert(X_FORWARDED_PROTO, HeaderValue::from_static("https"));
        h.insert(header::FORWARDED, HeaderValue::from_static("for=1.2.3.4"));
        set_forwarding(
            &mut h,
            peer("203.0.113.9:5000"),
            false,
            Some(&HeaderValue::from_static("example.com")),
            false,
        );
        assert_eq!(h[X_FORWARDED_FOR], "203.0.113.9");
        assert_eq!(h[X_FORWARDED_PROTO], "http");
        assert_eq!(h[X_FORWARDED_HOST], "example.com");
        assert_eq!(h[header::FORWARDED], "for=203.0.113.9;proto=http;host=\"example.com\"");
    }

    #[test]
    fn trusted_forwarding_headers_are_extended() {
        let mut h = HeaderMap::new();
        h.append(X_FORWARDED_FOR, HeaderValue::from_static("198.51.100.1"));
        h.append(X_FORWARDED_FOR, HeaderValue::from_static("10.0.0.2"));
        h.insert(X_FORWARDED_PROTO, HeaderValue::from_static("https"));
        set_forwarding(&mut h, peer("[::ffff:10.0.0.1]:5000"), true, None, false);
        assert_eq!(h[X_FORWARDED_FOR], "198.51.100.1, 10.0.0.2, 10.0.0.1");
        assert_eq!(h[X_FORWARDED_PROTO], "https");
        set_forwarding(&mut h, peer("[2001:db8::1]:5000"), true, None, true);
        assert_eq!(h[header::FORWARDED], "for=10.0.0.1;proto=http, for=\"[2001:db8::1]\";proto=https");
    }
}
