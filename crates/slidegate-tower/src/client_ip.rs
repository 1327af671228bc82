//! The client address behind trusted reverse proxies (`Forwarded`,
//! `X-Forwarded-For`, `X-Real-IP`).

use std::net::IpAddr;

use http::HeaderMap;
use ipnet::IpNet;

/// CIDR ranges of proxies whose forwarding headers are believed.
#[derive(Debug, Clone, Default)]
pub(crate) struct TrustedProxies {
    nets: Vec<IpNet>,
}

impl TrustedProxies {
    pub(crate) fn parse<I, S>(entries: I) -> Result<TrustedProxies, String>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut nets = Vec::new();
        for entry in entries {
            let entry = entry.as_ref().trim();
            let net = entry
                .parse::<IpNet>()
                .or_else(|_| entry.parse::<IpAddr>().map(IpNet::from))
                .map_err(|_| format!("trusted proxy {entry:?} is neither an IP address nor a CIDR range"))?;
            nets.push(net);
        }
        Ok(TrustedProxies { nets })
    }

    pub(crate) fn contains(&self, ip: IpAddr) -> bool {
        self.nets.iter().any(|net| net.contains(&ip))
    }
}

/// The header trusted proxies name the client in. Only the one chosen is
/// read: a proxy that sets one of them passes the others on from the
/// client unchanged, so believing them would let the client pick its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ForwardedHeader {
    /// `X-Forwarded-For: client, proxy1, proxy2` — set by nginx
    /// (`$proxy_add_x_forwarded_for`), HAProxy (`option forwardfor`),
    /// Envoy, AWS and Google load balancers. The default.
    #[default]
    XForwardedFor,
    /// RFC 7239 `Forwarded: for=client, for=proxy1` (its `for=` parameters).
    Forwarded,
    /// `X-Real-IP: client` (nginx `proxy_set_header X-Real-IP
    /// $remote_addr`): one address per hop.
    XRealIp,
}

/// The client address: walking back from the peer through the forwarding
/// hops (newest last), the first address that is not a trusted proxy. A
/// hop that cannot be parsed (`unknown`, an obfuscated `_name`, garbage,
/// bytes that are not UTF-8) ends the walk at the proxy that reported it.
pub(crate) fn client_ip(
    peer: IpAddr,
    headers: &HeaderMap,
    trusted: &TrustedProxies,
    header: ForwardedHeader,
) -> IpAddr {
    let mut current = peer.to_canonical();
    if !trusted.contains(current) {
        return current;
    }
    for hop in hops(headers, header).into_iter().rev() {
        match hop {
            Some(ip) => {
                current = ip.to_canonical();
                if !trusted.contains(current) {
                    return current;
                }
            }
            None => return current,
        }
    }
    current
}

/// The forwarding chain `header` records, oldest first; `None` for a hop
/// that cannot be parsed. Values are split on bytes, so a hop a proxy
/// appended stays readable after a client's non-UTF-8 one on the same line.
fn hops(headers: &HeaderMap, header: ForwardedHeader) -> Vec<Option<IpAddr>> {
    let name = match header {
        ForwardedHeader::XForwardedFor => "x-forwarded-for",
        ForwardedHeader::Forwarded => "forwarded",
        ForwardedHeader::XRealIp => "x-real-ip",
    };
    let elements = headers.get_all(name).into_iter().flat_map(|v| v.as_bytes().split(|&b| b == b','));
    elements
        .map(|element| {
            let element = std::str::from_utf8(element).ok()?;
            match header {
                ForwardedHeader::Forwarded => element
                    .split(';')
                    .filter_map(|pair| pair.split_once('='))
                    .find(|(name, _)| name.trim().eq_ignore_ascii_case("for"))
                    .and_then(|(_, value)| node_ip(value)),
                _ => node_ip(element),
            }
        })
        .collect()
}

/// An address from a header: `192.0.2.1`, `192.0.2.1:8080`, `2001:db8::1`,
/// `[2001:db8::1]:8080`, optionally quoted.
fn node_ip(value: &str) -> Option<IpAddr> {
    let value = value.trim().trim_matches('"');
    if let Ok(ip) = value.parse::<IpAddr>() {
        return Some(ip);
    }
    if let Some(rest) = value.strip_prefix('[') {
        return rest.split_once(']').and_then(|(ip, _)| ip.parse().ok());
    }
    value.rsplit_once(':').and_then(|(ip, _port)| ip.parse::<std::net::Ipv4Addr>().ok()).map(IpAddr::V4)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &[u8])]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                http::HeaderValue::from_bytes(value).unwrap(),
            );
        }
        map
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    const XFF: ForwardedHeader = ForwardedHeader::XForwardedFor;

    #[test]
    fn untrusted_peers_cannot_spoof() {
        let trusted = TrustedProxies::parse(["10.0.0.0/8"]).unwrap();
        let spoof = headers(&[
            ("x-forwarded-for", b"1.2.3.4"),
            ("forwarded", b"for=5.6.7.8"),
            ("x-real-ip", b"9.9.9.9"),
        ]);
        for header in [XFF, ForwardedHeader::Forwarded, ForwardedHeader::XRealIp] {
            assert_eq!(client_ip(ip("203.0.113.9"), &spoof, &trusted, header), ip("203.0.113.9"));
        }
        // Prepending a fake hop before a trusted proxy does not help either.
        let chain = headers(&[("x-forwarded-for", b"1.2.3.4, 203.0.113.9")]);
        assert_eq!(client_ip(ip("10.0.0.1"), &chain, &trusted, XFF), ip("203.0.113.9"));
    }

    /// A proxy that sets X-Forwarded-For passes a client's own `Forwarded`
    /// and `X-Real-IP` through: only the configured header is read.
    #[test]
    fn only_the_configured_header_is_believed() {
        let trusted = TrustedProxies::parse(["10.0.0.0/8"]).unwrap();
        let sent = headers(&[
            ("forwarded", b"for=198.51.100.66"),
            ("x-real-ip", b"198.51.100.77"),
            ("x-forwarded-for", b"203.0.113.5"),
        ]);
        assert_eq!(client_ip(ip("10.0.0.1"), &sent, &trusted, XFF), ip("203.0.113.5"));
        let only_forwarded = headers(&[("x-forwarded-for", b"198.51.100.66")]);
        assert_eq!(
            client_ip(ip("10.0.0.1"), &only_forwarded, &trusted, ForwardedHeader::Forwarded),
            ip("10.0.0.1"),
            "no Forwarded header: the proxy itself"
        );
    }

    #[test]
    fn walks_back_through_trusted_hops() {
        let trusted = TrustedProxies::parse(["10.0.0.0/8", "192.0.2.10"]).unwrap();
        let chain =
            headers(&[("x-forwarded-for", b"198.51.100.1, 192.0.2.10"), ("x-forwarded-for", b"10.1.2.3")]);
        assert_eq!(client_ip(ip("10.0.0.1"), &chain, &trusted, XFF), ip("198.51.100.1"));
        let forwarded = headers(&[("forwarded", br#"for="[2001:db8::17]:4711";proto=https, for=10.0.0.7"#)]);
        assert_eq!(
            client_ip(ip("10.0.0.1"), &forwarded, &trusted, ForwardedHeader::Forwarded),
            ip("2001:db8::17")
        );
        let real = headers(&[("x-real-ip", b"198.51.100.2")]);
        assert_eq!(client_ip(ip("10.0.0.1"), &real, &trusted, ForwardedHeader::XRealIp), ip("198.51.100.2"));
        assert_eq!(
            client_ip(ip("10.0.0.1"), &HeaderMap::new(), &trusted, XFF),
            ip("10.0.0.1"),
            "no headers: the peer"
        );
        let mapped = headers(&[("x-forwarded-for", b"::ffff:198.51.100.3")]);
        assert_eq!(client_ip(ip("10.0.0.1"), &mapped, &trusted, XFF), ip("198.51.100.3"));
        let ported = headers(&[("x-forwarded-for", b"198.51.100.4:5555, [2001:db8::5]:443")]);
        assert_eq!(client_ip(ip("10.0.0.1"), &ported, &trusted, XFF), ip("2001:db8::5"));
    }

    /// Whatever a client writes in front of the proxy's hop — garbage,
    /// `unknown`, an obfuscated name, bytes that are not UTF-8 — ends the
    /// walk there: the key is the last address a trusted proxy vouched for.
    #[test]
    fn unparsable_hops_stop_the_walk() {
        let trusted = TrustedProxies::parse(["10.0.0.0/8"]).unwrap();
        let cases: [(&str, &[u8], ForwardedHeader); 6] = [
            ("forwarded", b"for=unknown, for=10.0.0.9", ForwardedHeader::Forwarded),
            ("forwarded", b"for=_hidden, for=198.51.100.9", ForwardedHeader::Forwarded),
            ("x-forwarded-for", b"garbage, 198.51.100.9", XFF),
            ("x-forwarded-for", b", 198.51.100.9", XFF),
            ("x-forwarded-for", b"\xff\xfe, 198.51.100.9", XFF),
            ("x-forwarded-for", b"198.51.100.9, 10.0.0.9, not-an-ip", XFF),
        ];
        let expected = [
            ip("10.0.0.9"),
            ip("198.51.100.9"),
            ip("198.51.100.9"),
            ip("198.51.100.9"),
            ip("198.51.100.9"),
            ip("10.0.0.1"),
        ];
        for ((name, value, header), want) in cases.iter().zip(expected) {
            let got = client_ip(ip("10.0.0.1"), &headers(&[(name, value)]), &trusted, *header);
            assert_eq!(got, want, "{name}: {:?}", String::from_utf8_lossy(value));
        }
        // A long chain is walked without trouble.
        let long = format!("{}198.51.100.10", "10.0.0.3, ".repeat(5000));
        let long = headers(&[("x-forwarded-for", long.as_bytes())]);
        assert_eq!(client_ip(ip("10.0.0.1"), &long, &trusted, XFF), ip("198.51.100.10"));
    }

    #[test]
    fn parses_trust_lists() {
        assert!(TrustedProxies::parse(["10.0.0.0/8", "::1", "fd00::/8"]).is_ok());
        let err = TrustedProxies::parse(["10.0.0.0/33"]).unwrap_err();
        assert!(err.contains("10.0.0.0/33"), "{err}");
    }
}
