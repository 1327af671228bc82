//! When a script decides: on the Redis server's clock, or at a client's
//! time, and how long keys then outlive their last charge.

use std::sync::Arc;
use std::time::Duration;

use slidegate::{Clock, Error, validate_time};

/// When a script decides: on the Redis server's clock, or at a client's
/// time (client-clock mode) with the TTL slack that mode needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Now {
    /// The script reads `TIME`; keys outlive their charges by [`SLACK_MS`].
    Server,
    /// The client's time, validated against [`slidegate::MAX_TIME_MS`];
    /// keys outlive their charges by `slack_ms` of the server's clock
    /// ([`SLACK_MS`] plus the clients' allowed clock skew).
    Client {
        /// The client's time (ms).
        now_ms: u64,
        /// The TTL slack (ms).
        slack_ms: u64,
    },
}

impl Now {
    /// The scripts' time argument: `""` for the server's clock.
    pub(crate) fn time_arg(self) -> String {
        match self {
            Now::Server => String::new(),
            Now::Client { now_ms, .. } => now_ms.to_string(),
        }
    }

    /// The general script's slack argument: `""` (its own `SLACK_MS`) for
    /// the server's clock.
    pub(crate) fn slack_arg(self) -> String {
        match self {
            Now::Server => String::new(),
            Now::Client { slack_ms, .. } => slack_ms.to_string(),
        }
    }

    /// How long keys outlive their charges.
    pub(crate) fn slack_ms(self) -> u64 {
        match self {
            Now::Server => SLACK_MS,
            Now::Client { slack_ms, .. } => slack_ms,
        }
    }
}

/// How long state keys outlive their last charge on the server's clock:
/// `SLACK_MS` of prelude.lua.
pub(crate) const SLACK_MS: u64 = 1000;

/// Client-clock mode's clock, and how long keys outlive their last charge
/// in that mode ([`SLACK_MS`] plus the clients' allowed clock skew).
pub(crate) struct ClientClock {
    clock: Arc<dyn Clock>,
    slack_ms: u64,
}

impl ClientClock {
    pub(crate) fn new(clock: Arc<dyn Clock>, max_skew: Duration) -> ClientClock {
        let skew_ms = u64::try_from(max_skew.as_millis()).unwrap_or(u64::MAX);
        ClientClock { clock, slack_ms: SLACK_MS.saturating_add(skew_ms) }
    }

    /// The client's time now.
    ///
    /// # Errors
    ///
    /// [`InvalidTime`](slidegate::ErrorKind::InvalidTime) when the clock
    /// reads beyond [`MAX_TIME_MS`](slidegate::MAX_TIME_MS).
    pub(crate) fn now(&self) -> Result<Now, Error> {
        Ok(Now::Client { now_ms: validate_time(self.clock.now_ms())?, slack_ms: self.slack_ms })
    }
}

#[cfg(test)]
mod tests {
    /// The scripts spell the same constants: the prelude once, and the
    /// fast paths, which run before it is defined, in numbers.
    #[test]
    fn the_scripts_spell_the_same_constants() {
        let prelude = include_str!("../scripts/prelude.lua");
        assert!(prelude.contains(&format!("local SLACK_MS = {}\n", super::SLACK_MS)));
        assert!(prelude.contains(&format!("local MAX_TIME = {}\n", slidegate::MAX_TIME_MS)));
        for fast in [include_str!("../scripts/fast_single.lua"), include_str!("../scripts/multi.lua")] {
            assert!(
                fast.contains(&format!("now <= {}", slidegate::MAX_TIME_MS))
                    || fast.contains(&format!("now > {}", slidegate::MAX_TIME_MS))
            );
            assert!(
                fast.contains(&format!("slack = {}", super::SLACK_MS))
                    || fast.contains(&format!("and {} or", super::SLACK_MS))
            );
        }
    }
}
