//! Where the store's calls go: one standalone server (through a
//! reconnecting `ConnectionManager`) or a Cluster (through a
//! [`ClusterPool`]); and how a URL names them.

use redis::aio::ConnectionManager;
use redis::{Cmd, RedisResult, Script};
use slidegate::{Error, ErrorKind};

use crate::cluster::ClusterPool;
use crate::scripts::{self, Scripts};
use crate::url::redact_url;

/// The servers a store talks to.
pub(crate) enum Backend {
    Standalone(ConnectionManager),
    Cluster(Box<ClusterPool>),
}

impl Backend {
    /// Runs one script call (reloading the script on `NOSCRIPT`).
    pub(crate) async fn run(&self, script: &Script, cmd: &Cmd) -> RedisResult<Vec<i64>> {
        match self {
            Backend::Standalone(conn) => scripts::run(&mut conn.clone(), script, cmd).await,
            Backend::Cluster(pool) => pool.run(script, cmd).await,
        }
    }

    /// Loads every script (on every node of a Cluster).
    pub(crate) async fn load_scripts(&self, scripts: &Scripts) -> RedisResult<()> {
        for script in scripts.all() {
            match self {
                Backend::Standalone(conn) => {
                    script.load_async(&mut conn.clone()).await?;
                }
                Backend::Cluster(pool) => {
                    script.load_async(&mut pool.connection()).await?;
                }
            }
        }
        Ok(())
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
}

/// Parses a store URL.
///
/// # Errors
///
/// [`ErrorKind::Backend`] for a scheme slidegate does not speak.
pub(crate) fn parse_topology(url: &str) -> Result<Topology, Error> {
    let trimmed = url.trim();
    let lower = trimmed.to_ascii_lowercase();
    if let Some(rest) = lower.strip_prefix("redis+cluster://").map(|_| &trimmed["redis+cluster://".len()..]) {
        let (authority, _path) = rest.split_once('/').unwrap_or((rest, ""));
        let (userinfo, hosts) = match authority.rsplit_once('@') {
            Some((user, hosts)) => (format!("{user}@"), hosts),
            None => (String::new(), authority),
        };
        let nodes: Vec<String> = hosts
            .split(',')
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .map(|h| format!("redis://{userinfo}{h}/"))
            .collect();
        if nodes.is_empty() {
            return Err(Error::new(
                ErrorKind::Backend,
                format!(
                    "cluster URL {:?} names no node (redis+cluster://host:port,host:port/)",
                    redact_url(url)
                ),
            ));
        }
        return Ok(Topology::Cluster(nodes));
    }
    if lower.starts_with("redis://") || lower.starts_with("rediss://") || lower.starts_with("redis+unix://") {
        return Ok(Topology::Standalone(trimmed.to_owned()));
    }
    Err(Error::new(
        ErrorKind::Backend,
        format!(
            "invalid Redis URL {:?}: expected redis://host:port/ or redis+cluster://host:port,host:port/",
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
    }
}
