//! [`RedisStore`]: decisions made by one atomic Lua script call.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::io::tcp::TcpSettings;
use slidegate::{
    BatchItem, Clock, Decision, Dimension, Error, ErrorKind, MultiDecision, Rule, Store, validate_cost,
    validate_dimensions,
};

use crate::commands::{self, Call, Shape};
use crate::errors::from_redis;
use crate::scripts::{self, Scripts};
use crate::url::redact_url;

/// Default key prefix.
pub const DEFAULT_PREFIX: &str = "sg:";
/// Default time allowed to open a connection.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// Default time allowed for one reply.
pub const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_millis(500);

/// A [`Store`] on a standalone Redis (Sentinel and Cluster come later).
///
/// * Every decision is one `EVALSHA` of the algorithm's script; when Redis
///   answers `NOSCRIPT` (restart, `SCRIPT FLUSH`, failover) the script is
///   loaded and the call retried, invisibly to the caller.
/// * Time is the **Redis server's clock** (`TIME` inside the script), so
///   application nodes with skewed clocks share one timeline. With
///   [`RedisStoreBuilder::client_clock`] the time is sent by the client
///   instead, for servers that forbid `TIME` and for trace replay.
/// * Keys are `<prefix><rule>:{<identity>}:<part>` (see [`state_key`](crate::state_key)) and
///   every write sets a TTL of the time until the key is empty plus 1 s.
/// * One auto-pipelining, reconnecting `ConnectionManager` with TCP_NODELAY
///   and explicit connect/response timeouts; clones share it.
///
/// ```no_run
/// use std::num::NonZeroU32;
/// use slidegate::{Limiter, Rule};
/// use slidegate_redis::RedisStore;
///
/// # async fn demo() -> Result<(), slidegate::Error> {
/// let store = RedisStore::builder("redis://127.0.0.1:6380/").prefix("myapp:").connect().await?;
/// let limiter = Limiter::new(store);
/// let rule = Rule::per_minute(NonZeroU32::new(100).unwrap()).named("api")?;
/// let decision = limiter.check(&rule, "user-42").await?;
/// println!("allowed: {}, remaining: {}", decision.allowed, decision.remaining);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisStore {
    inner: Arc<Inner>,
}

struct Inner {
    conn: ConnectionManager,
    prefix: String,
    /// `None`: the Redis server's clock decides.
    clock: Option<Arc<dyn Clock>>,
    scripts: Scripts,
    /// Redacted (no password): only for `Debug`.
    url: String,
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("url", &self.inner.url)
            .field("prefix", &self.inner.prefix)
            .field("clock", &self.inner.clock.as_ref().map_or("redis server", |_| "client"))
            .finish()
    }
}

/// Configures a [`RedisStore`].
pub struct RedisStoreBuilder {
    url: String,
    prefix: String,
    clock: Option<Arc<dyn Clock>>,
    connect_timeout: Duration,
    response_timeout: Duration,
}

impl fmt::Debug for RedisStoreBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStoreBuilder")
            .field("url", &redact_url(&self.url))
            .field("prefix", &self.prefix)
            .field("client_clock", &self.clock.is_some())
            .field("connect_timeout", &self.connect_timeout)
            .field("response_timeout", &self.response_timeout)
            .finish()
    }
}

impl RedisStoreBuilder {
    /// Prefix of every key (default [`DEFAULT_PREFIX`]); gives applications
    /// or test runs sharing one Redis separate namespaces.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Client-clock mode: the script uses `clock`'s time instead of Redis'
    /// `TIME`. Only for servers that forbid `TIME` and for trace replay —
    /// nodes with skewed clocks then disagree about the window.
    pub fn client_clock(mut self, clock: impl Clock) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }

    /// Time allowed to open a connection (default [`DEFAULT_CONNECT_TIMEOUT`]).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Time allowed for one reply (default [`DEFAULT_RESPONSE_TIMEOUT`]).
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// Connects, and loads the scripts.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Backend`] for a malformed URL; `Unavailable`/`Timeout`
    /// when the server cannot be reached.
    pub async fn connect(self) -> Result<RedisStore, Error> {
        let url = redact_url(&self.url);
        let client = redis::Client::open(self.url.as_str())
            .map_err(|e| Error::with_source(ErrorKind::Backend, format!("invalid Redis URL {url:?}"), e))?;
        let info =
            client.get_connection_info().clone().set_tcp_settings(TcpSettings::default().set_nodelay(true));
        let client = redis::Client::open(info).map_err(|e| from_redis("configuring the client", e))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_response_timeout(Some(self.response_timeout))
            .set_number_of_retries(2)
            .set_max_delay(Duration::from_millis(500));
        let mut conn = ConnectionManager::new_with_config(client, config)
            .await
            .map_err(|e| from_redis(&format!("connecting to {url}"), e))?;
        let scripts = Scripts::new();
        for script in scripts.all() {
            script.load_async(&mut conn).await.map_err(|e| from_redis("loading scripts", e))?;
        }
        Ok(RedisStore {
            inner: Arc::new(Inner { conn, prefix: self.prefix, clock: self.clock, scripts, url }),
        })
    }
}

impl RedisStore {
    /// Starts configuring a store for `url` (`redis://host:port/db`,
    /// `rediss://…` is not enabled in this build).
    pub fn builder(url: impl Into<String>) -> RedisStoreBuilder {
        RedisStoreBuilder {
            url: url.into(),
            prefix: DEFAULT_PREFIX.to_owned(),
            clock: None,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            response_timeout: DEFAULT_RESPONSE_TIMEOUT,
        }
    }

    /// Connects with default settings.
    ///
    /// # Errors
    ///
    /// As [`RedisStoreBuilder::connect`].
    pub async fn connect(url: &str) -> Result<RedisStore, Error> {
        RedisStore::builder(url).connect().await
    }

    /// The key prefix.
    pub fn prefix(&self) -> &str {
        &self.inner.prefix
    }

    /// A clone of the underlying connection, for administrative commands.
    pub fn connection(&self) -> ConnectionManager {
        self.inner.conn.clone()
    }

    /// The clock argument of the scripts: the client clock's time, or `""`
    /// for the Redis server's.
    pub(crate) fn now_arg(&self) -> String {
        self.inner.clock.as_ref().map(|c| c.now_ms().to_string()).unwrap_or_default()
    }

    pub(crate) fn scripts(&self) -> &Scripts {
        &self.inner.scripts
    }

    /// Sends one call and returns its reply.
    pub(crate) async fn send(&self, call: &Call<'_>) -> Result<Vec<i64>, Error> {
        let mut conn = self.inner.conn.clone();
        scripts::run(&mut conn, call.script, &call.cmd)
            .await
            .map_err(|e| from_redis("running the limiter script", e))
    }
}

impl Store for RedisStore {
    async fn check(&self, rule: &Rule, key: &str, cost: u32) -> Result<Decision, Error> {
        validate_cost(rule, cost)?;
        let call =
            commands::single(&self.inner.scripts, &self.inner.prefix, rule, key, cost, &self.now_arg())?;
        let reply = self.send(&call).await?;
        match call.shape {
            Shape::Single => commands::single_decision(rule, &reply),
            Shape::General(_) => {
                let mut decisions = commands::general_decisions(&[rule], &reply)?;
                decisions.pop().ok_or_else(|| Error::new(ErrorKind::Backend, "empty script reply"))
            }
        }
    }

    /// One script call for all dimensions. (Standalone Redis: every key is
    /// on the one server; Cluster support groups keys by slot.)
    async fn check_all(&self, dimensions: &[Dimension<'_>], cost: u32) -> Result<MultiDecision, Error> {
        validate_dimensions(dimensions, cost)?;
        let call =
            commands::general(&self.inner.scripts, &self.inner.prefix, dimensions, cost, &self.now_arg())?;
        let reply = self.send(&call).await?;
        let rules: Vec<&Rule> = dimensions.iter().map(|(rule, _)| *rule).collect();
        Ok(MultiDecision::from_decisions(commands::general_decisions(&rules, &reply)?))
    }

    async fn check_batch(&self, requests: &[BatchItem<'_>]) -> Vec<Result<Decision, Error>> {
        crate::batch::check_batch(self, requests).await
    }
}

#[cfg(test)]
mod tests {
    use crate::redact_url;

    #[test]
    fn passwords_never_reach_messages() {
        assert_eq!(redact_url("redis://:secret@host:6380/0"), "redis://:***@host:6380/0");
        assert_eq!(redact_url("redis://u:pw@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(redact_url("rediss://pw@h/"), "rediss://***@h/");
        assert_eq!(redact_url("redis://h:1/"), "redis://h:1/");
        let builder = super::RedisStore::builder("redis://:secret@h/");
        assert!(!format!("{builder:?}").contains("secret"));
    }
}
