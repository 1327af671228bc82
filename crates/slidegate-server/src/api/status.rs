//! `/v1/status`, `/v1/rules`, `/healthz`, `/readyz`, `/metrics`.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use slidegate::BreakerState;

use super::AppState;
use crate::{OnStoreFailure, ServiceStore};

/// `GET /v1/status`.
pub(super) async fn status(State(app): State<AppState>) -> Response {
    let config = app.decider.rules().current();
    let limiter = app.decider.limiter();
    axum::Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "started_unix_s": app.status.started_unix_s(),
        "ready": ready(&app),
        "config": {
            "hash": config.hash(),
            "path": app.reloader.path().map(Path::to_string_lossy),
            "files": shown(config.files()),
            "domains": config.domains().map(|d| d.name()).collect::<Vec<_>>(),
        },
        "gateway": app.gateway.as_ref().map(|g| {
            let table = g.current();
            json!({
                "hash": table.config.hash,
                "file": table.config.file.to_string_lossy(),
                "routes": table.config.routes.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
            })
        }),
        "last_reload": app.status.last_reload(),
        "reloads": app.status.reloads(),
        "store": {
            "kind": app.store_kind,
            "connected": limiter.store().is_connected(),
            "waiting_for": limiter.store().waiting_for(),
            "breaker": breaker_name(limiter.breaker_state()),
            "failure_policy": limiter.failure_policy().as_str(),
            "on_store_failure": match app.decider.on_store_failure_mode() {
                OnStoreFailure::Policy => "policy",
                OnStoreFailure::Unavailable => "unavailable",
            },
        },
        "shadow_mode": app.decider.is_shadow(),
    }))
    .into_response()
}

/// File names as text: a name that is not UTF-8 is shown with
/// replacement characters (JSON holds only text).
fn shown(files: &[PathBuf]) -> Vec<std::borrow::Cow<'_, str>> {
    files.iter().map(|file| file.to_string_lossy()).collect()
}

fn breaker_name(state: BreakerState) -> &'static str {
    match state {
        BreakerState::Closed => "closed",
        BreakerState::Open => "open",
        BreakerState::HalfOpen => "half_open",
        _ => "unknown",
    }
}

/// `GET /v1/stats`: what the status page draws — per limit, admitted and
/// limited requests per second over the last five minutes (oldest first);
/// the most limited identities; the store's health.
pub(super) async fn stats(State(app): State<AppState>) -> Response {
    let config = app.decider.rules().current();
    let now = crate::decide::stats::now_s();
    let limits: Vec<serde_json::Value> = config
        .limits()
        .into_iter()
        .map(|(domain, limit)| {
            let (admitted, limited) = limit.rates.series(now);
            let view = limit.view();
            json!({
                "domain": domain,
                "key": limit.stat_key,
                "limit": view,
                "admitted": admitted,
                "limited": limited,
                "usage": limit.usage.snapshot(),
            })
        })
        .collect();
    let servers = app.server_stats.read(app.decider.limiter().store()).await;
    let stats = app.decider.stats();
    let latency = stats.store_latency().map(|(p50, p99)| json!({ "p50": p50, "p99": p99 }));
    let limiter = app.decider.limiter();
    axum::Json(json!({
        "now_unix_s": now,
        "version": env!("CARGO_PKG_VERSION"),
        "instance": instance(),
        "started_unix_s": app.status.started_unix_s(),
        "admin_api": app.admin_token.is_some(),
        "now_unix_ms": crate::decide::stats::now_ms(),
        "seconds": crate::decide::stats::SECONDS,
        "config": {
            "hash": config.hash(),
            "files": shown(config.files()),
            "last_reload": app.status.last_reload(),
        },
        "limits": limits,
        "gateway": app.gateway.as_ref().map(|g| g.view(Some(now))),
        "edges": stats.edges(now),
        "top_limited": stats.top(),
        "unknown_domains": stats.misses().domains(),
        "unmatched_descriptors": stats.misses().descriptors(),
        "store": {
            "kind": app.store_kind,
            "connected": limiter.store().is_connected(),
            "waiting_for": limiter.store().waiting_for(),
            "breaker": breaker_name(limiter.breaker_state()),
            "latency_us": latency,
            "degraded_total": stats.degraded_total(),
            "degraded": stats.degraded_series(now),
            "servers": servers,
        },
    }))
    .into_response()
}

/// This instance's name: the host's (a pod's name on Kubernetes).
fn instance() -> &'static str {
    static NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NAME.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .map(|name| name.trim().to_owned())
            .filter(|name| !name.is_empty())
            .unwrap_or_else(|| "unknown host".to_owned())
    })
}

/// How long the servers' memory and key counts are shown before they are
/// read again (the page asks every 2 s; the servers need not answer that often).
const SERVER_STATS_TTL: Duration = Duration::from_secs(10);

/// How long reading them may take (a page must not hang on a dead server).
const SERVER_STATS_TIMEOUT: Duration = Duration::from_secs(1);

/// The last reading of the Redis servers' memory and keys.
#[derive(Debug, Default)]
pub(crate) struct ServerStatsCache {
    last: tokio::sync::Mutex<Option<(Instant, serde_json::Value)>>,
}

impl ServerStatsCache {
    /// `null` for the embedded store; else the servers' figures (or the
    /// error reading them), at most [`SERVER_STATS_TTL`] old.
    async fn read(&self, store: &ServiceStore) -> serde_json::Value {
        let mut last = self.last.lock().await;
        if let Some((at, value)) = last.as_ref()
            && at.elapsed() < SERVER_STATS_TTL
        {
            return value.clone();
        }
        let read = tokio::time::timeout(SERVER_STATS_TIMEOUT, store.server_stats()).await;
        let value = match read.unwrap_or_else(|_| {
            Some(Err(slidegate::Error::new(
                slidegate::ErrorKind::Timeout,
                "the servers did not answer in time",
            )))
        }) {
            None => serde_json::Value::Null,
            Some(Ok(stats)) => json!({
                "used_memory_bytes": stats.used_memory_bytes,
                "keys": stats.keys,
                "slidegate_keys": stats.slidegate_keys,
                "sampled": stats.sampled,
            }),
            Some(Err(error)) => json!({ "error": error.to_string() }),
        };
        *last = Some((Instant::now(), value.clone()));
        value
    }
}

/// `GET /v1/rules`: the configuration in force, as JSON.
pub(super) async fn rules(State(app): State<AppState>) -> Response {
    let config = app.decider.rules().current();
    axum::Json(json!({ "hash": config.hash(), "domains": config.view() })).into_response()
}

/// `GET /v1/gateway`: the gateway's routes in force, as JSON (404 when the
/// service is no gateway).
pub(super) async fn gateway(State(app): State<AppState>) -> Response {
    match &app.gateway {
        Some(gateway) => axum::Json(gateway.view(None)).into_response(),
        None => super::error(StatusCode::NOT_FOUND, "this service is not a gateway"),
    }
}

/// `GET /healthz`: the process answers.
pub(super) async fn healthz() -> &'static str {
    "ok\n"
}

/// Whether the service should get traffic: not draining, and the store
/// answers or a failure policy can. With `--on-store-failure unavailable`
/// it cannot: the store must be connected and its breaker closed — not
/// open, nor half-open while one probe finds out whether it is back.
fn ready(app: &AppState) -> bool {
    if app.status.is_shutting_down() {
        return false;
    }
    let limiter = app.decider.limiter();
    app.decider.on_store_failure_mode() == OnStoreFailure::Policy
        || (limiter.store().is_connected() && limiter.breaker_state() == BreakerState::Closed)
}

/// `GET /readyz`: 200 when ready, 503 otherwise.
pub(super) async fn readyz(State(app): State<AppState>) -> Response {
    if ready(&app) {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready\n").into_response()
    }
}

/// `GET /metrics`: Prometheus text.
pub(super) async fn metrics(State(app): State<AppState>) -> Response {
    match &app.metrics {
        Some(handle) => {
            ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], handle.render()).into_response()
        }
        None => (
            StatusCode::NOT_FOUND,
            "no metrics here: this server was started without its recorder (ServerConfig::metrics_recorder), \
             or another exporter records in this process\n",
        )
            .into_response(),
    }
}
