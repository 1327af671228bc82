//! `--store memory|redis://…`: which store a command talks to, and the one
//! way every command connects to Redis ([`connect_redis`]).
//!
//! [`Store`] returns `impl Future`, so it cannot be a trait object: the
//! store is chosen at run time through enums — the service's
//! [`ServiceStore`] (the embedded store or Redis), and [`AnyStore`], which
//! adds the benchmark's baselines to it.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use slidegate::store::{Dimensions, Request, Store};
use slidegate::{Decision, Error, ManualClock, MultiDecision};
use slidegate_redis::{RedisStore, redact_url};
use slidegate_server::ServiceStore;

/// A parsed `--store` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreSpec {
    /// The embedded in-memory store.
    Memory,
    /// A Redis server at this `redis://` or `rediss://` URL.
    Redis {
        /// The URL as given (may hold a password: print it with
        /// [`StoreSpec`]'s `Display`, which hides it).
        url: String,
    },
}

impl FromStr for StoreSpec {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("memory") {
            return Ok(StoreSpec::Memory);
        }
        let lower = text.to_ascii_lowercase();
        const SCHEMES: [&str; 6] = [
            "redis://",
            "rediss://",
            "redis+cluster://",
            "rediss+cluster://",
            "redis+sentinel://",
            "rediss+sentinel://",
        ];
        if SCHEMES.iter().any(|scheme| lower.starts_with(scheme)) {
            return Ok(StoreSpec::Redis { url: text.to_owned() });
        }
        Err(format!(
            "expected `memory` or a redis://, redis+cluster://host:port,host:port/ or \
             redis+sentinel://host:port/<primary> URL, got {text:?}"
        ))
    }
}

impl StoreSpec {
    /// The store that repeated `--store` flags name: one flag as it is;
    /// several, the `redis://` URLs of one Cluster's nodes.
    ///
    /// # Errors
    ///
    /// When several are given and one is not a plain `redis://host:port/`
    /// URL, or they carry different credentials.
    pub fn from_many(specs: &[StoreSpec]) -> anyhow::Result<StoreSpec> {
        match specs {
            [] => Ok(StoreSpec::Memory),
            [one] => Ok(one.clone()),
            many => {
                let mut credentials = None;
                let mut hosts = Vec::with_capacity(many.len());
                for spec in many {
                    let StoreSpec::Redis { url } = spec else {
                        anyhow::bail!(
                            "several --store flags name the nodes of one Cluster: `memory` cannot be one"
                        );
                    };
                    let Some(rest) = url.strip_prefix("redis://") else {
                        anyhow::bail!(
                            "several --store flags name the nodes of one Cluster, each as redis://host:port/; got {}",
                            redact_url(url)
                        );
                    };
                    let authority = rest.split('/').next().unwrap_or_default();
                    let (userinfo, host) = match authority.rsplit_once('@') {
                        Some((userinfo, host)) => (format!("{userinfo}@"), host),
                        None => (String::new(), authority),
                    };
                    if host.is_empty() {
                        anyhow::bail!("{} names no host", redact_url(url));
                    }
                    if credentials.get_or_insert_with(|| userinfo.clone()) != &userinfo {
                        anyhow::bail!("the Cluster node URLs carry different credentials");
                    }
                    hosts.push(host.to_owned());
                }
                let userinfo = credentials.unwrap_or_default();
                Ok(StoreSpec::Redis { url: format!("redis+cluster://{userinfo}{}/", hosts.join(",")) })
            }
        }
    }
}

impl fmt::Display for StoreSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreSpec::Memory => f.write_str("memory"),
            StoreSpec::Redis { url } => f.write_str(&redact_url(url)),
        }
    }
}

/// How to connect to Redis: the parts that differ between commands.
#[derive(Debug, Clone, Default)]
pub struct RedisOptions {
    /// Key prefix (`None`: the store's default); `bench` and `replay` use a
    /// fresh one per run so runs never share state.
    pub prefix: Option<String>,
    /// `Some` to decide with this clock instead of the Redis server's
    /// (replay), with the clock skew keys must outlive (see
    /// [`RedisStoreBuilder::max_clock_skew`](slidegate_redis::RedisStoreBuilder::max_clock_skew)).
    pub client_clock: Option<(ManualClock, Duration)>,
    /// Deadline of each call; `None` keeps the store's default.
    pub response_timeout: Option<Duration>,
    /// Sends every check as its own script call instead of auto-batching
    /// concurrent single checks (the store's default).
    pub no_auto_batch: bool,
    /// The CA certificate file that verifies a `rediss://` server.
    pub tls_ca_file: Option<std::path::PathBuf>,
    /// Returns the store even when Redis cannot be reached yet, connecting
    /// in the background (`serve`: an outage at start is like any other).
    pub lazy: bool,
}

/// A fresh key prefix for one run of `purpose`, e.g. `sg:replay:3f9a…:`.
pub fn run_prefix(purpose: &str) -> String {
    format!("sg:{purpose}:{:016x}:", rand::random::<u64>())
}

/// Checks a user-given key prefix (`bench --prefix`) for clap.
///
/// # Errors
///
/// A message saying what is wrong when the prefix is empty or fails
/// [`slidegate_redis::check_prefix`] (too long, whitespace, control
/// characters, braces).
pub fn parse_key_prefix(text: &str) -> Result<String, String> {
    if text.is_empty() {
        return Err("the key prefix must not be empty".to_owned());
    }
    slidegate_redis::check_prefix(text).map_err(|e| e.message().to_owned())?;
    Ok(text.to_owned())
}

/// Connects to the Redis server at `url`.
///
/// # Errors
///
/// When the URL is invalid or the server cannot be reached in time.
pub async fn connect_redis(url: &str, options: RedisOptions) -> anyhow::Result<RedisStore> {
    let mut builder = RedisStore::builder(url).lazy(options.lazy);
    if let Some(prefix) = options.prefix {
        builder = builder.prefix(prefix);
    }
    if let Some(ca) = options.tls_ca_file {
        builder = builder.tls_ca_file(ca);
    }
    if let Some((clock, skew)) = options.client_clock {
        builder = builder.client_clock(clock).max_clock_skew(skew);
    }
    if let Some(timeout) = options.response_timeout {
        builder = builder.response_timeout(timeout);
    }
    if options.no_auto_batch {
        builder = builder.auto_batch(0);
    }
    // The store's errors name the servers (passwords hidden) and the cause.
    Ok(builder.connect().await?)
}

/// The service's store, or one of the benchmark's baselines.
#[derive(Debug, Clone)]
pub enum AnyStore {
    /// The embedded store or Redis, as `slidegate serve` decides with it.
    Service(ServiceStore),
    /// The naive ZSET script of the source articles (`bench --baseline`).
    Naive(crate::baselines::NaiveZset),
    /// A `PING` per check (`bench --baseline ping`).
    Ping(crate::baselines::Ping),
}

impl Store for AnyStore {
    async fn check(&self, request: &Request<'_>) -> Result<Decision, Error> {
        match self {
            AnyStore::Service(store) => store.check(request).await,
            AnyStore::Naive(store) => store.check(request).await,
            AnyStore::Ping(store) => store.check(request).await,
        }
    }

    async fn check_all(&self, dimensions: &Dimensions<'_>) -> Result<MultiDecision, Error> {
        match self {
            AnyStore::Service(store) => store.check_all(dimensions).await,
            AnyStore::Naive(_) | AnyStore::Ping(_) => {
                Err(Error::new(slidegate::ErrorKind::Backend, "the baselines have no multi-dimension checks"))
            }
        }
    }

    async fn acquire(&self, lease: &slidegate::store::LeaseRequest<'_>) -> Result<Decision, Error> {
        match self {
            AnyStore::Service(store) => store.acquire(lease).await,
            AnyStore::Naive(_) | AnyStore::Ping(_) => {
                Err(Error::new(slidegate::ErrorKind::Backend, "the baselines hold no leases"))
            }
        }
    }

    async fn release(&self, lease: &slidegate::store::LeaseRequest<'_>) -> Result<bool, Error> {
        match self {
            AnyStore::Service(store) => store.release(lease).await,
            AnyStore::Naive(_) | AnyStore::Ping(_) => {
                Err(Error::new(slidegate::ErrorKind::Backend, "the baselines hold no leases"))
            }
        }
    }

    async fn renew(&self, lease: &slidegate::store::LeaseRequest<'_>) -> Result<bool, Error> {
        match self {
            AnyStore::Service(store) => store.renew(lease).await,
            AnyStore::Naive(_) | AnyStore::Ping(_) => {
                Err(Error::new(slidegate::ErrorKind::Backend, "the baselines hold no leases"))
            }
        }
    }

    async fn reserve(
        &self,
        reservation: &slidegate::store::ReservationRequest<'_>,
        estimate: u32,
        ttl_ms: u64,
    ) -> Result<Decision, Error> {
        match self {
            AnyStore::Service(store) => store.reserve(reservation, estimate, ttl_ms).await,
            AnyStore::Naive(_) | AnyStore::Ping(_) => {
                Err(Error::new(slidegate::ErrorKind::Backend, "the baselines hold no reservations"))
            }
        }
    }

    async fn settle(
        &self,
        reservation: &slidegate::store::ReservationRequest<'_>,
        actual: u32,
    ) -> Result<Option<Decision>, Error> {
        match self {
            AnyStore::Service(store) => store.settle(reservation, actual).await,
            AnyStore::Naive(_) | AnyStore::Ping(_) => {
                Err(Error::new(slidegate::ErrorKind::Backend, "the baselines hold no reservations"))
            }
        }
    }

    /// The memory store is local, so a [`Limiter`](slidegate::Limiter) calls
    /// it directly, as it would without this enum in between.
    fn is_local(&self) -> bool {
        match self {
            AnyStore::Service(store) => store.is_local(),
            AnyStore::Naive(store) => store.is_local(),
            AnyStore::Ping(store) => store.is_local(),
        }
    }

    /// A Redis Cluster's denials are not deny-cached by the limiter, as in
    /// an application (see [`Store::releases_charges`]).
    fn releases_charges(&self) -> bool {
        match self {
            AnyStore::Service(store) => store.releases_charges(),
            AnyStore::Naive(store) => store.releases_charges(),
            AnyStore::Ping(store) => store.releases_charges(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_store_specs() {
        assert_eq!("memory".parse::<StoreSpec>(), Ok(StoreSpec::Memory));
        assert_eq!("MEMORY".parse::<StoreSpec>(), Ok(StoreSpec::Memory));
        for url in [
            "redis://127.0.0.1:7000/",
            "rediss://cache.example:6380/0",
            "redis+cluster://a:7000,b:7001/",
            "redis+sentinel://s:26379/mymaster",
        ] {
            assert_eq!(url.parse::<StoreSpec>(), Ok(StoreSpec::Redis { url: url.to_owned() }));
        }
        let err = "http://x".parse::<StoreSpec>().unwrap_err();
        assert!(err.contains("redis://"), "{err}");
    }

    #[test]
    fn repeated_node_urls_are_one_cluster() {
        let spec = |urls: &[&str]| {
            let specs: Vec<StoreSpec> = urls.iter().map(|u| u.parse().unwrap()).collect();
            StoreSpec::from_many(&specs)
        };
        assert_eq!(spec(&["redis://a:1/"]).unwrap(), StoreSpec::Redis { url: "redis://a:1/".into() });
        assert_eq!(
            spec(&["redis://a:1/", "redis://b:2"]).unwrap(),
            StoreSpec::Redis { url: "redis+cluster://a:1,b:2/".into() }
        );
        assert_eq!(
            spec(&["redis://:pw@a:1/", "redis://:pw@b:2/"]).unwrap(),
            StoreSpec::Redis { url: "redis+cluster://:pw@a:1,b:2/".into() }
        );
        for (urls, why) in [
            (&["redis://a:1/", "memory"][..], "memory"),
            (&["redis://a:1/", "redis+sentinel://s:1/m"], "redis://host:port/"),
            (&["redis://:x@a:1/", "redis://:y@b:2/"], "different credentials"),
            (&["redis://a:1/", "redis:///"], "no host"),
        ] {
            let err = spec(urls).unwrap_err().to_string();
            assert!(err.contains(why), "{urls:?}: {err}");
            assert!(!err.contains(":x@"), "no password in messages: {err}");
        }
    }

    #[test]
    fn hides_passwords() {
        let spec: StoreSpec = "redis://:secret@h/".parse().unwrap();
        assert_eq!(spec.to_string(), "redis://:***@h/");
        let spec: StoreSpec = "redis+cluster://:secret@a:1,b:2/".parse().unwrap();
        assert_eq!(spec.to_string(), "redis+cluster://:***@a:1,b:2/");
    }

    #[test]
    fn prefixes_are_fresh() {
        let (a, b) = (run_prefix("replay"), run_prefix("replay"));
        assert!(a.starts_with("sg:replay:") && a.ends_with(':'));
        assert_ne!(a, b);
    }

    #[test]
    fn checks_key_prefixes() {
        assert_eq!(parse_key_prefix("sg:shared:"), Ok("sg:shared:".to_owned()));
        assert_eq!(
            parse_key_prefix(&"p".repeat(slidegate_redis::MAX_PREFIX_LEN)).map(|p| p.len()),
            Ok(slidegate_redis::MAX_PREFIX_LEN)
        );
        assert!(parse_key_prefix("").unwrap_err().contains("empty"));
        assert!(
            parse_key_prefix(&"p".repeat(slidegate_redis::MAX_PREFIX_LEN + 1))
                .unwrap_err()
                .contains("at most 64")
        );
        for bad in ["a b", "a\tb", "a\nb", "a\u{7f}b", "a\u{a0}b"] {
            assert!(parse_key_prefix(bad).unwrap_err().contains("whitespace or control"), "{bad:?}");
        }
        assert!(parse_key_prefix("a{b}:").unwrap_err().contains("hash tag"));
    }

    #[test]
    fn memory_is_local() {
        let memory = AnyStore::Service(ServiceStore::Memory(slidegate::MemoryStore::new()));
        assert!(memory.is_local() && !memory.releases_charges());
    }
}
