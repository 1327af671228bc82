//! Time, injected: the system clock for production, a manual clock for tests.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::limits::MAX_TIME_MS;
use crate::{Error, ErrorKind};

/// Checks a clock reading against [`MAX_TIME_MS`], returning it.
///
/// # Errors
///
/// [`ErrorKind::InvalidTime`] beyond [`MAX_TIME_MS`].
///
/// ```
/// use slidegate::ErrorKind;
/// use slidegate::limits::MAX_TIME_MS;
/// use slidegate::store::validate_time;
///
/// assert_eq!(validate_time(MAX_TIME_MS).unwrap(), MAX_TIME_MS);
/// assert_eq!(validate_time(MAX_TIME_MS + 1).unwrap_err().kind(), ErrorKind::InvalidTime);
/// ```
pub fn validate_time(now_ms: u64) -> Result<u64, Error> {
    if now_ms > MAX_TIME_MS {
        return Err(Error::new(
            ErrorKind::InvalidTime,
            format!(
                "the clock reads {now_ms} ms, beyond the last time stores decide exactly \
                 ({MAX_TIME_MS} ms, in the year 2248)"
            ),
        ));
    }
    Ok(now_ms)
}

/// A source of wall-clock time in milliseconds.
///
/// Stores read time through this trait so that tests (yours and ours) can
/// drive time by hand with a [`ManualClock`].
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// Milliseconds since an epoch fixed for the life of the clock (the UNIX
    /// epoch for [`SystemClock`]).
    fn now_ms(&self) -> u64;
}

/// The operating system's wall clock (milliseconds since the UNIX epoch).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        // A clock before 1970 is a broken machine; answering 0 keeps the
        // limiter working (conservatively) instead of panicking.
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
    }
}

/// A clock that moves only when told to. Clones share the same time.
///
/// ```
/// use std::time::Duration;
/// use slidegate::{Clock, ManualClock};
///
/// let clock = ManualClock::new(1_000);
/// let seen_by_store = clock.clone();
/// clock.advance(Duration::from_millis(250));
/// assert_eq!(seen_by_store.now_ms(), 1_250);
/// ```
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    now: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock reading `start_ms`.
    pub fn new(start_ms: u64) -> ManualClock {
        ManualClock { now: Arc::new(AtomicU64::new(start_ms)) }
    }

    /// Moves time forward by `by` (saturating).
    pub fn advance(&self, by: Duration) {
        let by = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        let _ = self.now.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| Some(t.saturating_add(by)));
    }

    /// Sets the time to `now_ms` (may move backwards, to test clock steps).
    pub fn set(&self, now_ms: u64) {
        self.now.store(now_ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
    }
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now_ms(&self) -> u64 {
        (**self).now_ms()
    }
}
