//! [`RedisStoreBuilder`]: URL or nodes, prefix, clock, timeouts, Cluster
//! connection settings.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use slidegate::{Clock, Error, ErrorKind};

use crate::cluster::{DEFAULT_CLUSTER_CONNECTIONS, DEFAULT_MAX_IN_FLIGHT};
use crate::connect::{Connector, Link, keep_connecting};
use crate::connection::{Topology, parse_topology};
use crate::keys::check_prefix;
use crate::now::ClientClock;
use crate::scripts::Scripts;
use crate::store::{Inner, RedisStore};
use crate::tls::Roots;
use crate::url::redact_url;

/// Default key prefix.
pub const DEFAULT_PREFIX: &str = "sg:";
/// Default time allowed to open a connection.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// Default time allowed for one reply.
pub const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_millis(500);
/// Default most checks auto-batched into one script call.
pub const DEFAULT_AUTO_BATCH: usize = 64;
/// Default [`RedisStoreBuilder::max_clock_skew`]: how far apart the clocks
/// of client-clock mode's clients may be.
pub const DEFAULT_MAX_CLOCK_SKEW: Duration = Duration::from_secs(60);

/// Configures a [`RedisStore`].
pub struct RedisStoreBuilder {
    /// A URL, or the error parsing it gave (reported by `connect`).
    topology: Result<Topology, Error>,
    prefix: String,
    clock: Option<Arc<dyn Clock>>,
    max_clock_skew: Duration,
    connect_timeout: Duration,
    response_timeout: Duration,
    cluster_connections: usize,
    max_in_flight: usize,
    auto_batch: usize,
    /// A PEM file of the CA certificates to trust for TLS, instead of the
    /// system's.
    tls_ca_file: Option<PathBuf>,
    /// Whether `connect` returns before the servers answer.
    lazy: bool,
}

impl fmt::Debug for RedisStoreBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStoreBuilder")
            .field("servers", &describe(&self.topology))
            .field("prefix", &self.prefix)
            .field("client_clock", &self.clock.is_some())
            .field("max_clock_skew", &self.max_clock_skew)
            .field("connect_timeout", &self.connect_timeout)
            .field("response_timeout", &self.response_timeout)
            .field("auto_batch", &self.auto_batch)
            .field("tls_ca_file", &self.tls_ca_file)
            .field("lazy", &self.lazy)
            .finish_non_exhaustive()
    }
}

/// The servers, passwords hidden.
pub(crate) fn describe(topology: &Result<Topology, Error>) -> String {
    match topology {
        Ok(Topology::Standalone(url)) => redact_url(url),
        Ok(Topology::Cluster(nodes)) => {
            format!("cluster {}", nodes.iter().map(|n| redact_url(n)).collect::<Vec<_>>().join(","))
        }
        Ok(Topology::Sentinel { sentinels, master, .. }) => {
            format!("primary {master:?} of sentinels {}", sentinels.join(","))
        }
        Err(_) => "(invalid URL)".to_owned(),
    }
}

impl RedisStoreBuilder {
    /// The roots to trust: the CA file's, or the system's.
    fn roots(&self) -> Result<Roots, Error> {
        let Some(file) = &self.tls_ca_file else { return Ok(Roots::default()) };
        let pem = std::fs::read(file).map_err(|e| {
            Error::with_source(
                ErrorKind::InvalidConfig,
                format!("cannot read the TLS CA file {}", file.display()),
                e,
            )
        })?;
        if !pem.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----") {
            return Err(Error::new(
                ErrorKind::InvalidConfig,
                format!("the TLS CA file {} holds no PEM certificate", file.display()),
            ));
        }
        Ok(Roots(Some(Arc::new(pem))))
    }

    pub(crate) fn new(topology: Result<Topology, Error>) -> Self {
        RedisStoreBuilder {
            topology,
            prefix: DEFAULT_PREFIX.to_owned(),
            clock: None,
            max_clock_skew: DEFAULT_MAX_CLOCK_SKEW,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            response_timeout: DEFAULT_RESPONSE_TIMEOUT,
            cluster_connections: DEFAULT_CLUSTER_CONNECTIONS,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            auto_batch: DEFAULT_AUTO_BATCH,
            tls_ca_file: None,
            lazy: false,
        }
    }

    /// Prefix of every key (default [`DEFAULT_PREFIX`]); gives applications
    /// or test runs sharing one Redis separate namespaces. Checked by
    /// [`connect`](Self::connect) (see [`check_prefix`](crate::check_prefix)).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Trusts the CA certificates in `pem_file` (PEM) for TLS
    /// (`rediss://…`), instead of the system's roots: a managed Redis with
    /// a private CA, or a test's own. Read by [`connect`](Self::connect).
    /// Needs the `tls` feature.
    pub fn tls_ca_file(mut self, pem_file: impl Into<PathBuf>) -> Self {
        self.tls_ca_file = Some(pem_file.into());
        self
    }

    /// Client-clock mode: the scripts decide at `clock`'s time instead of
    /// Redis' `TIME`. Only for servers that forbid `TIME` and for trace
    /// replay; the server's clock is the better choice wherever it can be
    /// had.
    ///
    /// Client time then decides everything, also when state may disappear:
    /// a key lives for as long as any charge in it counts in client time.
    /// Its TTL, which Redis counts on its own clock, is therefore that time
    /// plus 1 s plus [`max_clock_skew`](Self::max_clock_skew). What this
    /// mode needs from its clients:
    ///
    /// * **Clocks that agree**: every client sharing the store (and the
    ///   same client over a key's life) within `max_clock_skew` of each
    ///   other, as NTP keeps them. A client running behind another by more
    ///   than that can find a key the other wrote already expired, and
    ///   admit what its charges still forbid; clients that disagree by less
    ///   still disagree about where the window is, by their skew.
    /// * **Times within `0..=`[`MAX_TIME_MS`](slidegate::limits::MAX_TIME_MS)**: a
    ///   clock reading beyond is refused with
    ///   [`InvalidTime`](slidegate::ErrorKind::InvalidTime).
    ///
    /// A clock stepping back is handled (its charges are kept in order and
    /// still count), and auto-batching is off in this mode.
    pub fn client_clock(mut self, clock: impl Clock) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }

    /// Client-clock mode only: the most the clients' clocks may disagree
    /// (default [`DEFAULT_MAX_CLOCK_SKEW`], at most 366 days); keys live
    /// this much longer than their charges count (see
    /// [`client_clock`](Self::client_clock)). A replay of a trace, whose
    /// time moves at whatever pace its input comes, needs a long one.
    pub fn max_clock_skew(mut self, skew: Duration) -> Self {
        self.max_clock_skew = skew.min(slidegate::limits::MAX_WINDOW);
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

    /// Cluster only: how many cluster connections calls are spread over
    /// (default [`DEFAULT_CLUSTER_CONNECTIONS`](crate::DEFAULT_CLUSTER_CONNECTIONS)).
    pub fn cluster_connections(mut self, connections: usize) -> Self {
        self.cluster_connections = connections.clamp(1, 64);
        self
    }

    /// Cluster only: the most calls in flight on one cluster connection
    /// (default [`DEFAULT_MAX_IN_FLIGHT`](crate::DEFAULT_MAX_IN_FLIGHT); redis-rs
    /// connections were seen to stall during a reshard past ~128).
    pub fn max_in_flight(mut self, calls: usize) -> Self {
        self.max_in_flight = calls.max(1);
        self
    }

    /// The most single checks sent together in one script call (default
    /// [`DEFAULT_AUTO_BATCH`](crate::DEFAULT_AUTO_BATCH); `0` or `1` turns
    /// auto-batching off).
    ///
    /// Under load, checks go to the server together: while fewer than
    /// [`AUTO_BATCH_DIRECT`](crate::AUTO_BATCH_DIRECT) checks are out,
    /// every check is sent at once, on its own (a lightly loaded service
    /// sees no difference); past that they queue, and up to
    /// [`AUTO_BATCH_IN_FLIGHT`](crate::AUTO_BATCH_IN_FLIGHT) calls at once
    /// each carry what is queued, decided one after the other by one script
    /// call — less server CPU per check, the same decisions (see
    /// BENCHMARKS.md). Nothing waits for a batch to fill, and a queued
    /// check whose caller stopped waiting (its deadline passed) before it
    /// was sent is not charged. Applies to a standalone server and to
    /// Sentinel, on the server's clock; a Cluster and
    /// [`client_clock`](Self::client_clock) mode send every check on its own.
    pub fn auto_batch(mut self, max_checks: usize) -> Self {
        self.auto_batch = max_checks;
        self
    }

    /// Whether [`connect`](Self::connect) may return a store before its
    /// servers answer (default `false`: it fails then).
    ///
    /// A lazy store tries once, as a strict one does; if the servers
    /// cannot be reached (down, starting, not yet resolvable), it returns
    /// a store that keeps connecting in the background — after 100 ms,
    /// then doubling to at most every second — and fails every call with
    /// [`Unavailable`](ErrorKind::Unavailable) at once until then, so the
    /// limiter's failure policy answers (degraded, counted) and its breaker
    /// sees the outage. Servers that come up are used within about a
    /// second. A service that starts alongside its Redis (a node lost, a
    /// rollout) then starts and answers, instead of failing until Redis
    /// is back. See [`RedisStore::is_connected`] and
    /// [`RedisStore::waiting_for`].
    ///
    /// What waiting cannot heal still fails `connect`, lazy or not: a
    /// malformed URL or prefix, a missing CA file, a certificate the roots
    /// do not trust, a user or password the server refuses, a command its
    /// ACL forbids ([`ErrorKind::InvalidConfig`]). Found only once the
    /// servers come up, such a problem is logged, and the store keeps
    /// trying.
    pub fn lazy(mut self, lazy: bool) -> Self {
        self.lazy = lazy;
        self
    }

    /// Connects, and loads the scripts (on every node of a Cluster).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidConfig`] for a malformed URL or key prefix
    /// (see [`check_prefix`](crate::check_prefix)), and for what waiting
    /// cannot heal (TLS, authentication, ACL; see [`lazy`](Self::lazy));
    /// `Unavailable`/`Timeout` when the servers cannot be reached (not
    /// when [`lazy`](Self::lazy)).
    pub async fn connect(self) -> Result<RedisStore, Error> {
        check_prefix(&self.prefix)?;
        let described = describe(&self.topology);
        let roots = self.roots()?;
        let topology = self.topology?;
        if topology.uses_tls() {
            if !cfg!(feature = "tls") {
                return Err(Error::new(
                    ErrorKind::InvalidConfig,
                    format!("{described}: TLS needs slidegate-redis' `tls` feature"),
                ));
            }
            crate::tls::install_provider();
        }
        let cluster = matches!(topology, Topology::Cluster(_));
        let connector = Connector {
            topology,
            roots,
            connect_timeout: self.connect_timeout,
            response_timeout: self.response_timeout,
            cluster_connections: self.cluster_connections,
            max_in_flight: self.max_in_flight,
            // A client clock's time is each caller's own: nothing to batch.
            auto_batch: if self.clock.is_some() { 0 } else { self.auto_batch },
            scripts: Arc::new(Scripts::new()),
            described: described.clone(),
        };
        let (link, waiting) = match connector.connect().await {
            Ok(connected) => (Link::made(connected), None),
            Err(error) if !self.lazy || error.kind() == ErrorKind::InvalidConfig => return Err(error),
            Err(error) => (Link::waiting(&error), Some(error)),
        };
        let store = RedisStore::from_inner(Inner {
            prefix: self.prefix,
            clock: self.clock.map(|clock| ClientClock::new(clock, self.max_clock_skew)),
            scripts: Arc::clone(&connector.scripts),
            servers: described,
            cluster,
            link: Arc::new(link),
        });
        if let Some(error) = waiting {
            keep_connecting(store.downgrade_link(), connector, &error);
        }
        Ok(store)
    }
}

impl RedisStore {
    /// Starts configuring a store for `url`:
    ///
    /// * `redis://[:password@]host:port/db` — one server;
    /// * `redis+cluster://[:password@]host:port,host:port/` — a Cluster (any
    ///   reachable nodes; the rest are discovered);
    /// * `redis+sentinel://[:password@]host:port,host:port/<primary name>[/db]`
    ///   — the primary a set of sentinels names, followed across failovers
    ///   (the password is the primary's; sentinels are asked without one).
    ///
    /// `rediss://`, `rediss+cluster://` and `rediss+sentinel://` speak TLS
    /// (the `tls` feature), trusting the system's roots or
    /// [`tls_ca_file`](RedisStoreBuilder::tls_ca_file); ACL users log in as
    /// `redis://user:password@host:port/`.
    pub fn builder(url: impl Into<String>) -> RedisStoreBuilder {
        RedisStoreBuilder::new(parse_topology(&url.into()))
    }

    /// Starts configuring a store for a Cluster given by the `redis://`
    /// URLs of some of its nodes.
    pub fn cluster_builder<I, U>(nodes: I) -> RedisStoreBuilder
    where
        I: IntoIterator<Item = U>,
        U: Into<String>,
    {
        let nodes: Vec<String> = nodes.into_iter().map(Into::into).collect();
        let topology = if nodes.is_empty() {
            Err(Error::new(ErrorKind::InvalidConfig, "a cluster needs at least one node URL"))
        } else {
            Ok(Topology::Cluster(nodes))
        };
        RedisStoreBuilder::new(topology)
    }

    /// Connects with default settings.
    ///
    /// # Errors
    ///
    /// As [`RedisStoreBuilder::connect`].
    pub async fn connect(url: &str) -> Result<RedisStore, Error> {
        RedisStore::builder(url).connect().await
    }
}
