//! What a request head must be before the gateway routes it: one `Host`
//! (RFC 9112 §3.2: an HTTP/1.1 request without one, or with two, is
//! answered 400 — which of two a route was chosen by, and which the
//! upstream reads, could differ), agreeing with HTTP/2's `:authority`
//! when both are given (RFC 9113 §8.3.1); and the host a request names
//! ([`request_host`]), which routes are chosen by.

use http::header::HOST;
use http::{HeaderValue, Request, Version};
use hyper::body::Incoming;

use super::path::Refused;

const NO_HOST: Refused = Refused("an HTTP/1.1 request needs a `Host` header\n");
const TWO_HOSTS: Refused = Refused("a request may have one `Host` header, not several\n");
const BAD_HOST: Refused = Refused("the `Host` header is not a host name with an optional port\n");
const OTHER_AUTHORITY: Refused = Refused("the `Host` header names another host than `:authority`\n");

/// Refuses a request whose `Host` is missing (HTTP/1.1), repeated,
/// malformed, or another than its authority's.
pub(crate) fn check<B>(request: &Request<B>) -> Result<(), Refused> {
    let mut hosts = request.headers().get_all(HOST).iter();
    let host = hosts.next();
    if hosts.next().is_some() {
        return Err(TWO_HOSTS);
    }
    let Some(host) = host else {
        return if request.version() == Version::HTTP_11 { Err(NO_HOST) } else { Ok(()) };
    };
    let bytes = host.as_bytes();
    if bytes.is_empty() || bytes.contains(&b'@') || http::uri::Authority::try_from(bytes).is_err() {
        return Err(BAD_HOST);
    }
    // HTTP/2's authority, or HTTP/1.1's absolute form.
    match request.uri().authority() {
        Some(authority)
            if request.version() == Version::HTTP_2
                && !authority.as_str().as_bytes().eq_ignore_ascii_case(bytes) =>
        {
            Err(OTHER_AUTHORITY)
        }
        _ => Ok(()),
    }
}

/// The host a request names: its URI's authority (HTTP/2, absolute-form)
/// or its `Host` header.
pub(crate) fn request_host(request: &Request<Incoming>) -> Option<&str> {
    match request.uri().authority() {
        Some(authority) => Some(authority.as_str()),
        None => request.headers().get(HOST).and_then(|h| h.to_str().ok()),
    }
}

/// [`request_host`] as a header value: the `Host` header's own (a count
/// raised, not a copy), or the authority's.
pub(super) fn request_host_value(request: &Request<Incoming>) -> Option<HeaderValue> {
    match request.uri().authority() {
        Some(authority) => HeaderValue::from_str(authority.as_str()).ok(),
        None => request.headers().get(HOST).filter(|h| h.to_str().is_ok()).cloned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(version: Version, uri: &str, hosts: &[&str]) -> Request<()> {
        let mut builder = Request::get(uri).version(version);
        for host in hosts {
            builder = builder.header(HOST, *host);
        }
        builder.body(()).unwrap()
    }

    #[test]
    fn one_host_is_needed_and_enough() {
        let ok = |version, uri, hosts: &[&str]| check(&request(version, uri, hosts));
        assert_eq!(ok(Version::HTTP_11, "/", &["app.test"]), Ok(()));
        assert_eq!(ok(Version::HTTP_11, "/", &["app.test:8080"]), Ok(()));
        assert_eq!(ok(Version::HTTP_11, "/", &["[::1]:80"]), Ok(()));
        assert_eq!(ok(Version::HTTP_11, "/", &[]), Err(NO_HOST));
        assert_eq!(ok(Version::HTTP_11, "http://app.test/", &[]), Err(NO_HOST));
        assert_eq!(ok(Version::HTTP_11, "/", &["a.test", "b.test"]), Err(TWO_HOSTS));
        assert_eq!(ok(Version::HTTP_11, "/", &["a.test", "a.test"]), Err(TWO_HOSTS));
        assert_eq!(ok(Version::HTTP_11, "/", &["user@a.test"]), Err(BAD_HOST));
        assert_eq!(ok(Version::HTTP_11, "/", &["a test"]), Err(BAD_HOST));
        assert_eq!(ok(Version::HTTP_11, "/", &[""]), Err(BAD_HOST));
        assert_eq!(ok(Version::HTTP_10, "/", &[]), Ok(()), "HTTP/1.0 had no Host");
        assert_eq!(ok(Version::HTTP_2, "http://app.test/", &[]), Ok(()));
        assert_eq!(ok(Version::HTTP_2, "http://app.test/", &["APP.test"]), Ok(()));
        assert_eq!(ok(Version::HTTP_2, "http://app.test/", &["other.test"]), Err(OTHER_AUTHORITY));
        // HTTP/1.1's absolute form: the authority wins, the Host is still needed.
        assert_eq!(ok(Version::HTTP_11, "http://app.test/", &["other.test"]), Ok(()));
    }
}
