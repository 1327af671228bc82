//! `serve`: the service on its listeners until shutdown.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitServiceServer;
use slidegate::{FailurePolicy, Limiter};
use slidegate_tower::headers::Families;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::api::rls::{Rls, oversized_is_invalid};
use crate::api::{Api, AppState, MAX_BODY_BYTES};
use crate::config::{Config, ConfigErrors, GatewayConfig, Rules};
use crate::decide::Decider;
use crate::gateway::Gateway;
use crate::runtime::accept::{Connection, accept, api, lock};
use crate::runtime::exporter::prometheus;
use crate::runtime::reload::{Reloader, Seen, certificate_files};
use crate::runtime::status::ServiceStatus;
use crate::runtime::watch::hangup_task;
use crate::store::Probing;
use crate::{OnStoreFailure, ServiceStore};

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
    /// Whether `serve` installs the process's global metrics recorder
    /// (Prometheus, exported at `/metrics`; once per process, shared by
    /// every server in it). Off by default: an embedding program may have
    /// its own. `slidegate serve` turns it on.
    pub metrics_recorder: bool,
    /// Whether a reload runs at the lowest thread priority with the
    /// process's transparent huge pages off meanwhile (Linux): it then
    /// disturbs the decisions around it least. Process-wide, so off by
    /// default; `slidegate serve` turns it on.
    pub tune_process: bool,
}

/// The fewest characters an admin token may have.
pub(crate) const MIN_ADMIN_TOKEN_LEN: usize = 16;

/// Checks an admin token ([`ServerConfig::admin_token`]): at least
/// 16 characters, each printable ASCII (`!` to `~`).
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
            metrics_recorder: false,
            tune_process: false,
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
    /// Plain HTTP redirected to the gateway's HTTPS.
    pub redirect: Option<TcpListener>,
}

impl Listeners {
    /// The two API listeners.
    pub fn new(grpc: Option<TcpListener>, http: Option<TcpListener>) -> Listeners {
        Listeners { grpc, http, gateway: None, redirect: None }
    }

    /// With the gateway's listener.
    pub fn with_gateway(mut self, gateway: TcpListener) -> Listeners {
        self.gateway = Some(gateway);
        self
    }

    /// With a plain-HTTP listener whose every request is redirected to the
    /// gateway's HTTPS (the gateway file must have a `tls:` block).
    pub fn with_redirect(mut self, redirect: TcpListener) -> Listeners {
        self.redirect = Some(redirect);
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
    if listeners.redirect.is_some() && listeners.gateway.is_none() {
        return Err(ServeError::Io("a listener redirecting to HTTPS needs the gateway's listener".into()));
    }
    if let Some(token) = &config.admin_token {
        check_admin_token(token).map_err(ServeError::Setting)?;
    }
    let (rules_path, gateway_path) = (config.rules.clone(), config.gateway.clone());
    let (seen, loaded, gateway_config) = tokio::task::spawn_blocking(move || {
        let seen = Seen::now(rules_path.as_deref(), gateway_path.as_deref(), &[]);
        let rules = rules_path.as_deref().map_or_else(|| Ok(Config::default()), Config::load);
        let gateway = gateway_path.as_deref().map(GatewayConfig::load).transpose();
        // The certificates were read with the gateway file: stamped after.
        let certificates = certificate_files(gateway.as_ref().ok().and_then(Option::as_ref));
        let seen = seen.with_certificates(&certificates);
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
    let metrics = if config.metrics_recorder && listeners.http.is_some() { prometheus() } else { None };
    if config.tune_process {
        crate::runtime::process::tune(true);
    }
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
        // Whether the listener speaks TLS is settled here, by the gateway
        // file it starts with (a reload changes certificates, not that).
        let tls =
            gateway.tls_acceptor().map_err(|e| ServeError::Setting(format!("the gateway's TLS: {e}")))?;
        if let Some(redirect) = listeners.redirect {
            if tls.is_none() {
                return Err(ServeError::Setting(
                    "a listener redirecting to HTTPS needs the gateway file's `tls:` block".into(),
                ));
            }
            let port = listener.local_addr().map_err(|e| ServeError::Io(e.to_string()))?.port();
            let to_https = api(crate::gateway::ToHttps { port }, config.header_timeout);
            accepting.spawn(accept(
                redirect,
                to_https,
                drained.clone(),
                connections.clone(),
                config.header_timeout,
            ));
        }
        let make = move |peer: SocketAddr| {
            let (service, builder, slot) = gateway.connection(peer, &tasks, tls.is_some())?;
            Some(Connection { service, builder, slot: Some(slot), tls: tls.clone() })
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
