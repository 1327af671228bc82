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

    fn contains(&self, ip: IpAddr) -> bool {
        self.nets.iter().any(|net| net.contains(&ip))
    }
}

/// IPv4-mapped IPv6 addresses (`::ffff:192.0.2.1`) as the IPv4 they are.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// The client address: walking back from the peer through the forwarding
/// hops (newest last), the first address that is not a trusted proxy. A
/// hop that cannot be parsed ends the walk at the proxy that reported it.
pub(crate) fn client_ip(peer: IpAddr, headers: &HeaderMap, trusted: &TrustedProxies) -> IpAddr {
    let mut current = canonical(peer);
    if !trusted.contains(current) {
        return current;
    }
    for hop in hops(headers).into_iter().rev() {
        match hop {
            Some(ip) => {
                current = canonical(ip);
                if !trusted.contains(current) {
                    return current;
                }
            }
            None => return current,
        }
    }
    current
}

/// The forwarding chain, oldest first: `Forwarded` if present, else
/// `X-Forwarded-For`, else `X-Real-IP`. `None` for an unparsable hop.
fn hops(headers: &HeaderMap) -> Vec<Option<IpAddr>> {
    let forwarded: Vec<&str> = headers.get_all("forwarded").iter().filter_map(|v| v.to_str().ok()).collect();
    if !forwarded.is_empty() {
        return forwarded
            .iter()
            .flat_map(|v| v.split(','))
            .map(|element| {
                element
                    .split(';')
                    .filter_map(|pair| pair.split_once('='))
                    .find(|(name, _)| name.trim().eq_ignore_ascii_case("for"))
                    .and_then(|(_, value)| node_ip(value))
            })
            .collect();
    }
    let xff: Vec<&str> = headers.get_all("x-forwarded-for").iter().filter_map(|v| v.to_str().ok()).collect();
    if !xff.is_empty() {
        return xff.iter().flat_map(|v| v.split(',')).map(node_ip).collect();
    }
    headers.get("x-real-ip").and_then(|v| v.to_str().ok()).map(|v| vec![node_ip(v)]).unwrap_or_default()
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

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(http::HeaderName::from_bytes(name.as_bytes()).unwrap(), value.parse().unwrap());
        }
        map
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn untrusted_peers_cannot_spoof() {
        let trusted = TrustedProxies::parse(["10.0.0.0/8"]).unwrap();
        let spoof = headers(&[
            ("x-forwarded-for", "1.2.3.4"),
            ("forwarded", "for=5.6.7.8"),
            ("x-real-ip", "9.9.9.9"),
        ]);
        assert_eq!(client_ip(ip("203.0.113.9"), &spoof, &trusted), ip("203.0.113.9"));
        // Prepending a fake hop before a trusted proxy does not help either.
        let chain = headers(&[("x-forwarded-for", "1.2.3.4, 203.0.113.9")]);
        assert_eq!(client_ip(ip("10.0.0.1"), &chain, &trusted), ip("203.0.113.9"));
    }

    #[test]
    fn walks_back_through_trusted_hops() {
        let trusted = TrustedProxies::parse(["10.0.0.0/8", "192.0.2.10"]).unwrap();
        let chain =
            headers(&[("x-forwarded-for", "198.51.100.1, 192.0.2.10"), ("x-forwarded-for", "10.1.2.3")]);
        assert_eq!(client_ip(ip("10.0.0.1"), &chain, &trusted), ip("198.51.100.1"));
        let forwarded = headers(&[("forwarded", r#"for="[2001:db8::17]:4711";proto=https, for=10.0.0.7"#)]);
        assert_eq!(client_ip(ip("10.0.0.1"), &forwarded, &trusted), ip("2001:db8::17"));
        let real = headers(&[("x-real-ip", "198.51.100.2")]);
        assert_eq!(client_ip(ip("10.0.0.1"), &real, &trusted), ip("198.51.100.2"));
        assert_eq!(
            client_ip(ip("10.0.0.1"), &HeaderMap::new(), &trusted),
            ip("10.0.0.1"),
            "no headers: the peer"
        );
        let unknown = headers(&[("forwarded", "for=unknown, for=10.0.0.9")]);
        assert_eq!(
            client_ip(ip("10.0.0.1"), &unknown, &trusted),
            ip("10.0.0.9"),
            "stops at an unparsable hop"
        );
        let mapped = headers(&[("x-forwarded-for", "::ffff:198.51.100.3")]);
        assert_eq!(client_ip(ip("10.0.0.1"), &mapped, &trusted), ip("198.51.100.3"));
    }

    #[test]
    fn parses_trust_lists() {
        assert!(TrustedProxies::parse(["10.0.0.0/8", "::1", "fd00::/8"]).is_ok());
        let err = TrustedProxies::parse(["10.0.0.0/33"]).unwrap_err();
        assert!(err.contains("10.0.0.0/33"), "{err}");
    }
}
