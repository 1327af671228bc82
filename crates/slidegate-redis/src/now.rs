//! When a script decides: on the Redis server's clock, or at a client's
//! time, and how long keys then outlive their last charge.

use std::sync::Arc;
use std::time::Duration;

use slidegate::store::validate_time;
use slidegate::{Clock, Error};

/// When a script decides: on the Redis server's clock, or at a client's
/// time (client-clock mode) with the TTL slack that mode needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Now {
    /// The script reads `TIME`; keys outlive their charges by [`SLACK_MS`].
    Server,
    /// The client's time, validated against [`slidegate::limits::MAX_TIME_MS`];
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
    /// The general script's time argument (ARGV[2], read by
    /// scripts/lib/clock.lua): `""` for the server's clock.
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
/// `SLACK_MS` of scripts/lib/clock.lua.
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
    /// reads beyond [`MAX_TIME_MS`](slidegate::limits::MAX_TIME_MS).
    pub(crate) fn now(&self) -> Result<Now, Error> {
        Ok(Now::Client { now_ms: validate_time(self.clock.now_ms())?, slack_ms: self.slack_ms })
    }
}

#[cfg(test)]
mod tests {
    use crate::scripts;

    /// The clock library spells the Rust constants, and every script
    /// starts with it: one clock and one slack for all of them.
    #[test]
    fn every_script_reads_one_clock_and_one_slack() {
        let clock = include_str!("../scripts/lib/clock.lua");
        assert!(clock.contains(&format!("\nlocal SLACK_MS = {}\n", super::SLACK_MS)));
        assert!(clock.contains(&format!("\nlocal MAX_TIME = {}\n", slidegate::limits::MAX_TIME_MS)));
        let all = [
            scripts::SLIDING_LOG.as_str(),
            &scripts::SLIDING_COUNTER,
            &scripts::FIXED_WINDOW,
            &scripts::GCRA,
            scripts::CHECK,
            scripts::MULTI,
            scripts::RELEASE,
            scripts::LEASE,
            scripts::HOLDS,
        ];
        for script in all.into_iter().chain(scripts::RESERVE) {
            assert!(script.starts_with(clock), "a script that does not start with lib/clock.lua");
            // No second clock or slack: TIME is read and SLACK_MS and
            // MAX_TIME are defined only in lib/clock.lua.
            let rest = &script[clock.len()..];
            for defined in ["'TIME'", "SLACK_MS =", "MAX_TIME =", "8796093022207"] {
                assert!(!rest.contains(defined), "{defined} outside lib/clock.lua");
            }
            // A single script's shared code took its place.
            assert!(!script.contains("\n-- @shared\n"));
        }
    }
}
