//! What the attribute tests share: an application error type and limiters
//! on a hand-driven clock.

use std::fmt;

use slidegate::{Limiter, ManualClock, MemoryStore, RateLimited};

/// An application's own error: the only thing `#[rate_limit]` asks of it is
/// `From<RateLimited>`.
#[derive(Debug)]
pub(crate) enum ApiError {
    Limited(RateLimited),
    #[allow(dead_code)] // shows that the error type has its own variants too
    NotFound,
}

impl From<RateLimited> for ApiError {
    fn from(limited: RateLimited) -> Self {
        ApiError::Limited(limited)
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiError::Limited(limited) => write!(f, "{limited}"),
            ApiError::NotFound => f.write_str("not found"),
        }
    }
}

impl ApiError {
    /// The `RateLimited` inside, if that is what this is.
    pub(crate) fn limited(&self) -> Option<&RateLimited> {
        match self {
            ApiError::Limited(limited) => Some(limited),
            ApiError::NotFound => None,
        }
    }
}

/// A limiter on a fresh memory store whose time moves only when told.
pub(crate) fn manual_limiter() -> (Limiter<MemoryStore>, ManualClock) {
    let clock = ManualClock::new(1_000_000);
    (Limiter::new(MemoryStore::builder().clock(clock.clone()).build()), clock)
}

/// Whether `result` is a denial (not a limiter failure).
pub(crate) fn is_denied<T>(result: &Result<T, ApiError>) -> bool {
    matches!(result, Err(e) if e.limited().is_some_and(RateLimited::is_denied))
}
