//! The Lua scripts, one per algorithm, each prefixed by the shared prelude.

use redis::aio::ConnectionLike;
use redis::{Cmd, FromRedisValue, RedisResult, Script, ServerErrorKind};
use slidegate::Algorithm;

macro_rules! script_source {
    ($file:literal) => {
        concat!(include_str!("../scripts/prelude.lua"), "\n", include_str!(concat!("../scripts/", $file)))
    };
}

/// Full source of the sliding-log script (prelude included).
pub const SLIDING_LOG: &str = script_source!("sliding_log.lua");
/// Full source of the sliding-counter script (prelude included).
pub const SLIDING_COUNTER: &str = script_source!("sliding_counter.lua");
/// Full source of the fixed-window script (prelude included).
pub const FIXED_WINDOW: &str = script_source!("fixed_window.lua");
/// Full source of the GCRA script (prelude included).
pub const GCRA: &str = script_source!("gcra.lua");

/// The scripts, with their SHA1 computed once.
#[derive(Debug)]
pub(crate) struct Scripts {
    log: Script,
    counter: Script,
    fixed: Script,
    gcra: Script,
}

impl Scripts {
    pub(crate) fn new() -> Scripts {
        Scripts {
            log: Script::new(SLIDING_LOG),
            counter: Script::new(SLIDING_COUNTER),
            fixed: Script::new(FIXED_WINDOW),
            gcra: Script::new(GCRA),
        }
    }

    /// The script enforcing `algorithm`.
    pub(crate) fn for_algorithm(&self, algorithm: Algorithm) -> &Script {
        match algorithm {
            Algorithm::SlidingCounter { .. } => &self.counter,
            Algorithm::FixedWindow => &self.fixed,
            Algorithm::Gcra => &self.gcra,
            // `Algorithm` is non-exhaustive; the log is the exact default.
            _ => &self.log,
        }
    }
}

/// An `EVALSHA` of `script` on `keys`; add the ARGV with `.arg(…)`, then
/// [`run`] it.
pub(crate) fn evalsha(script: &Script, keys: &[&str]) -> Cmd {
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(script.get_hash()).arg(keys.len()).arg(keys);
    cmd
}

/// Runs an [`evalsha`] command; when the server answers `NOSCRIPT`
/// (restart, `SCRIPT FLUSH`, failover to a node that never saw the script)
/// loads `script` and retries once, counting the reload in
/// `slidegate_script_reloads_total`.
///
/// Our own rather than redis-rs' `invoke_async` so that reloads are counted
/// and the same command can later be pipelined (redis-rs reloads only for
/// single invocations).
pub(crate) async fn run<T: FromRedisValue>(
    conn: &mut impl ConnectionLike,
    script: &Script,
    cmd: &Cmd,
) -> RedisResult<T> {
    match cmd.query_async(conn).await {
        Err(err) if err.kind() == redis::ErrorKind::Server(ServerErrorKind::NoScript) => {
            metrics::counter!("slidegate_script_reloads_total").increment(1);
            tracing::info!(target: "slidegate", "script missing on the server (NOSCRIPT): reloading");
            script.load_async(conn).await?;
            cmd.query_async(conn).await
        }
        other => other,
    }
}
