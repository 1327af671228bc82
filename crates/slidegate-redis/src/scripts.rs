//! The Lua scripts: one fast script per algorithm for the common case (one
//! rule, no penalty), and one general script for multi-dimension checks and
//! penalties. All are assembled from the same files in `scripts/`, so every
//! path runs the same algorithm code.

use redis::Script;
use slidegate::Algorithm;

/// A script deciding one rule with one algorithm: the prelude, the
/// algorithm's table, and the single-check main bound to it.
/// An optional fast path (`fast = "file"`) runs before anything is defined;
/// `raises` says whether its function may raise (then it runs under
/// `pcall`, and a key it cannot read goes to the shared code).
macro_rules! single {
    (fast = $fast:literal, $function:literal, raises = $raises:literal, $file:literal, $table:literal) => {
        concat!(
            include_str!(concat!("../scripts/", $fast)),
            "\nlocal fast = ",
            $function,
            "\nlocal fast_raises = ",
            $raises,
            "\n",
            include_str!("../scripts/fast_single.lua"),
            "\n",
            single!($file, $table)
        )
    };
    ($file:literal, $table:literal) => {
        concat!(
            include_str!("../scripts/prelude.lua"),
            "\n",
            include_str!(concat!("../scripts/", $file)),
            "\nlocal A = ",
            $table,
            "\n",
            include_str!("../scripts/single.lua")
        )
    };
}

/// The prelude and all four algorithm tables (LOG, COUNTER, FIXED, GCRA):
/// the shared code of the general and the multi script.
macro_rules! shared {
    () => {
        concat!(
            include_str!("../scripts/prelude.lua"),
            "\n",
            include_str!("../scripts/sliding_log.lua"),
            "\n",
            include_str!("../scripts/sliding_counter.lua"),
            "\n",
            include_str!("../scripts/fixed_window.lua"),
            "\n",
            include_str!("../scripts/gcra.lua")
        )
    };
}

/// Full source of the sliding-log script.
/// Its common case runs first, before the shared code is defined (see
/// `scripts/log_fast.lua`).
pub const SLIDING_LOG: &str =
    single!(fast = "log_fast.lua", "log_fast", raises = "false", "sliding_log.lua", "LOG");
/// Full source of the sliding-counter script.
pub const SLIDING_COUNTER: &str =
    single!(fast = "counter_fast.lua", "counter_fast", raises = "true", "sliding_counter.lua", "COUNTER");
/// Full source of the fixed-window script.
pub const FIXED_WINDOW: &str = single!("fixed_window.lua", "FIXED");
/// Full source of the GCRA script.
pub const GCRA: &str = single!("gcra.lua", "GCRA");
/// Full source of the general script: any number of dimensions, each with
/// any algorithm and an optional penalty.
pub const CHECK: &str = concat!(
    shared!(),
    "\n",
    include_str!("../scripts/penalty.lua"),
    "\n",
    include_str!("../scripts/check.lua")
);
/// Full source of the script deciding many independent single checks in
/// one call (auto-batching, see `src/auto_batch.rs`): both fast paths,
/// every algorithm (wrapped in a function `general`, called only when a
/// check leaves the fast paths: defining it all costs Redis ~12 µs per
/// call, measured), and `scripts/multi.lua`.
pub const MULTI: &str = concat!(
    include_str!("../scripts/log_fast.lua"),
    "\n",
    include_str!("../scripts/counter_fast.lua"),
    "\n-- The shared code, defined only when a check needs it (multi.lua),\n\
     -- with the call's TTL slack.\nlocal function general(slack)\n",
    shared!(),
    "\nset_slack(slack)\nreturn { LOG, COUNTER, FIXED, GCRA }, decide\nend\n",
    include_str!("../scripts/multi.lua")
);
/// Full source of the script that takes back charges of the general script
/// (cross-slot multi-dimension checks in a Cluster).
pub const RELEASE: &str = concat!(
    include_str!("../scripts/prelude.lua"),
    "\n",
    include_str!("../scripts/sliding_log.lua"),
    "\n",
    include_str!("../scripts/release.lua")
);

/// The scripts, with their SHA1 computed once.
#[derive(Debug)]
pub(crate) struct Scripts {
    log: Script,
    counter: Script,
    fixed: Script,
    gcra: Script,
    check: Script,
    release: Script,
    multi: Script,
}

impl Scripts {
    pub(crate) fn new() -> Scripts {
        Scripts {
            log: Script::new(SLIDING_LOG),
            counter: Script::new(SLIDING_COUNTER),
            fixed: Script::new(FIXED_WINDOW),
            gcra: Script::new(GCRA),
            check: Script::new(CHECK),
            release: Script::new(RELEASE),
            multi: Script::new(MULTI),
        }
    }

    /// The general script (multi-dimension, penalties).
    pub(crate) fn check(&self) -> &Script {
        &self.check
    }

    /// The release script.
    pub(crate) fn release(&self) -> &Script {
        &self.release
    }

    /// The script deciding many single checks at once.
    pub(crate) fn multi(&self) -> &Script {
        &self.multi
    }

    /// Every script, for loading at connect time.
    pub(crate) fn all(&self) -> [&Script; 7] {
        [&self.log, &self.counter, &self.fixed, &self.gcra, &self.check, &self.release, &self.multi]
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
