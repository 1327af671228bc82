//! `serve`: the service on its listeners until shutdown.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitServiceServer;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use slidegate::telemetry::{LogThrottle, THROTTLED_NOTE};
use slidegate::{FailurePolicy, Limiter};
use slidegate_tower::headers::Families;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::config::{Config, ConfigErrors, GatewayConfig, Rules};
use crate::connection_io::{HeaderBlocks, Unvectored};
use crate::gateway::{ConnectionSlot, Gateway, Tasks};
use crate::http::{Api, AppState, MAX_BODY_BYTES};
use crate::reload::{Reloader, Seen};
use crate::rls::Rls;
use crate::status::ServiceStatus;
use crate::store::Probing;
use crate::{Decider, OnStoreFailure, ServiceStore};

/// How the service runs: its rules, its store and how it answers.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServerConfig {
    /// The rules: one envoy-ratelimit YAML file, or a directory of them
    /// (`None` for a gateway without rules of its own).
    pub rules: Option<PathBuf>,
    /// The gateway file: routes, their upstreams and limits (see
    /// [`GatewayConfig`](crate::config::GatewayConfig)); `None` for no gateway.
    pub gateway: Option<PathBuf>,
    /// The store, connected.
    pub store: ServiceStore,
    /// How long one store call may take before the failure policy answers.
    pub deadline: Duration,
    /// What answers when the store fails.
    pub policy: FailurePolicy,
    /// Whether the failure policy answers a store failure, or the request
    /// fails with `UNAVAILABLE` / 503.
    pub on_store_failure: OnStoreFailure,
    /// The quota headers added to answers (RLS `response_headers_to_add`,
    /// HTTP headers of `/v1/check`, the gateway's responses).
    pub headers: Families,
    /// Global shadow mode: decide and count, never deny.
    pub shadow: bool,
    /// Whether repeated denials are answered from the limiter's deny cache
    /// (on by default; off, every request asks the store).
    pub deny_cache: bool,
    /// The admin token; without one, no admin routes (see
    /// [`check_admin_token`]).
    pub admin_token: Option<String>,
    /// How long requests in flight may take to finish at shutdown.
    pub grace: Duration,
    /// Whether to watch the rules for changes (SIGHUP and `POST
    /// /v1/reload` reload either way).
    pub watch: bool,
    /// How long a client may take to send a request's head, on every
    /// listener: from connecting (a connection that sends nothing is
    /// closed), and for each request of a kept-alive HTTP/1.1 connection
    /// (which is also how long it may stay idle between requests). Slow
    /// or silent clients are closed instead of holding connections open.
    pub header_timeout: Duration,
}

/// The fewest characters an admin token may have.
pub const MIN_ADMIN_TOKEN_LEN: usize = 16;

/// Checks an admin token ([`ServerConfig::admin_token`]): at least
/// [`MIN_ADMIN_TOKEN_LEN`] characters, each printable ASCII (`!` to `~`).
/// Clients send it in an HTTP header, which browsers and most clients can
/// fill only with such characters: any other token could never be given.
///
/// # Errors
///
/// What is wrong with it.
pub fn check_admin_token(token: &str) -> Result<(), String> {
    if let Some(c) = token.chars().find(|c| !c.is_ascii_graphic()) {
        return Err(format!(
            "the admin token holds {c:?}: only printable ASCII characters (`!` to `~`, no spaces) \
             can be sent in an HTTP header"
        ));
    }
    if token.len() < MIN_ADMIN_TOKEN_LEN {
        return Err(format!(
            "the admin token has {} characters; at least {MIN_ADMIN_TOKEN_LEN} are needed",
            token.len()
        ));
    }
    Ok(())
}

/// [`ServerConfig::header_timeout`] unless set: hyper's own default.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(30);

impl ServerConfig {
    /// The defaults for `rules` on `store`: the library's deadline and
    /// fallback policy, no quota headers, 10 s of grace, watching, 30 s
    /// for a request's head.
    pub fn new(rules: impl Into<PathBuf>, store: ServiceStore) -> ServerConfig {
        ServerConfig {
            rules: Some(rules.into()),
            gateway: None,
            store,
            deadline: slidegate::limits::DEFAULT_DEADLINE,
            policy: FailurePolicy::default(),
            on_store_failure: OnStoreFailure::Policy,
            headers: Families::default(),
            shadow: false,
            deny_cache: true,
            admin_token: None,
            grace: Duration::from_secs(10),
            watch: true,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
        }
    }

    /// The defaults for a gateway of `gateway` (a file) on `store`, without
    /// rules of its own: as [`new`](Self::new), with both families of quota
    /// headers on the gateway's responses.
    pub fn for_gateway(gateway: impl Into<PathBuf>, store: ServiceStore) -> ServerConfig {
        let mut config = ServerConfig::new(PathBuf::new(), store);
        config.rules = None;
        config.gateway = Some(gateway.into());
        config.headers = Families::new(true, true, false);
        config
    }
}

/// Where the service listens (bound by the caller, so tests bind port 0).
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct Listeners {
    /// Envoy RLS v3 and gRPC health.
    pub grpc: Option<TcpListener>,
    /// The HTTP API.
    pub http: Option<TcpListener>,
    /// The gateway's proxy.
    pub gateway: Option<TcpListener>,
}

impl Listeners {
    /// The two API listeners.
    pub fn new(grpc: Option<TcpListener>, http: Option<TcpListener>) -> Listeners {
        Listeners { grpc, http, gateway: None }
    }

    /// With the gateway's listener.
    pub fn with_gateway(mut self, gateway: TcpListener) -> Listeners {
        self.gateway = Some(gateway);
        self
    }
}

/// Why the service could not run.
#[derive(Debug)]
#[non_exhaustive]
pub enum ServeError {
    /// The rules are invalid (every problem listed).
    Config(ConfigErrors),
    /// A setting of [`ServerConfig`] is invalid (the admin token).
    Setting(String),
    /// A listener or the watch failed.
    Io(String),
}

impl std::fmt::Display for ServeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServeError::Config(errors) => write!(f, "{errors}"),
            ServeError::Setting(message) => f.write_str(message),
            ServeError::Io(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for ServeError {}

/// How often histogram samples are folded into their buckets.
const METRICS_UPKEEP: Duration = Duration::from_secs(2);

/// The Prometheus recorder, installed once per process (a second
/// in-process server shares it; `None` if another recorder was there).
fn prometheus() -> Option<PrometheusHandle> {
    static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            // Latencies as histograms (Prometheus computes quantiles across
            // instances from buckets, not from per-process summaries).
            let builder = PrometheusBuilder::new()
                .set_buckets_for_metric(
                    metrics_exporter_prometheus::Matcher::Suffix("_seconds".into()),
                    &[0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0],
                )
                .unwrap_or_else(|_| PrometheusBuilder::new());
            let recorder = builder.build_recorder();
            let handle = recorder.handle();
            metrics::set_global_recorder(recorder).ok()?;
            crate::telemetry::recorder_installed();
            // Histogram samples pile up until upkeep folds them into their
            // buckets: without it, a service nobody scrapes grows by every
            // sample it ever recorded (measured: ~1 MiB a second at 30,000
            // decisions a second).
            let upkeep = handle.clone();
            let spawned = std::thread::Builder::new().name("slidegate-metrics".into()).spawn(move || {
                loop {
                    std::thread::sleep(METRICS_UPKEEP);
                    upkeep.run_upkeep();
                }
            });
            if let Err(error) = spawned {
                tracing::warn!(%error, "cannot start the metrics upkeep thread");
            }
            Some(handle)
        })
        .clone()
}

/// Runs the service until `shutdown` completes, then drains: `/readyz`
/// turns 503, the listeners stop accepting, requests in flight finish
/// (for at most `grace`).
///
/// # Errors
///
/// [`ServeError::Config`] when the rules are invalid at start;
/// [`ServeError::Setting`] for an admin token no client could send;
/// [`ServeError::Io`] when the rules cannot be read or watched.
pub async fn serve(
    config: ServerConfig,
    listeners: Listeners,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    if config.rules.is_none() && config.gateway.is_none() {
        return Err(ServeError::Io("nothing to serve: give rules, a gateway file or both".into()));
    }
    if listeners.gateway.is_some() && config.gateway.is_none() {
        return Err(ServeError::Io("a gateway listener needs a gateway file".into()));
    }
    if let Some(token) = &config.admin_token {
        check_admin_token(token).map_err(ServeError::Setting)?;
    }
    let (rules_path, gateway_path) = (config.rules.clone(), config.gateway.clone());
    let (seen, loaded, gateway_config) = tokio::task::spawn_blocking(move || {
        let seen = Seen::now(rules_path.as_deref(), gateway_path.as_deref());
        let rules = rules_path.as_deref().map_or_else(|| Ok(Config::default()), Config::load);
        let gateway = gateway_path.as_deref().map(GatewayConfig::load).transpose();
        (seen, rules, gateway)
    })
    .await
    .map_err(|e| ServeError::Io(e.to_string()))?;
    let loaded = loaded.map_err(ServeError::Config)?;
    let gateway_config = gateway_config.map_err(ServeError::Config)?;
    let status =
        Arc::new(ServiceStatus::new(loaded.hash(), gateway_config.as_ref().map(|g| g.hash.as_str())));
    let rules = Rules::new(loaded);
    let store_kind = config.store.kind();
    // Shadow mode and the failure answer are the limiter's: every edge
    // (RLS, the HTTP API, the gateway) decides through it.
    let policy = match config.on_store_failure {
        OnStoreFailure::Policy => config.policy,
        OnStoreFailure::Unavailable => FailurePolicy::Fail,
    };
    let limiter =
        Limiter::builder(config.store).deadline(config.deadline).failure_policy(policy).shadow(config.shadow);
    let limiter = if config.deny_cache { limiter } else { limiter.no_deny_cache() }.build();
    let _probing = Probing::start(limiter.clone());
    let decider = Decider::new(limiter.clone(), rules.clone());
    // Installed before the gateway's routes register their metrics (only
    // with an HTTP listener to export them).
    let metrics = if listeners.http.is_some() { prometheus() } else { None };
    let gateway = gateway_config
        .map(|gateway| {
            Gateway::new(gateway, limiter, config.headers, decider.shared_stats(), config.header_timeout)
        })
        .transpose()
        .map_err(ServeError::Config)?;
    let reloader = Reloader::with_gateway(
        rules,
        config.rules.clone(),
        gateway.clone().zip(config.gateway.clone()),
        status.clone(),
        seen,
    );
    let _watch = if config.watch {
        Some(reloader.watch().map_err(|e| ServeError::Io(format!("cannot watch the configuration: {e}")))?)
    } else {
        None
    };
    let hangups = hangup_task(reloader.clone());

    let (drain, drained) = watch::channel(false);
    // Every connection of both APIs runs in this set: the drain waits for
    // them, and the end of the grace period ends them.
    let connections = Arc::new(std::sync::Mutex::new(JoinSet::new()));
    let mut accepting = JoinSet::new();
    let (health, health_service) = tonic_health::server::health_reporter();
    if let Some(listener) = listeners.grpc {
        health.set_serving::<RateLimitServiceServer<Rls>>().await;
        let rls = RateLimitServiceServer::new(Rls::new(decider.clone(), config.headers))
            .max_decoding_message_size(MAX_BODY_BYTES);
        let grpc = tonic::service::Routes::new(health_service)
            .add_service(rls)
            .into_axum_router()
            .layer(tower::util::MapResponseLayer::new(oversized_is_invalid));
        accepting.spawn(accept(
            listener,
            api(grpc, config.header_timeout),
            drained.clone(),
            connections.clone(),
            config.header_timeout,
        ));
    }
    if let Some(listener) = listeners.http {
        let app = Api::new(
            AppState {
                decider,
                families: config.headers,
                status: status.clone(),
                reloader,
                metrics,
                admin_token: config.admin_token.map(Arc::from),
                store_kind,
                gateway: gateway.clone(),
                server_stats: Arc::default(),
            },
            config.header_timeout,
        );
        accepting.spawn(accept(
            listener,
            api(app, config.header_timeout),
            drained.clone(),
            connections.clone(),
            config.header_timeout,
        ));
    }
    if let (Some(listener), Some(gateway)) = (listeners.gateway, gateway) {
        let tasks = connections.clone();
        let make = move |peer: SocketAddr| {
            let (service, builder, slot) = gateway.connection(peer, &tasks)?;
            Some(Connection { service, builder, slot: Some(slot) })
        };
        accepting.spawn(accept(listener, make, drained.clone(), connections.clone(), config.header_timeout));
    }
    tracing::info!(target: "slidegate", "serving");

    shutdown.await;
    status.begin_shutdown();
    health.set_not_serving::<RateLimitServiceServer<Rls>>().await;
    let _ = drain.send(true);
    hangups.abort();
    // The listeners close; connections are asked to finish (HTTP/1 after
    // the request in flight, HTTP/2 with GOAWAY).
    while accepting.join_next().await.is_some() {}
    tracing::info!(target: "slidegate", grace = ?config.grace, "draining");
    let mut connections = std::mem::take(&mut *lock(&connections));
    let drained =
        tokio::time::timeout(config.grace, async { while connections.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        tracing::warn!(
            target: "slidegate",
            left = connections.len(),
            "grace period over; requests still in flight are dropped"
        );
        connections.abort_all();
        while connections.join_next().await.is_some() {}
    }
    Ok(())
}

/// A gRPC message over [`MAX_BODY_BYTES`] is refused by tonic, before it
/// is parsed, with `OUT_OF_RANGE`; slidegate answers every malformed
/// request `INVALID_ARGUMENT` (Envoy and clients treat the two alike, but
/// one code is one thing to look for). The RLS service itself never
/// answers `OUT_OF_RANGE`.
fn oversized_is_invalid(mut response: axum::response::Response) -> axum::response::Response {
    const GRPC_STATUS: http::HeaderName = http::HeaderName::from_static("grpc-status");
    if let Some(status) = response.headers_mut().get_mut(GRPC_STATUS)
        && status == "11"
    {
        *status = http::HeaderValue::from_static("3");
    }
    response
}

/// Completes once `stop` says so.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// How one accepted connection is served.
struct Connection<S> {
    service: S,
    builder: auto::Builder<TokioExecutor>,
    /// Its place under a per-address cap, held while it is open.
    slot: Option<Arc<ConnectionSlot>>,
}

/// An API's connections: all served alike, uncapped; a request's head
/// over HTTP/1.1 must arrive within `header_timeout`.
fn api<S: Clone>(app: S, header_timeout: Duration) -> impl FnMut(SocketAddr) -> Option<Connection<S>> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(header_timeout);
    move |_| Some(Connection { service: app.clone(), builder: builder.clone(), slot: None })
}

/// Accepts connections on `listener` until `stop`, each served (HTTP/1 or
/// HTTP/2, which gRPC speaks, with protocol switches such as WebSocket)
/// as `make` says — or closed at once when it says `None` — in a task of
/// `connections`; then asks them to finish gracefully. A connection that
/// sends nothing within `header_timeout` is closed, and so is one whose
/// HTTP/2 header block does not end within it ([`HeaderBlocks`]).
async fn accept<M, S, B>(
    listener: TcpListener,
    mut make: M,
    mut stop: watch::Receiver<bool>,
    connections: Tasks,
    header_timeout: Duration,
) where
    M: FnMut(SocketAddr) -> Option<Connection<S>>,
    S: tower_service::Service<http::Request<hyper::body::Incoming>, Response = http::Response<B>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let graceful = GracefulShutdown::new();
    let (accept_failed, started) = (LogThrottle::new(), std::time::Instant::now());
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of descriptors or a connection reset before it
                    // was accepted: keep serving the others (and say so
                    // once per interval, not a hundred times a second).
                    let now = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                    if let Some(held_back) = accept_failed.pass(now, LogThrottle::EVERY_MS) {
                        tracing::warn!(
                            target: "slidegate",
                            %error,
                            held_back,
                            "accept failed{THROTTLED_NOTE}"
                        );
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            () = stopped(&mut stop) => break,
        };
        let Some(Connection { service, builder, slot }) = make(peer) else {
            tracing::debug!(target: "slidegate", %peer, "connection refused: too many from this address");
            continue;
        };
        let _ = stream.set_nodelay(true);
        let (watcher, mut closing) = (graceful.watcher(), stop.clone());
        let mut set = lock(&connections);
        // Finished connections leave the set as new ones come.
        while set.try_join_next().is_some() {}
        set.spawn(async move {
            let _slot = slot;
            // hyper waits for the first bytes (HTTP/1 or HTTP/2?) without
            // a timeout of its own: a client that connects and says
            // nothing would hold the connection until shutdown.
            // (Peeked: `readable` may answer before anything arrived.)
            let mut first = [0; 1];
            tokio::select! {
                waited = tokio::time::timeout(header_timeout, stream.peek(&mut first)) => {
                    if waited.is_err() {
                        tracing::debug!(target: "slidegate", %peer, "connection closed: nothing sent in time");
                        return;
                    }
                }
                () = stopped(&mut closing) => return,
            }
            let service = TowerToHyperService::new(service);
            let io = Unvectored(TokioIo::new(HeaderBlocks::new(stream, header_timeout)));
            let connection =
                builder.serve_connection_with_upgrades(io, service).into_owned();
            let _ = watcher.watch(connection).await;
        });
    }
    drop(listener);
    // Signals every connection; they end in their own tasks.
    tokio::spawn(graceful.shutdown());
}

/// Reloads on `SIGHUP` (Unix).
fn hangup_task(reloader: Reloader) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let Ok(mut hangups) = signal(SignalKind::hangup()) else { return };
            while hangups.recv().await.is_some() {
                tracing::info!(target: "slidegate", "SIGHUP: reloading the rules");
                let _ = reloader.reload().await;
            }
        }
        #[cfg(not(unix))]
        drop(reloader);
    })
}
