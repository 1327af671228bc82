//! [`ServerStats`]: what the Redis servers behind a store hold — their
//! memory and how many of their keys are slidegate's — read without ever
//! blocking them (no `KEYS`, no full `SCAN`): `INFO memory`, `DBSIZE` and
//! a sample of `RANDOMKEY`.

use redis::{Cmd, Value};
use slidegate::Error;

use crate::connection::Backend;
use crate::errors::from_redis;
use crate::store::RedisStore;

/// How many random keys [`RedisStore::server_stats`] samples.
pub const KEY_SAMPLE: u32 = 64;

/// What the servers behind a store hold (on a Cluster, summed over its
/// primaries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerStats {
    /// `used_memory` from `INFO memory`, in bytes.
    pub used_memory_bytes: u64,
    /// Every key of the database (`DBSIZE`).
    pub keys: u64,
    /// The keys under this store's prefix: `keys` times the share of
    /// sampled random keys that carry it (exact when all or none do).
    pub slidegate_keys: u64,
    /// How many random keys the estimate sampled (fewer when the database
    /// has fewer keys).
    pub sampled: u32,
}

impl RedisStore {
    /// Reads the servers' memory and key counts (for status pages): three
    /// kinds of O(1) commands, never a command that walks the keyspace.
    ///
    /// # Errors
    ///
    /// When the servers cannot be reached or answer an error.
    pub async fn server_stats(&self) -> Result<ServerStats, Error> {
        let backend = &self.connected()?.backend;
        let fail = |e: redis::RedisError| from_redis("server stats", &e);
        let info = query(backend, redis::cmd("INFO").arg("memory")).await.map_err(fail)?;
        let used_memory_bytes = used_memory(&info);
        let keys = match query(backend, &redis::cmd("DBSIZE")).await.map_err(fail)? {
            Value::Int(n) => u64::try_from(n).unwrap_or(0),
            other => {
                return Err(Error::new(
                    slidegate::ErrorKind::Unavailable,
                    format!("server stats: DBSIZE answered {other:?}"),
                ));
            }
        };
        let (mut sampled, mut ours) = (0u32, 0u32);
        for _ in 0..KEY_SAMPLE.min(u32::try_from(keys).unwrap_or(u32::MAX)) {
            let key = query(backend, &redis::cmd("RANDOMKEY")).await.map_err(fail)?;
            let key = match key {
                Value::BulkString(bytes) => bytes,
                Value::SimpleString(text) => text.into_bytes(),
                _ => continue,
            };
            sampled += 1;
            ours += u32::from(key.starts_with(self.prefix().as_bytes()));
        }
        let slidegate_keys = match (ours, sampled) {
            (0, _) | (_, 0) => 0,
            (o, s) if o == s => keys,
            (o, s) => keys * u64::from(o) / u64::from(s),
        };
        Ok(ServerStats { used_memory_bytes, keys, slidegate_keys, sampled })
    }
}

/// Sends `cmd` where the backend sends such commands (on a Cluster, to
/// every primary, combined as redis-rs does for each command).
async fn query(backend: &Backend, cmd: &Cmd) -> redis::RedisResult<Value> {
    match backend {
        Backend::Standalone(link) => cmd.query_async(&mut link.connection()).await,
        Backend::Cluster(pool) => cmd.query_async(&mut pool.connection()).await,
        Backend::Sentinel(pool) => cmd.query_async(&mut pool.connection()).await,
    }
}

/// `used_memory` from `INFO memory`: one server's text, or (on a Cluster)
/// a map of each primary's, summed.
fn used_memory(info: &Value) -> u64 {
    match info {
        Value::BulkString(bytes) => used_memory_of(&String::from_utf8_lossy(bytes)),
        Value::SimpleString(text) => used_memory_of(text),
        Value::VerbatimString { text, .. } => used_memory_of(text),
        Value::Map(entries) => entries.iter().map(|(_, v)| used_memory(v)).sum(),
        Value::Array(values) => values.iter().map(used_memory).sum(),
        _ => 0,
    }
}

fn used_memory_of(info: &str) -> u64 {
    info.lines()
        .find_map(|line| line.trim().strip_prefix("used_memory:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_used_memory_from_one_server_or_many() {
        let one = "# Memory\r\nused_memory:1048576\r\nused_memory_human:1.00M\r\n";
        assert_eq!(used_memory(&Value::BulkString(one.as_bytes().to_vec())), 1_048_576);
        let many = Value::Map(vec![
            (Value::SimpleString("a:7000".into()), Value::BulkString(b"used_memory:100\r\n".to_vec())),
            (Value::SimpleString("b:7001".into()), Value::BulkString(b"used_memory:23\r\n".to_vec())),
        ]);
        assert_eq!(used_memory(&many), 123);
        assert_eq!(used_memory(&Value::Nil), 0);
    }
}
