//! The plain-HTTP listener beside an HTTPS gateway: every request is sent
//! to the same host and path over HTTPS (`308`, which keeps the method and
//! body), so `http://` links and clients reach the gateway's TLS.

use std::convert::Infallible;
use std::future::Ready;
use std::task::{Context, Poll};

use http::uri::Authority;
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body_util::Full;

use bytes::Bytes;

/// Answers every request with a redirect to `https://<its host>` on
/// `port` (left out when 443), the same path and query.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ToHttps {
    pub(crate) port: u16,
}

impl<B> tower_service::Service<Request<B>> for ToHttps {
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = Ready<Result<Response<Full<Bytes>>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        std::future::ready(Ok(redirect(&request, self.port)))
    }
}

fn redirect<B>(request: &Request<B>, port: u16) -> Response<Full<Bytes>> {
    let authority = request.uri().authority().cloned().or_else(|| {
        let host = request.headers().get(header::HOST)?;
        host.to_str().ok()?.parse::<Authority>().ok()
    });
    // A host with user info, or none: no place to send the client to.
    let Some(host) = authority.filter(|a| !a.as_str().contains('@')).map(|a| a.host().to_owned()) else {
        return answer(StatusCode::BAD_REQUEST, "a request to redirect to HTTPS names no host\n", None);
    };
    let host = if host.contains(':') && !host.starts_with('[') { format!("[{host}]") } else { host };
    // `*` (OPTIONS) and other non-paths go to the root.
    let path =
        request.uri().path_and_query().map(|p| p.as_str()).filter(|p| p.starts_with('/')).unwrap_or("/");
    let location =
        if port == 443 { format!("https://{host}{path}") } else { format!("https://{host}:{port}{path}") };
    match HeaderValue::try_from(location) {
        Ok(location) => answer(StatusCode::PERMANENT_REDIRECT, "", Some(location)),
        Err(_) => answer(StatusCode::BAD_REQUEST, "the request's target cannot be redirected\n", None),
    }
}

fn answer(status: StatusCode, body: &'static str, location: Option<HeaderValue>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *response.status_mut() = status;
    if let Some(location) = location {
        response.headers_mut().insert(header::LOCATION, location);
    }
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn location(uri: &str, host: Option<&str>, port: u16) -> (u16, Option<String>) {
        let mut request = Request::get(uri);
        if let Some(host) = host {
            request = request.header(header::HOST, host);
        }
        let response = redirect(&request.body(()).expect("request"), port);
        let location = response.headers().get(header::LOCATION).map(|l| l.to_str().expect("text").to_owned());
        (response.status().as_u16(), location)
    }

    #[test]
    fn redirects_keep_host_path_and_query() {
        assert_eq!(
            location("/a/b?c=d", Some("example.com:8080"), 8443),
            (308, Some("https://example.com:8443/a/b?c=d".into()))
        );
        assert_eq!(location("/", Some("example.com"), 443), (308, Some("https://example.com/".into())));
        assert_eq!(location("http://h2.example/x", None, 443), (308, Some("https://h2.example/x".into())));
        assert_eq!(location("/", Some("[::1]:80"), 443), (308, Some("https://[::1]/".into())));
        assert_eq!(location("*", Some("example.com"), 443), (308, Some("https://example.com/".into())));
        assert_eq!(location("/", None, 443), (400, None));
        assert_eq!(location("/", Some("a b"), 443), (400, None));
        assert_eq!(location("/", Some("user@evil.example"), 443), (400, None));
    }
}
