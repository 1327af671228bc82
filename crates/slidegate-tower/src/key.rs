//! Who a request counts against: the [`KeyExtractor`] strategy and the
//! built-in extractors.
//!
//! An extractor looks at the request head and returns the key (identity)
//! a rule limits, or `None` when it cannot tell — what happens then is the
//! layer's [`MissingKey`](crate::MissingKey) setting, never a panic. Keys are
//! untrusted input; slidegate bounds and digests hostile ones itself.

use std::borrow::Cow;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use http::request::Parts;

use crate::client_ip::{ForwardedHeader, TrustedProxies, client_ip};

/// Picks the key a rule limits from a request head: borrowed from it
/// where it can be (a header's value, the path), so a check needs no copy
/// of its key unless it waits for the store.
///
/// Implemented for closures `Fn(&Parts) -> Option<String>`:
///
/// ```
/// use slidegate_tower::KeyExtractor;
///
/// // Per API key and path: e.g. "key-123:/search".
/// let per_key_and_path = |parts: &http::request::Parts| {
///     let key = parts.headers.get("x-api-key")?.to_str().ok()?;
///     Some(format!("{key}:{}", parts.uri.path()))
/// };
/// let parts = http::Request::get("/search").header("x-api-key", "key-123").body(()).unwrap().into_parts().0;
/// assert_eq!(per_key_and_path.extract(&parts).as_deref(), Some("key-123:/search"));
/// ```
pub trait KeyExtractor: Send + Sync + 'static {
    /// The key of this request, or `None` when it has none.
    fn extract<'a>(&self, parts: &'a Parts) -> Option<Cow<'a, str>>;

    /// What a request without this key lacks (`` `x-api-key` header ``),
    /// named in the 400 answer under
    /// [`MissingKey::Reject`](crate::MissingKey::Reject); `None` (the
    /// default) says only that the client cannot be identified.
    fn missing(&self) -> Option<Cow<'static, str>> {
        None
    }
}

impl<F> KeyExtractor for F
where
    F: Fn(&Parts) -> Option<String> + Send + Sync + 'static,
{
    fn extract<'a>(&self, parts: &'a Parts) -> Option<Cow<'a, str>> {
        self(parts).map(Cow::Owned)
    }
}

/// One key for everybody: a global limit.
#[derive(Debug, Clone, Copy, Default)]
pub struct Global;

impl KeyExtractor for Global {
    fn extract<'a>(&self, _: &'a Parts) -> Option<Cow<'a, str>> {
        Some(Cow::Borrowed("global"))
    }
}

/// The address of the connected peer, as the server recorded it in the
/// request's extensions: a plain `SocketAddr`, axum's
/// `ConnectInfo<SocketAddr>` (feature `axum`, serve with
/// `into_make_service_with_connect_info`), or tonic's `TcpConnectInfo`
/// (feature `tonic`).
pub fn peer_addr(parts: &Parts) -> Option<SocketAddr> {
    if let Some(addr) = parts.extensions.get::<SocketAddr>() {
        return Some(*addr);
    }
    #[cfg(feature = "axum")]
    if let Some(info) = parts.extensions.get::<axum::extract::ConnectInfo<SocketAddr>>() {
        return Some(info.0);
    }
    #[cfg(feature = "tonic")]
    if let Some(addr) =
        parts.extensions.get::<tonic::transport::server::TcpConnectInfo>().and_then(|info| info.remote_addr())
    {
        return Some(addr);
    }
    None
}

/// The peer's IP address (the TCP connection's, proxies ignored).
#[derive(Debug, Clone, Copy, Default)]
pub struct PeerIp;

impl KeyExtractor for PeerIp {
    fn extract<'a>(&self, parts: &'a Parts) -> Option<Cow<'a, str>> {
        peer_addr(parts).map(|addr| Cow::Owned(addr.ip().to_string()))
    }

    fn missing(&self) -> Option<Cow<'static, str>> {
        Some(Cow::Borrowed("peer address (no `ConnectInfo` or `SocketAddr` extension)"))
    }
}

/// The client's IP address behind reverse proxies.
///
/// The forwarding header — `X-Forwarded-For` by default, or the one
/// [`header`](Self::header) names — is believed **only** when the peer is
/// one of the trusted proxies, and only as far back as the hops are
/// trusted: the key is the first address, walking back from the peer, that
/// is not a trusted proxy. A client connecting directly, or through an
/// untrusted hop, cannot change its key by sending the header; and only
/// the one header is read, because a proxy that sets one passes the others
/// on from the client unchanged. A hop that cannot be parsed (`unknown`, an
/// obfuscated name, garbage) ends the walk: the key is then the proxy that
/// reported it. IPv4-mapped IPv6 addresses count as the IPv4 address; an
/// IPv6 client can be keyed by its network instead
/// ([`ipv6_prefix`](Self::ipv6_prefix)).
///
/// ```
/// use slidegate_tower::{ClientIp, ForwardedHeader, KeyExtractor};
///
/// let client_ip = ClientIp::trusting(["10.0.0.0/8"]).unwrap();
/// let mut parts = http::Request::get("/")
///     .header("x-forwarded-for", "203.0.113.7, 10.0.0.2")
///     .header("forwarded", "for=198.51.100.1") // a client's own: not read
///     .body(())
///     .unwrap()
///     .into_parts()
///     .0;
/// parts.extensions.insert("10.0.0.1:443".parse::<std::net::SocketAddr>().unwrap());
/// assert_eq!(client_ip.extract(&parts).as_deref(), Some("203.0.113.7"));
///
/// // Behind a proxy that speaks RFC 7239:
/// let rfc = ClientIp::trusting(["10.0.0.0/8"]).unwrap().header(ForwardedHeader::Forwarded);
/// assert_eq!(rfc.extract(&parts).as_deref(), Some("198.51.100.1"));
/// ```
#[derive(Debug, Clone)]
pub struct ClientIp {
    trusted: Arc<TrustedProxies>,
    header: ForwardedHeader,
    /// 1..=128.
    ipv6_prefix: u8,
}

impl Default for ClientIp {
    /// Trusts no proxy: the same as [`PeerIp`].
    fn default() -> Self {
        ClientIp { trusted: Arc::default(), header: ForwardedHeader::default(), ipv6_prefix: 128 }
    }
}

impl ClientIp {
    /// Trusts no proxy: the same as [`PeerIp`].
    pub fn new() -> ClientIp {
        ClientIp::default()
    }

    /// Trusts proxies in these CIDR ranges (`10.0.0.0/8`, `::1/128`) or
    /// addresses (`192.0.2.10`).
    ///
    /// # Errors
    ///
    /// A message naming the first entry that is neither.
    pub fn trusting<I, S>(proxies: I) -> Result<ClientIp, String>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Ok(ClientIp { trusted: Arc::new(TrustedProxies::parse(proxies)?), ..ClientIp::new() })
    }

    /// The header the trusted proxies name the client in (default
    /// [`ForwardedHeader::XForwardedFor`]); no other is read.
    pub fn header(mut self, header: ForwardedHeader) -> ClientIp {
        self.header = header;
        self
    }

    /// Keys an IPv6 client by its first `bits` bits (e.g. 64: one key per
    /// /64 network, which one host can otherwise hop through freely);
    /// default 128, the whole address. Clamped to 1..=128; IPv4 is unchanged.
    pub fn ipv6_prefix(mut self, bits: u8) -> ClientIp {
        self.ipv6_prefix = bits.clamp(1, 128);
        self
    }

    /// Whether `ip` is one of the trusted proxies (an IPv4-mapped IPv6
    /// address counts as the IPv4 address).
    pub fn trusts(&self, ip: IpAddr) -> bool {
        self.trusted.contains(ip.to_canonical())
    }

    /// The client address of this request (see the type's docs), IPv6
    /// cut to [`ipv6_prefix`](Self::ipv6_prefix).
    pub fn client(&self, parts: &Parts) -> Option<IpAddr> {
        let peer = peer_addr(parts)?.ip();
        let ip = client_ip(peer, &parts.headers, &self.trusted, self.header);
        Some(match ip {
            IpAddr::V6(v6) if self.ipv6_prefix < 128 => {
                let mask = u128::MAX << (128 - u32::from(self.ipv6_prefix));
                IpAddr::V6((u128::from(v6) & mask).into())
            }
            ip => ip,
        })
    }
}

impl KeyExtractor for ClientIp {
    fn extract<'a>(&self, parts: &'a Parts) -> Option<Cow<'a, str>> {
        self.client(parts).map(|ip| {
            Cow::Owned(match ip {
                IpAddr::V6(_) if self.ipv6_prefix < 128 => format!("{ip}/{}", self.ipv6_prefix),
                ip => ip.to_string(),
            })
        })
    }

    fn missing(&self) -> Option<Cow<'static, str>> {
        Some(Cow::Borrowed("client address (no peer address)"))
    }
}

/// The value of a request header (e.g. an API key). Missing or non-UTF-8
/// values have no key.
#[derive(Debug, Clone)]
pub struct Header(http::HeaderName);

impl Header {
    /// The value of header `name`.
    pub fn new(name: http::HeaderName) -> Header {
        Header(name)
    }
}

impl KeyExtractor for Header {
    fn extract<'a>(&self, parts: &'a Parts) -> Option<Cow<'a, str>> {
        parts.headers.get(&self.0)?.to_str().ok().filter(|v| !v.is_empty()).map(Cow::Borrowed)
    }

    fn missing(&self) -> Option<Cow<'static, str>> {
        Some(Cow::Owned(format!("`{}` header (or it is empty or not text)", self.0)))
    }
}

/// The request path, e.g. `/users/42`. For a limit per route rather than per
/// URL, use [`MatchedPath`] (feature `axum`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Path;

impl KeyExtractor for Path {
    fn extract<'a>(&self, parts: &'a Parts) -> Option<Cow<'a, str>> {
        Some(Cow::Borrowed(parts.uri.path()))
    }
}

/// The route template axum matched, e.g. `/users/{id}` — one key per route.
#[cfg(feature = "axum")]
#[derive(Debug, Clone, Copy, Default)]
pub struct MatchedPath;

#[cfg(feature = "axum")]
impl KeyExtractor for MatchedPath {
    fn extract<'a>(&self, parts: &'a Parts) -> Option<Cow<'a, str>> {
        parts.extensions.get::<axum::extract::MatchedPath>().map(|p| Cow::Borrowed(p.as_str()))
    }
}

/// A key read from a request extension, typically the authenticated user an
/// earlier middleware inserted.
///
/// ```
/// use slidegate_tower::{FromExtension, KeyExtractor};
///
/// #[derive(Clone)]
/// struct User { id: u64 }
///
/// let per_user = FromExtension::new(|user: &User| user.id.to_string());
/// let mut parts = http::Request::get("/").body(()).unwrap().into_parts().0;
/// assert_eq!(per_user.extract(&parts), None, "anonymous");
/// parts.extensions.insert(User { id: 42 });
/// assert_eq!(per_user.extract(&parts).as_deref(), Some("42"));
/// ```
pub struct FromExtension<T, F> {
    key: F,
    _type: std::marker::PhantomData<fn(&T)>,
}

impl<T, F> FromExtension<T, F>
where
    T: Send + Sync + 'static,
    F: Fn(&T) -> String + Send + Sync + 'static,
{
    /// The key `key` makes of the request's `T` extension.
    pub fn new(key: F) -> Self {
        FromExtension { key, _type: std::marker::PhantomData }
    }
}

impl<T, F> fmt::Debug for FromExtension<T, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FromExtension").field("type", &std::any::type_name::<T>()).finish()
    }
}

impl<T, F> KeyExtractor for FromExtension<T, F>
where
    T: Send + Sync + 'static,
    F: Fn(&T) -> String + Send + Sync + 'static,
{
    fn extract<'a>(&self, parts: &'a Parts) -> Option<Cow<'a, str>> {
        parts.extensions.get::<T>().map(|value| Cow::Owned((self.key)(value)))
    }
}
