//! The bounds slidegate enforces and the defaults of its builders, in one
//! place: every store decides exactly within these bounds and refuses
//! what lies beyond with a clear error.

use std::num::NonZeroU16;
use std::time::Duration;

#[cfg(doc)]
use crate::{Algorithm, ErrorKind, LimiterBuilder, MemoryStoreBuilder};

// Time.

/// The latest time, in ms since the clock's epoch, that every store decides
/// exactly: 2^43 − 1 ms, in the year 2248 of the UNIX epoch.
///
/// The Redis store's Lua computes in doubles, exact only below 2^53; the
/// sliding counter's bucket index multiplies the time by up to
/// [`MAX_BUCKETS`] (< 2^10) buckets. Stores refuse a
/// clock reading beyond this with [`ErrorKind::InvalidTime`] rather than
/// decide inexactly.
pub const MAX_TIME_MS: u64 = (1 << 43) - 1;

// Rules.

/// The longest window a rule may have (366 days).
///
/// Bounded so that every timestamp and deadline a store computes stays an
/// exact integer, also inside Redis' Lua (whose numbers are doubles).
pub const MAX_WINDOW: Duration = Duration::from_secs(366 * 24 * 3600);

/// The largest bucket count of a sliding counter.
pub const MAX_BUCKETS: u16 = 1000;

/// The default bucket count of a sliding counter.
pub const DEFAULT_BUCKETS: NonZeroU16 = NonZeroU16::new(10).expect("10 is not zero");

/// `limit × window (ms)` must stay below this for [`Algorithm::Gcra`], whose
/// state is kept in fractions of a millisecond (2^53: exact in a double).
pub const GCRA_MAX_PRODUCT: u64 = 1 << 53;

/// The longest rule name.
pub const MAX_NAME_LEN: usize = 64;

/// The most violations `warn_after` / `ban_after` may name: violations are
/// kept one entry each, so this bounds the memory of an identity.
pub const MAX_VIOLATIONS: u32 = 10_000;

// Requests.

/// Identities longer than this many bytes are replaced by a digest.
pub const MAX_IDENTITY_LEN: usize = 128;

/// The most dimensions one check may have.
pub const MAX_DIMENSIONS: usize = 64;

// Defaults of the builders.

/// Default [`LimiterBuilder::deadline`]: how long one store call may take.
pub const DEFAULT_DEADLINE: Duration = Duration::from_millis(50);

/// Default key capacity of the local fallback store.
pub const DEFAULT_FALLBACK_KEYS: usize = 100_000;

/// Default [`LimiterBuilder::deny_cache`](crate::LimiterBuilder::deny_cache) capacity.
pub const DEFAULT_DENY_CACHE_CAPACITY: usize = 100_000;

/// Default [`MemoryStoreBuilder::max_keys`].
pub const DEFAULT_MAX_KEYS: usize = 1_000_000;

/// The furthest a charge ([`Rule::budget`](crate::Rule::budget),
/// [`Limiter::charge`](crate::Limiter::charge)) takes a GCRA bucket's
/// arrival time ahead of now, in units of `1/limit` ms (2^53 - 1: exact in
/// the Redis scripts' doubles; a full bucket is less, see
/// [`GCRA_MAX_PRODUCT`]).
/// Charges beyond it are recorded up to it.
pub const GCRA_MAX_AHEAD: u64 = (1 << 53) - 1;

/// The most cost a sliding log holds in its window (2^49: its running
/// totals stay exact in the Redis scripts' doubles). Charges beyond it
/// are recorded up to it.
pub const MAX_LOGGED: u64 = 1 << 49;
