//! Script calls, one module per kind, each owning its encoding and
//! decoding (docs/design.md has the table of scripts and their use):
//!
//! * [`single`] — one rule without a penalty: the algorithm's fast script;
//! * [`multi`] — many such checks in one call (auto-batching, batches);
//! * [`general`] — penalties and multi-dimension requests;
//! * [`release`] — taking back a cross-slot reservation;
//! * [`lease`] — concurrency leases;
//! * [`reserve`] — reservations;
//! * [`holds`] — lease and reservation ops, alone or many at once.

pub(crate) mod general;
pub(crate) mod holds;
pub(crate) mod lease;
pub(crate) mod multi;
pub(crate) mod release;
pub(crate) mod reserve;
pub(crate) mod single;

use std::time::Duration;

use redis::{Cmd, Script};
use slidegate::{Algorithm, Error, ErrorKind};

/// A script call ready to send: the command, and the script it runs (for
/// a reload on `NOSCRIPT`).
pub(crate) struct Call<'s> {
    pub(crate) script: &'s Script,
    pub(crate) cmd: Cmd,
}

impl<'s> Call<'s> {
    /// An `EVALSHA` of `script` on `keys`; add the ARGV with `.cmd.arg(…)`.
    pub(crate) fn new(script: &'s Script, keys: &[&str]) -> Call<'s> {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(script.get_hash()).arg(keys.len()).arg(keys);
        Call { script, cmd }
    }
}

/// A script's reply: its integers. Replies are arrays of integers, except
/// a fast script's admitted common case: one integer (see
/// [`single::decode`]), which Redis answers without building an array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ints(Vec<i64>);

impl redis::FromRedisValue for Ints {
    fn from_redis_value(v: redis::Value) -> Result<Ints, redis::ParsingError> {
        match v {
            redis::Value::Int(n) => Ok(Ints(vec![n])),
            other => Vec::<i64>::from_redis_value(other).map(Ints),
        }
    }
}

impl std::ops::Deref for Ints {
    type Target = [i64];

    fn deref(&self) -> &[i64] {
        &self.0
    }
}

/// The scripts' code of an algorithm.
pub(crate) fn algorithm_code(algorithm: Algorithm) -> u8 {
    match algorithm {
        Algorithm::SlidingCounter { .. } => 2,
        Algorithm::FixedWindow => 3,
        Algorithm::Gcra => 4,
        // `Algorithm` is non-exhaustive; the log is the exact default.
        _ => 1,
    }
}

/// The buckets the scripts see: a counter's, 1 for the others.
fn buckets(algorithm: Algorithm) -> u16 {
    match algorithm {
        Algorithm::SlidingCounter { buckets } => buckets.get(),
        _ => 1,
    }
}

fn unexpected(reply: &[i64]) -> Error {
    let shown: Vec<i64> = reply.iter().copied().take(16).collect();
    Error::new(ErrorKind::Backend, format!("unexpected script reply {shown:?}"))
}

fn ms(v: i64) -> Duration {
    Duration::from_millis(u64::try_from(v).unwrap_or(0))
}

fn count(v: i64) -> u32 {
    u32::try_from(v.max(0)).unwrap_or(u32::MAX)
}
