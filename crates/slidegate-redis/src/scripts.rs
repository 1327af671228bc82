//! The Lua scripts, one per algorithm, each prefixed by the shared prelude.

use redis::Script;
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
