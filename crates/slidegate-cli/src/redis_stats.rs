//! Redis-side figures for `slidegate bench`: CPU per script call from
//! `INFO commandstats` (reset before the run), the server's share of a core
//! from `INFO cpu`, and `MEMORY USAGE` of a sample of the keys the run wrote.

use std::time::Instant;

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
    /// The server process's CPU time during the run (`INFO cpu`,
    /// `used_cpu_user` + `used_cpu_sys`: scripts, parsing, the kernel's
    /// network work) over the run's wall time, in cores: how close to its
    /// limit the (single-threaded) server ran.
    pub server_cpu_share: f64,
    /// Keys whose `MEMORY USAGE` was sampled.
    pub keys_sampled: u64,
    /// Their mean `MEMORY USAGE`, in bytes.
    pub memory_per_key: f64,
}

/// A plain connection for the statistics (standalone servers only).
pub struct StatsConnection {
    conn: redis::aio::MultiplexedConnection,
    /// The server's CPU seconds, and when they were read, at the reset.
    cpu_at_reset: (f64, Instant),
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
        let cpu: String = redis::cmd("INFO").arg("cpu").query_async(&mut conn).await?;
        Ok(StatsConnection { conn, cpu_at_reset: (cpu_seconds(&cpu), Instant::now()) })
    }

    /// Reads the statistics after the run of `checks` store checks;
    /// samples up to `sample` keys matching `pattern`.
    ///
    /// # Errors
    ///
    /// When the server cannot be asked.
    pub async fn read(mut self, pattern: &str, sample: usize, checks: u64) -> anyhow::Result<RedisStats> {
        let cpu: String = redis::cmd("INFO").arg("cpu").query_async(&mut self.conn).await?;
        let (cpu_before, since) = self.cpu_at_reset;
        let wall = since.elapsed().as_secs_f64();
        let server_cpu_share =
            if wall > 0.0 { (cpu_seconds(&cpu) - cpu_before).max(0.0) / wall } else { 0.0 };
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
            server_cpu_share,
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

/// `used_cpu_user` + `used_cpu_sys` (seconds) of `INFO cpu`.
fn cpu_seconds(info: &str) -> f64 {
    ["used_cpu_user:", "used_cpu_sys:"]
        .iter()
        .filter_map(|name| info.lines().find_map(|l| l.strip_prefix(name)))
        .filter_map(|value| value.trim().parse::<f64>().ok())
        .sum()
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_cpu() {
        let info =
            "# CPU\r\nused_cpu_sys:1.250000\r\nused_cpu_user:2.500000\r\nused_cpu_sys_children:9.0\r\n";
        assert!((super::cpu_seconds(info) - 3.75).abs() < 1e-9);
        assert_eq!(super::cpu_seconds("# CPU\r\n"), 0.0);
    }

    #[test]
    fn parses_commandstats() {
        let info = "# Commandstats\r\ncmdstat_ping:calls=3,usec=1,usec_per_call=0.33,rejected_calls=0,failed_calls=0\r\n\
                    cmdstat_evalsha:calls=1200,usec=5400,usec_per_call=4.50,rejected_calls=0,failed_calls=0\r\n";
        assert_eq!(super::evalsha_stats(info), (1200, 5400));
        assert_eq!(super::evalsha_stats("# Commandstats\r\n"), (0, 0));
    }
}
