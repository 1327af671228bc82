//! The admin surface: only with a token configured (`--admin-token-file`),
//! `Authorization: Bearer <token>`, compared in constant time.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::check::parse_check;
use super::{AppState, bad_request, check_error, error};

/// Whether `headers` carry the admin token.
fn authorized(app: &AppState, headers: &HeaderMap) -> bool {
    let Some(token) = app.admin_token.as_deref() else { return false };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    constant_time_eq(given.as_bytes(), token.as_bytes())
}

/// Compares without returning early on the first difference, so the time
/// taken says nothing about how much of a guess was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = u8::from(a.len() != b.len());
    for i in 0..a.len().max(b.len()) {
        diff |= a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0);
    }
    diff == 0
}

/// `POST /v1/reload`.
pub(super) async fn reload(State(app): State<AppState>, headers: HeaderMap) -> Response {
    if !authorized(&app, &headers) {
        return error(StatusCode::UNAUTHORIZED, "admin token missing or wrong");
    }
    match app.reloader.reload().await {
        Ok(changed) => axum::Json(json!({
            "result": "ok",
            "changed": changed,
            "config_hash": app.decider.rules().current().hash(),
        }))
        .into_response(),
        Err(errors) => (
            StatusCode::UNPROCESSABLE_ENTITY,
            axum::Json(json!({
                "result": "error",
                "errors": errors.errors().iter().map(ToString::to_string).collect::<Vec<_>>(),
                "config_hash": app.decider.rules().current().hash(),
            })),
        )
            .into_response(),
    }
}

/// `DELETE /v1/state`: forgets the counters of the limits a request (the
/// body of `/v1/check`) meets — e.g. a customer blocked by mistake. In the
/// domain `gateway`, the gateway's limits too, by the descriptor each
/// counts as (`route=<route>, <key>=<value>`). Answers how many limits the
/// request met (`limits`) and how many counters held something (`reset`).
pub(super) async fn reset(
    State(app): State<AppState>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if !authorized(&app, &headers) {
        return error(StatusCode::UNAUTHORIZED, "admin token missing or wrong");
    }
    let request = match parse_check(&body) {
        Ok(request) => request,
        Err(message) => return bad_request(message),
    };
    let (mut matched, mut reset) = match app.decider.reset(&request).await {
        Ok(counts) => counts,
        Err(e) => return check_error(&e),
    };
    if let Some(gateway) = app.gateway.as_ref().filter(|_| request.domain == crate::gateway::DOMAIN) {
        for descriptor in &request.descriptors {
            match gateway.reset(&descriptor.entries).await {
                Ok((m, r)) => (matched, reset) = (matched + m, reset + r),
                Err(e) if e.kind() == slidegate::ErrorKind::InvalidKey => return bad_request(e.to_string()),
                Err(e) => return error(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
            }
        }
    }
    if matched > 0 {
        for descriptor in &request.descriptors {
            app.decider.stats().reset(&request.domain, &descriptor.entries);
        }
    }
    tracing::info!(target: "slidegate", domain = request.domain, limits = matched, reset, "counters reset by the admin API");
    let mut answer = json!({ "result": "ok", "limits": matched, "reset": reset });
    if matched == 0 {
        answer["note"] = json!(
            "no limit matches these descriptors: give every entry of a nested descriptor \
             (e.g. path=/login, user=mallory), as the requests it limits carry them"
        );
    }
    axum::Json(answer).into_response()
}

#[cfg(test)]
mod tests {
    use super::constant_time_eq;

    #[test]
    fn compares_whole_tokens() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"secret"));
    }
}
