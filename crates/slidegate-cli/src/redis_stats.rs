//! Redis-side figures for `slidegate bench`: CPU per script call from
//! `INFO commandstats` (reset before the run), and `MEMORY USAGE` of a
//! sample of the keys the run wrote.

use redis::AsyncCommands;
use serde::Serialize;

/// What the Redis server says about a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RedisStats {
    /// `EVALSHA` calls the server counted.
    pub evalsha_calls: u64,
    /// Microseconds of server CPU per `EVALSHA` call.
    pub usec_per_call: f64,
    /// Microseconds of server CPU (all `EVALSHA` calls) per check that
    /// reached the store: the same as `usec_per_call` unless checks were
    /// auto-batched, several to a call.
    pub usec_per_check: f64,
    /// Keys whose `MEMORY USAGE` was sampled.
    pub keys_sampled: u64,
    /// Their mean `MEMORY USAGE`, in bytes.
    pub memory_per_key: f64,
}

/// A plain connection for the statistics (standalone servers only).
pub struct StatsConnection {
    conn: redis::aio::MultiplexedConnection,
}

impl StatsConnection {
    /// Connects to `url` and resets the server's command statistics.
    ///
    /// # Errors
    ///
    /// When the server cannot be reached or refuses `CONFIG RESETSTAT`.
    pub async fn reset(url: &str) -> anyhow::Result<StatsConnection> {
        let mut conn = redis::Client::open(url)?.get_multiplexed_async_connection().await?;
        let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query_async(&mut conn).await?;
        Ok(StatsConnection { conn })
    }

    /// Reads the statistics after the run of `checks` store checks;
    /// samples up to `sample` keys matching `pattern`.
    ///
    /// # Errors
    ///
    /// When the server cannot be asked.
    pub async fn read(mut self, pattern: &str, sample: usize, checks: u64) -> anyhow::Result<RedisStats> {
        let info: String = redis::cmd("INFO").arg("commandstats").query_async(&mut self.conn).await?;
        let (calls, usec) = evalsha_stats(&info);
        let mut keys = Vec::new();
        {
            let mut iter = self.conn.scan_match::<_, String>(pattern).await?;
            while let Some(key) = iter.next_item().await {
                keys.push(key?);
                if keys.len() >= sample {
                    break;
                }
            }
        }
        let mut total = 0u64;
        for key in &keys {
            let bytes: Option<u64> = redis::cmd("MEMORY")
                .arg("USAGE")
                .arg(key)
                .arg("SAMPLES")
                .arg(0)
                .query_async(&mut self.conn)
                .await?;
            total += bytes.unwrap_or(0);
        }
        let sampled = keys.len() as u64;
        Ok(RedisStats {
            evalsha_calls: calls,
            usec_per_call: if calls == 0 { 0.0 } else { usec as f64 / calls as f64 },
            usec_per_check: if checks == 0 { 0.0 } else { usec as f64 / checks as f64 },
            keys_sampled: sampled,
            memory_per_key: if sampled == 0 { 0.0 } else { total as f64 / sampled as f64 },
        })
    }
}

/// `calls` and `usec` (the total) of `cmdstat_evalsha` in `INFO commandstats`.
fn evalsha_stats(info: &str) -> (u64, u64) {
    let Some(line) = info.lines().find(|l| l.starts_with("cmdstat_evalsha:")) else { return (0, 0) };
    let field = |name: &str| {
        line.split([':', ','])
            .find_map(|part| part.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
            .unwrap_or("0")
            .to_owned()
    };
    (field("calls").parse().unwrap_or(0), field("usec").parse().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_commandstats() {
        let info = "# Commandstats\r\ncmdstat_ping:calls=3,usec=1,usec_per_call=0.33,rejected_calls=0,failed_calls=0\r\n\
                    cmdstat_evalsha:calls=1200,usec=5400,usec_per_call=4.50,rejected_calls=0,failed_calls=0\r\n";
        assert_eq!(super::evalsha_stats(info), (1200, 5400));
        assert_eq!(super::evalsha_stats("# Commandstats\r\n"), (0, 0));
    }
}
