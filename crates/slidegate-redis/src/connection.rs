//! Where the store's calls go: one standalone server (through a
//! reconnecting `ConnectionManager`, replaced when it goes silent), the
//! primary Sentinel names, or a Cluster (through a [`ClusterPool`]); and
//! how a URL names them.

use redis::RedisResult;
use redis::aio::ConnectionManager;
use slidegate::{Error, ErrorKind};

use std::sync::Arc;

use crate::cluster::ClusterPool;
use crate::replaceable::Replaceable;
use crate::scripts::Scripts;
use crate::sentinel::SentinelPool;
use crate::url::redact_url;

/// The servers a store talks to.
pub(crate) enum Backend {
    Standalone(Arc<Replaceable<ConnectionManager>>),
    Cluster(Box<ClusterPool>),
    Sentinel(Arc<SentinelPool>),
}

impl Backend {
    /// Loads every script (on every node of a Cluster).
    pub(crate) async fn load_scripts(&self, scripts: &Scripts) -> RedisResult<()> {
        for script in scripts.all() {
            match self {
                Backend::Standalone(link) => {
                    script.load_async(&mut link.connection()).await?;
                }
                Backend::Cluster(pool) => {
                    script.load_async(&mut pool.connection()).await?;
                }
                Backend::Sentinel(pool) => {
                    script.load_async(&mut pool.connection()).await?;
                }
            }
        }
        Ok(())
    }

    /// Whether the server knows `HPEXPIRE` (per-field hash TTL). Asked, not
    /// assumed from a version: forks and managed services differ.
    pub(crate) async fn has_field_ttl(&self) -> RedisResult<bool> {
        let mut cmd = redis::cmd("COMMAND");
        cmd.arg("INFO").arg("HPEXPIRE");
        let info: Vec<redis::Value> = match self {
            Backend::Standalone(link) => cmd.query_async(&mut link.connection()).await?,
            Backend::Cluster(pool) => cmd.query_async(&mut pool.connection()).await?,
            Backend::Sentinel(pool) => cmd.query_async(&mut pool.connection()).await?,
        };
        Ok(info.iter().any(|v| !matches!(v, redis::Value::Nil)))
    }

    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self, Backend::Cluster(_))
    }
}

/// What a URL (or a list of node URLs) names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Topology {
    /// `redis://…`: one server.
    Standalone(String),
    /// `redis+cluster://host:port,host:port/` or several node URLs: a Cluster
    /// (each entry a `redis://` URL of one node).
    Cluster(Vec<String>),
    /// `redis+sentinel://host:port,host:port/<primary name>[/db]`: the
    /// primary the sentinels name, followed across failovers.
    Sentinel {
        /// `redis://host:port/` of each sentinel.
        sentinels: Vec<String>,
        /// The name the sentinels monitor the primary under.
        master: String,
        /// `user:password@` for the primary, or empty (sentinels are asked
        /// without credentials).
        userinfo: String,
        /// The database on the primary.
        db: i64,
        /// `rediss+sentinel://`: sentinels and primary over TLS.
        tls: bool,
    },
}

impl Topology {
    /// Whether it speaks TLS.
    pub(crate) fn uses_tls(&self) -> bool {
        match self {
            Topology::Standalone(url) => url.to_ascii_lowercase().starts_with("rediss://"),
            Topology::Cluster(nodes) => nodes.iter().any(|n| n.to_ascii_lowercase().starts_with("rediss://")),
            Topology::Sentinel { tls, .. } => *tls,
        }
    }
}

/// Splits `[userinfo@]h:p,h:p` into the user info (with its `@`) and hosts.
fn split_hosts(authority: &str) -> (String, Vec<String>) {
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((user, hosts)) => (format!("{user}@"), hosts),
        None => (String::new(), authority),
    };
    (userinfo, hosts.split(',').map(str::trim).filter(|h| !h.is_empty()).map(str::to_owned).collect())
}

/// Parses a store URL.
///
/// # Errors
///
/// [`ErrorKind::InvalidConfig`] for a scheme slidegate does not speak.
pub(crate) fn parse_topology(url: &str) -> Result<Topology, Error> {
    let trimmed = url.trim();
    let lower = trimmed.to_ascii_lowercase();
    let cluster = ["redis+cluster://", "rediss+cluster://"].into_iter().find(|s| lower.starts_with(s));
    if let Some(scheme) = cluster {
        let node_scheme = if scheme.starts_with("rediss") { "rediss" } else { "redis" };
        let rest = &trimmed[scheme.len()..];
        let (authority, _path) = rest.split_once('/').unwrap_or((rest, ""));
        let (userinfo, hosts) = split_hosts(authority);
        if hosts.is_empty() {
            return Err(Error::new(
                ErrorKind::InvalidConfig,
                format!(
                    "cluster URL {:?} names no node (redis+cluster://host:port,host:port/)",
                    redact_url(url)
                ),
            ));
        }
        return Ok(Topology::Cluster(
            hosts.iter().map(|h| format!("{node_scheme}://{userinfo}{h}/")).collect(),
        ));
    }
    let sentinel = ["redis+sentinel://", "rediss+sentinel://"].into_iter().find(|s| lower.starts_with(s));
    if let Some(scheme) = sentinel {
        let tls = scheme.starts_with("rediss");
        let rest = &trimmed[scheme.len()..];
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let (userinfo, hosts) = split_hosts(authority);
        let mut parts = path.split('/').filter(|p| !p.is_empty());
        let master = parts.next().unwrap_or_default().to_owned();
        let db = match parts.next() {
            Some(db) => db.parse::<i64>().map_err(|_| {
                Error::new(
                    ErrorKind::InvalidConfig,
                    format!("sentinel URL {:?}: database {db:?} is not a number", redact_url(url)),
                )
            })?,
            None => 0,
        };
        if hosts.is_empty() || master.is_empty() {
            return Err(Error::new(
                ErrorKind::InvalidConfig,
                format!(
                    "sentinel URL {:?} needs sentinels and a primary name (redis+sentinel://host:port,host:port/mymaster)",
                    redact_url(url)
                ),
            ));
        }
        let node_scheme = if tls { "rediss" } else { "redis" };
        let sentinels = hosts.iter().map(|h| format!("{node_scheme}://{h}/")).collect();
        return Ok(Topology::Sentinel { sentinels, master, userinfo, db, tls });
    }
    if lower.starts_with("redis://") || lower.starts_with("rediss://") || lower.starts_with("redis+unix://") {
        return Ok(Topology::Standalone(trimmed.to_owned()));
    }
    Err(Error::new(
        ErrorKind::InvalidConfig,
        format!(
            "invalid Redis URL {:?}: expected redis://host:port/, redis+cluster://host:port,host:port/ \
             or redis+sentinel://host:port,host:port/<primary name> (rediss… for TLS)",
            redact_url(url)
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_topologies() {
        assert_eq!(parse_topology("redis://h:1/0").unwrap(), Topology::Standalone("redis://h:1/0".into()));
        assert_eq!(
            parse_topology("redis+cluster://:pw@a:1,b:2/").unwrap(),
            Topology::Cluster(vec!["redis://:pw@a:1/".into(), "redis://:pw@b:2/".into()])
        );
        assert_eq!(
            parse_topology("REDIS+CLUSTER://a:1").unwrap(),
            Topology::Cluster(vec!["redis://a:1/".into()])
        );
        let err = parse_topology("redis+cluster://:secret@/").unwrap_err();
        assert!(err.to_string().contains("names no node") && !err.to_string().contains("secret"), "{err}");
        assert!(parse_topology("http://x").unwrap_err().to_string().contains("expected redis://"));
        assert_eq!(
            parse_topology("redis+sentinel://:pw@s1:26379,s2:26379/mymaster/2").unwrap(),
            Topology::Sentinel {
                sentinels: vec!["redis://s1:26379/".into(), "redis://s2:26379/".into()],
                master: "mymaster".into(),
                userinfo: ":pw@".into(),
                db: 2,
                tls: false,
            }
        );
        assert_eq!(
            parse_topology("rediss+cluster://u:pw@a:1,b:2/").unwrap(),
            Topology::Cluster(vec!["rediss://u:pw@a:1/".into(), "rediss://u:pw@b:2/".into()])
        );
        let Topology::Sentinel { sentinels, tls, .. } = parse_topology("rediss+sentinel://s1:1/m").unwrap()
        else {
            panic!("a sentinel topology")
        };
        assert_eq!((sentinels, tls), (vec!["rediss://s1:1/".to_owned()], true));
        assert!(parse_topology("rediss://h:1/").unwrap().uses_tls());
        assert!(!parse_topology("redis+cluster://a:1").unwrap().uses_tls());
        assert!(parse_topology("redis+sentinel://s1:1/").unwrap_err().to_string().contains("primary name"));
        assert!(
            parse_topology("redis+sentinel://s1:1/m/x").unwrap_err().to_string().contains("not a number")
        );
    }
}
