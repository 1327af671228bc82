//! Connecting a store: once, at [`connect`](crate::RedisStoreBuilder::connect),
//! or — with [`lazy`](crate::RedisStoreBuilder::lazy) — again and again in
//! the background until the servers answer, the store failing its calls
//! fast meanwhile (the limiter's failure policy answers them).
//!
//! What waiting cannot heal stops a lazy store too: a malformed URL or
//! prefix, a CA file that is missing, a certificate the roots do not
//! trust, a user or password the server refuses, a command the ACL forbids.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClientBuilder;
use redis::io::tcp::TcpSettings;
use slidegate::{Error, ErrorKind};

use crate::auto_batch::AutoBatch;
use crate::calls::holds::Hold;
use crate::calls::single::Check;
use crate::cluster::ClusterPool;
use crate::connection::{Backend, Topology};
use crate::errors::from_redis;
use crate::replaceable::{Kind, Replaceable};
use crate::scripts::Scripts;
use crate::sentinel::SentinelPool;
use crate::tls::Roots;
use crate::url::redact_url;

/// The first wait between two attempts of a lazy store; it doubles to
/// [`RETRY_AT_MOST`].
const RETRY_FIRST: Duration = Duration::from_millis(100);

/// The longest wait between two attempts of a lazy store: servers that
/// come up are used within about this long.
const RETRY_AT_MOST: Duration = Duration::from_secs(1);

/// How often a lazy store still waiting for its servers says so in the log.
const WAITING_LOG_EVERY: Duration = Duration::from_secs(30);

/// What connecting needs, taken from the builder (a lazy store keeps it
/// for its attempts in the background).
pub(crate) struct Connector {
    pub(crate) topology: Topology,
    pub(crate) roots: Roots,
    pub(crate) connect_timeout: Duration,
    pub(crate) response_timeout: Duration,
    pub(crate) cluster_connections: usize,
    pub(crate) max_in_flight: usize,
    /// The most checks one auto-batched call carries; 1 or less: off.
    pub(crate) auto_batch: usize,
    pub(crate) scripts: Arc<Scripts>,
    /// The servers, passwords hidden.
    pub(crate) described: String,
}

/// A store's connection to its servers, once made.
pub(crate) struct Connected {
    pub(crate) backend: Arc<Backend>,
    /// The servers have per-field hash TTL (`HPEXPIRE`).
    pub(crate) field_ttl: bool,
    /// Single checks go through here when auto-batching applies.
    pub(crate) auto_batch: Option<AutoBatch<Check>>,
    /// Lease and reservation ops, likewise.
    pub(crate) holds: Option<AutoBatch<Hold>>,
}

/// A store's connection: made, or being made in the background.
#[derive(Default)]
pub(crate) struct Link {
    connected: OnceLock<Connected>,
    /// Why the last attempt failed, while none has succeeded.
    waiting: Mutex<Option<String>>,
}

impl Link {
    /// A link not connected yet: the first attempt failed with `error`.
    pub(crate) fn waiting(error: &Error) -> Link {
        Link { connected: OnceLock::new(), waiting: Mutex::new(Some(error.message().to_owned())) }
    }

    /// A link already connected.
    pub(crate) fn made(connected: Connected) -> Link {
        let link = Link::default();
        let _ = link.connected.set(connected);
        link
    }

    /// The connection, or why there is none yet.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Unavailable`] until the servers have been reached.
    pub(crate) fn get(&self, servers: &str) -> Result<&Connected, Error> {
        if let Some(connected) = self.connected.get() {
            return Ok(connected);
        }
        let why = lock(&self.waiting).clone().unwrap_or_else(|| "no attempt has ended yet".to_owned());
        Err(Error::new(ErrorKind::Unavailable, format!("not connected to {servers} yet ({why})")))
    }

    /// The connection, if made.
    pub(crate) fn connected(&self) -> Option<&Connected> {
        self.connected.get()
    }

    /// Why the last attempt failed, while none has succeeded.
    pub(crate) fn waiting_for(&self) -> Option<String> {
        if self.connected.get().is_some() {
            return None;
        }
        lock(&self.waiting).clone()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Connector {
    /// One attempt: connects, loads the scripts, asks for `HPEXPIRE`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidConfig`] for what waiting cannot heal (see the
    /// module docs); `Unavailable`/`Timeout` when the servers cannot be
    /// reached.
    pub(crate) async fn connect(&self) -> Result<Connected, Error> {
        let described = &self.described;
        let failed = |what: &'static str| {
            move |e: redis::RedisError| {
                let error = from_redis(&format!("{what} {described}"), &e);
                if crate::errors::cannot_heal(&e) {
                    Error::new(ErrorKind::InvalidConfig, error.message())
                } else {
                    error
                }
            }
        };
        let (connect, response) = (self.connect_timeout, self.response_timeout);
        let backend = match &self.topology {
            Topology::Standalone(url) => {
                let shown = redact_url(url);
                self.roots.client(url.as_str()).map_err(|e| {
                    Error::with_source(ErrorKind::InvalidConfig, format!("invalid Redis URL {shown:?}"), e)
                })?;
                let conn =
                    manager(url, connect, response, &self.roots).await.map_err(failed("connecting to"))?;
                let (url, roots) = (url.clone(), self.roots.clone());
                let reopen: crate::replaceable::Reopen<ConnectionManager> = Box::new(move || {
                    let (url, roots) = (url.clone(), roots.clone());
                    Box::pin(async move { manager(&url, connect, response, &roots).await })
                });
                Backend::Standalone(Replaceable::new(conn, Kind::Standalone, reopen))
            }
            Topology::Cluster(nodes) => {
                let builder = ClusterClientBuilder::new(nodes.clone())
                    .connection_timeout(connect)
                    .response_timeout(response)
                    .tcp_settings(TcpSettings::default().set_nodelay(true))
                    .retries(3);
                #[cfg(feature = "tls")]
                let builder = match self.roots.certificates() {
                    Some(certificates) => builder.certs(certificates),
                    None => builder,
                };
                let client = builder.build().map_err(|e| {
                    Error::with_source(ErrorKind::InvalidConfig, "invalid cluster node URL", e)
                })?;
                let pool = ClusterPool::connect(client, self.cluster_connections, self.max_in_flight)
                    .await
                    .map_err(failed("connecting to"))?;
                Backend::Cluster(Box::new(pool))
            }
            Topology::Sentinel { sentinels, master, userinfo, db, tls } => {
                let primary_roots = self.roots.clone();
                let pool = SentinelPool::connect(
                    sentinels.clone(),
                    master.clone(),
                    userinfo.clone(),
                    *db,
                    (*tls, self.roots.clone()),
                    move |url: String| {
                        let roots = primary_roots.clone();
                        Box::pin(async move { manager(&url, connect, response, &roots).await })
                            as Pin<Box<dyn Future<Output = redis::RedisResult<ConnectionManager>> + Send>>
                    },
                )
                .await
                .map_err(failed("connecting to"))?;
                Backend::Sentinel(Arc::new(pool))
            }
        };
        backend.load_scripts(&self.scripts).await.map_err(failed("loading scripts on"))?;
        let field_ttl = backend.has_field_ttl().await.map_err(failed("asking for HPEXPIRE on"))?;
        let backend = Arc::new(backend);
        let batched = self.auto_batch > 1 && !backend.is_cluster();
        let (scripts, max) = (&self.scripts, self.auto_batch);
        let auto_batch =
            batched.then(|| AutoBatch::start(Arc::clone(&backend), Arc::clone(scripts), field_ttl, max));
        let holds =
            batched.then(|| AutoBatch::start(Arc::clone(&backend), Arc::clone(scripts), field_ttl, max));
        Ok(Connected { backend, field_ttl, auto_batch, holds })
    }
}

/// Tries to connect again and again, waiting [`RETRY_FIRST`] doubling to
/// [`RETRY_AT_MOST`] between attempts, until an attempt succeeds (and is
/// set in `link`) or the store holding `link` is dropped. `first` is why
/// the first attempt failed.
pub(crate) fn keep_connecting(link: Weak<Link>, connector: Connector, first: &Error) {
    tracing::warn!(
        target: "slidegate",
        servers = %connector.described,
        error = %first,
        "the Redis servers cannot be reached; connecting in the background, the failure policy answers meanwhile"
    );
    let first = first.message().to_owned();
    tokio::spawn(async move {
        let mut wait = RETRY_FIRST;
        let (mut said, mut last) = (tokio::time::Instant::now(), first);
        loop {
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(RETRY_AT_MOST);
            if link.strong_count() == 0 {
                return;
            }
            let attempt = connector.connect().await;
            let Some(link) = link.upgrade() else { return };
            match attempt {
                Ok(connected) => {
                    let _ = link.connected.set(connected);
                    tracing::info!(target: "slidegate", servers = %connector.described, "connected to the Redis servers");
                    return;
                }
                Err(error) => {
                    // Said when the reason changes (the servers came up,
                    // and refuse this client), or now and then.
                    if error.message() != last || said.elapsed() >= WAITING_LOG_EVERY {
                        tracing::warn!(target: "slidegate", servers = %connector.described, %error, "still not connected to the Redis servers");
                        said = tokio::time::Instant::now();
                        last = error.message().to_owned();
                    }
                    *lock(&link.waiting) = Some(error.message().to_owned());
                }
            }
        }
    });
}

/// A reconnecting connection to one server, with TCP_NODELAY and timeouts
/// (and TLS when the URL says so, trusting `roots`).
pub(crate) async fn manager(
    url: &str,
    connect: Duration,
    response: Duration,
    roots: &Roots,
) -> redis::RedisResult<ConnectionManager> {
    let client = redis::Client::open(url)?;
    let info =
        client.get_connection_info().clone().set_tcp_settings(TcpSettings::default().set_nodelay(true));
    let client = roots.client(info)?;
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(connect))
        .set_response_timeout(Some(response))
        .set_number_of_retries(2)
        .set_max_delay(Duration::from_millis(500));
    ConnectionManager::new_with_config(client, config).await
}
