//! The status page (`GET /`): HTML, CSS and JavaScript embedded in the
//! binary (no CDN, nothing from the internet), drawing `GET /v1/stats`
//! every two seconds. A strict Content-Security-Policy allows only the
//! page's own script and style: a hostile identity the page shows as text
//! could not run even if it were ever put in as markup.

use axum::http::header;
use axum::response::{IntoResponse, Response};

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'";

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, CSP),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// `GET /`.
pub(super) async fn index() -> Response {
    asset("text/html; charset=utf-8", include_str!("page/index.html"))
}

/// `GET /ui/page.js`.
pub(super) async fn script() -> Response {
    asset("text/javascript; charset=utf-8", include_str!("page/page.js"))
}

/// `GET /ui/page.css`.
pub(super) async fn style() -> Response {
    asset("text/css; charset=utf-8", include_str!("page/page.css"))
}
