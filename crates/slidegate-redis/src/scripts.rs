//! The Lua scripts, assembled from the files of `scripts/` by role (see
//! docs/design.md, "Scripts"): `lib/` (the clock and the TTL slack, the
//! shared code, penalties), `algorithms/` (one table per algorithm: eval,
//! charge, idle, release), `fast/` (the measured fast paths, each naming
//! the table it must agree with) and `entry/` (what a call runs, each
//! opening with its KEYS, ARGV and reply). One script per algorithm for
//! the common case (one rule, no penalty), one for many such checks at
//! once, one general script for several dimensions and penalties, and one
//! release: every path runs the same algorithm code.

use std::sync::LazyLock;

use redis::Script;
use slidegate::Algorithm;

/// A file of `scripts/`.
macro_rules! lua {
    ($($path:tt)+) => {
        include_str!(concat!("../scripts/", $($path)+))
    };
}

/// The shared code (`lib/shared.lua`) and the algorithm files given, in a
/// function `shared()` answering `$tables`, `decide` and `charged`: the multi
/// script's shared code, defined only when a check leaves the fast paths.
macro_rules! shared_fn {
    ($tables:literal, $($algorithm:literal),+) => {
        concat!(
            "local function shared()\n",
            lua!("lib/shared.lua"),
            $("\n", lua!("algorithms/", $algorithm),)+
            "\nreturn ",
            $tables,
            ", decide, charged\nend\n"
        )
    };
}

/// The line of `entry/single.lua` the shared code replaces: defined after
/// the fast path has had its chance, so an answered call defines nothing
/// it does not use.
const SHARED_HERE: &str = "\n-- @shared\n";

/// A script deciding one rule with one algorithm: `head` (the clock and
/// the fast path's binding), then `entry/single.lua` with the shared code
/// and the algorithm's file (`shared`, binding `A`) in its place.
fn single(head: &str, shared: &str) -> String {
    let entry = lua!("entry/single.lua");
    let (before, after) = entry.split_once(SHARED_HERE).unwrap_or((entry, ""));
    [head, before, "\n", shared, after].concat()
}

/// A single script's head: the clock, and the algorithm's fast path
/// (`fast = file, function, raises`: whether the function may raise) if
/// it has one.
macro_rules! single_head {
    (fast = $fast:literal, $function:literal, raises = $raises:literal) => {
        concat!(
            lua!("lib/clock.lua"),
            "\n",
            lua!("fast/", $fast),
            "\nlocal FAST, FAST_RAISES = ",
            $function,
            ", ",
            $raises,
            "\n"
        )
    };
    () => {
        concat!(lua!("lib/clock.lua"), "\nlocal FAST, FAST_RAISES = nil, false\n")
    };
}

/// A single script's shared code: `lib/shared.lua` and the algorithm's
/// file, its table bound to `A`.
macro_rules! single_shared {
    ($file:literal, $table:literal) => {
        concat!(lua!("lib/shared.lua"), "\n", lua!("algorithms/", $file), "\nlocal A = ", $table, "\n")
    };
}

/// The clock, the shared code and all four algorithms (LOG, COUNTER,
/// FIXED, GCRA), at the top level: the start of the scripts that always
/// need them.
macro_rules! all_algorithms {
    () => {
        concat!(
            lua!("lib/clock.lua"),
            "\n",
            lua!("lib/shared.lua"),
            "\n",
            lua!("algorithms/sliding_log.lua"),
            "\n",
            lua!("algorithms/sliding_counter.lua"),
            "\n",
            lua!("algorithms/fixed_window.lua"),
            "\n",
            lua!("algorithms/gcra.lua"),
            "\n"
        )
    };
}

/// Full source of the sliding-log script.
pub static SLIDING_LOG: LazyLock<String> = LazyLock::new(|| {
    single(
        single_head!(fast = "log.lua", "log_fast", raises = "false"),
        single_shared!("sliding_log.lua", "LOG"),
    )
});
/// Full source of the sliding-counter script.
pub static SLIDING_COUNTER: LazyLock<String> = LazyLock::new(|| {
    single(
        single_head!(fast = "counter.lua", "counter_fast", raises = "true"),
        single_shared!("sliding_counter.lua", "COUNTER"),
    )
});
/// Full source of the fixed-window script.
pub static FIXED_WINDOW: LazyLock<String> =
    LazyLock::new(|| single(single_head!(), single_shared!("fixed_window.lua", "FIXED")));
/// Full source of the GCRA script.
pub static GCRA: LazyLock<String> =
    LazyLock::new(|| single(single_head!(), single_shared!("gcra.lua", "GCRA")));
/// Full source of the general script (`entry/check.lua`): any number of
/// dimensions, each with any algorithm and an optional penalty.
pub const CHECK: &str = concat!(all_algorithms!(), lua!("lib/penalty.lua"), "\n", lua!("entry/check.lua"));
/// Full source of the script deciding many independent single checks in
/// one call (`entry/multi.lua`; auto-batching and batches): the clock,
/// both fast paths, and every algorithm in `shared()`, defined only when a
/// check leaves the fast paths.
pub const MULTI: &str = concat!(
    lua!("lib/clock.lua"),
    "\n",
    lua!("fast/log.lua"),
    "\n",
    lua!("fast/counter.lua"),
    "\n",
    shared_fn!(
        "{ LOG, COUNTER, FIXED, GCRA }",
        "sliding_log.lua",
        "sliding_counter.lua",
        "fixed_window.lua",
        "gcra.lua"
    ),
    lua!("entry/multi.lua")
);
/// Full source of the script that takes back charges of the general script
/// (`entry/release.lua`; cross-slot multi-dimension checks in a Cluster).
pub const RELEASE: &str = concat!(all_algorithms!(), lua!("entry/release.lua"));

/// Full source of the script forgetting a key's state (`entry/reset.lua`).
pub const RESET: &str = lua!("entry/reset.lua");

/// A reservations' script (`entry/reserve.lua`) for one algorithm: a
/// single script's head (the clock and the fast path, if any), then the
/// shared code and the algorithm's file in `shared()`, defined only when
/// a call leaves the fast path.
macro_rules! reserve_script {
    ($head:expr, $file:literal, $table:literal) => {
        concat!($head, shared_fn!($table, $file), lua!("lib/reserve.lua"), "\n", lua!("entry/reserve.lua"))
    };
}

/// Full source of the reservations' scripts, by algorithm: sliding log,
/// sliding counter, fixed window, GCRA.
pub const RESERVE: [&str; 4] = [
    reserve_script!(single_head!(fast = "log.lua", "log_fast", raises = "false"), "sliding_log.lua", "LOG"),
    reserve_script!(
        single_head!(fast = "counter.lua", "counter_fast", raises = "true"),
        "sliding_counter.lua",
        "COUNTER"
    ),
    reserve_script!(single_head!(), "fixed_window.lua", "FIXED"),
    reserve_script!(single_head!(), "gcra.lua", "GCRA"),
];

/// Full source of the concurrency leases' script (`entry/lease.lua`).
pub const LEASE: &str =
    concat!(lua!("lib/clock.lua"), "\n", lua!("lib/lease.lua"), "\n", lua!("entry/lease.lua"));

/// Full source of the script doing many lease and reservation ops in one
/// call (`entry/holds.lua`; auto-batching): the clock, both fast paths,
/// the leases' code, every algorithm in `shared()` and the reservations'
/// code.
pub const HOLDS: &str = concat!(
    lua!("lib/clock.lua"),
    "\n",
    lua!("fast/log.lua"),
    "\n",
    lua!("fast/counter.lua"),
    "\n",
    lua!("lib/lease.lua"),
    "\n",
    shared_fn!(
        "{ LOG, COUNTER, FIXED, GCRA }",
        "sliding_log.lua",
        "sliding_counter.lua",
        "fixed_window.lua",
        "gcra.lua"
    ),
    lua!("lib/reserve.lua"),
    "\n",
    lua!("entry/holds.lua")
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
    reset: Script,
    lease: Script,
    reserve: [Script; 4],
    holds: Script,
}

impl Scripts {
    pub(crate) fn new() -> Scripts {
        Scripts {
            log: Script::new(&SLIDING_LOG),
            counter: Script::new(&SLIDING_COUNTER),
            fixed: Script::new(&FIXED_WINDOW),
            gcra: Script::new(&GCRA),
            check: Script::new(CHECK),
            release: Script::new(RELEASE),
            multi: Script::new(MULTI),
            reset: Script::new(RESET),
            lease: Script::new(LEASE),
            reserve: RESERVE.map(Script::new),
            holds: Script::new(HOLDS),
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

    /// The reset script.
    pub(crate) fn reset(&self) -> &Script {
        &self.reset
    }

    /// The concurrency leases' script.
    pub(crate) fn lease(&self) -> &Script {
        &self.lease
    }

    /// The reservations' script for `algorithm`.
    pub(crate) fn reserve(&self, algorithm: Algorithm) -> &Script {
        &self.reserve[usize::from(crate::calls::algorithm_code(algorithm)) - 1]
    }

    /// The script doing many lease and reservation ops at once.
    pub(crate) fn holds(&self) -> &Script {
        &self.holds
    }

    /// Every script, for loading at connect time.
    pub(crate) fn all(&self) -> [&Script; 14] {
        [
            &self.log,
            &self.counter,
            &self.fixed,
            &self.gcra,
            &self.check,
            &self.release,
            &self.multi,
            &self.reset,
            &self.lease,
            &self.reserve[0],
            &self.reserve[1],
            &self.reserve[2],
            &self.reserve[3],
            &self.holds,
        ]
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
