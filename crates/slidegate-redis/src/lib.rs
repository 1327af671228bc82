//! Redis store for slidegate.
//!
//! [`RedisStore`] implements [`slidegate::Store`] on Redis: every decision
//! is one atomic Lua script call (assembled in [`scripts`] from the files
//! of `scripts/`), the Redis server's clock decides "now", the sliding log
//! counts every admitted request (a packed string of times up to a limit of
//! 128, a list of items with running totals above; see
//! `scripts/algorithms/sliding_log.lua`), every key carries a TTL, and
//! identities are hash-tagged so one identity's keys share a Cluster slot. Errors are
//! [`slidegate::Error`]s, classified as transient (unreachable, timeout) or
//! not at this crate's boundary.
//!
//! ```no_run
//! use std::num::NonZeroU32;
//! use slidegate::{Limiter, Rule};
//! use slidegate_redis::RedisStore;
//!
//! # async fn demo() -> Result<(), slidegate::Error> {
//! let limiter = Limiter::new(RedisStore::connect("redis://127.0.0.1:6380/").await?);
//! let rule = Rule::per_second(NonZeroU32::new(10).unwrap());
//! if !limiter.check(&rule, "203.0.113.9").await?.allowed {
//!     // answer 429
//! }
//! # Ok(()) }
//! ```

mod auto_batch;
mod batch;
mod builder;
mod calls;
mod cluster;
mod connect;
mod connection;
mod cross_slot;
mod decide;
mod errors;
mod keys;
mod now;
mod replaceable;
pub mod scripts;
mod sentinel;
mod server_stats;
mod store;
mod tls;
mod transport;
mod url;

pub use auto_batch::{AUTO_BATCH_DIRECT, AUTO_BATCH_IN_FLIGHT};
pub use builder::{
    DEFAULT_AUTO_BATCH, DEFAULT_CONNECT_TIMEOUT, DEFAULT_MAX_CLOCK_SKEW, DEFAULT_PREFIX,
    DEFAULT_RESPONSE_TIMEOUT, RedisStoreBuilder,
};
pub use cluster::{DEFAULT_CLUSTER_CONNECTIONS, DEFAULT_MAX_IN_FLIGHT};
pub use keys::{MAX_PREFIX_LEN, check_prefix, penalty_keys, state_key};
pub use server_stats::{KEY_SAMPLE, ServerStats};
pub use store::RedisStore;
pub use url::redact_url;
