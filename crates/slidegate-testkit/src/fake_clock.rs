//! A wall clock a test sets, for a real `redis-server`: the server runs
//! under libfaketime and reads its time from a file the test writes.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::RedisServerBuilder;

/// Where Debian (and most distributions) install libfaketime.
const LIBRARY_DIRS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/faketime",
    "/usr/lib/aarch64-linux-gnu/faketime",
    "/usr/lib/faketime",
    "/usr/local/lib/faketime",
];

/// A stopped clock for a server: its `TIME`, key expiry and everything
/// else reading a clock see the time last [`set`](Self::set), to the
/// millisecond, until set again. Both the wall clock and the monotonic one
/// stand still (Valkey derives its wall time from the monotonic clock
/// between reads, so faking only the wall clock is off by up to a
/// scheduling delay); the server's timers fire when the time is set
/// forward.
///
/// The server must not link jemalloc dynamically: libfaketime cannot
/// start under it (Debian's `redis-server` fails; Valkey builds, which
/// link their allocator statically, work).
///
/// ```no_run
/// # fn main() -> std::io::Result<()> {
/// let clock = slidegate_testkit::FakeClock::new(1_700_000_000_000)?;
/// let valkey = std::env::var_os("SLIDEGATE_VALKEY_SERVER").expect("a valkey-server");
/// let server = clock.apply(slidegate_testkit::RedisServer::builder().binary(valkey)).start()?;
/// clock.set(1_700_000_000_250)?; // TIME now answers 1700000000 s, 250000 µs
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct FakeClock {
    library: PathBuf,
    file: PathBuf,
    _dir: tempfile::TempDir,
}

impl FakeClock {
    /// A clock standing at `start_ms` (Unix time in ms).
    ///
    /// # Errors
    ///
    /// When libfaketime is not installed (`apt-get install faketime`;
    /// `$SLIDEGATE_LIBFAKETIME` names the library elsewhere), or the time
    /// file cannot be written.
    pub fn new(start_ms: u64) -> io::Result<FakeClock> {
        let library = libfaketime()?;
        let dir = tempfile::tempdir()?;
        let clock = FakeClock { library, file: dir.path().join("now"), _dir: dir };
        clock.set(start_ms)?;
        Ok(clock)
    }

    /// Runs the server of `builder` on this clock.
    pub fn apply(&self, builder: RedisServerBuilder) -> RedisServerBuilder {
        builder
            .env("LD_PRELOAD", self.library.as_os_str())
            .env("FAKETIME_TIMESTAMP_FILE", self.file.as_os_str())
            // Read the file at every clock reading, not once a few seconds.
            .env("FAKETIME_NO_CACHE", "1")
            .env("TZ", "UTC")
    }

    /// Sets the time to `ms` (Unix time in ms; forward or back).
    ///
    /// # Errors
    ///
    /// When the time file cannot be written.
    pub fn set(&self, ms: u64) -> io::Result<()> {
        // Written aside and renamed: the server never reads half a time.
        let next = self.file.with_extension("next");
        fs::write(&next, format!("{}\n", utc(ms)))?;
        fs::rename(&next, &self.file)
    }
}

/// The libfaketime library to preload (`LD_PRELOAD`): `$SLIDEGATE_LIBFAKETIME`,
/// or where the distributions install it. Preloading it with `FAKETIME`
/// set, rather than running the `faketime` wrapper, needs no semaphore and
/// shared memory (the wrapper leaves them behind in /dev/shm when its child
/// is killed, and fails once a new process id meets a stale one).
///
/// # Errors
///
/// When libfaketime is not installed (`apt-get install faketime`).
pub fn libfaketime() -> io::Result<PathBuf> {
    if let Some(path) = std::env::var_os("SLIDEGATE_LIBFAKETIME") {
        return Ok(PathBuf::from(path));
    }
    LIBRARY_DIRS
        .iter()
        .map(|dir| Path::new(dir).join("libfaketime.so.1"))
        .find(|path| path.exists())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "libfaketime is not installed: `apt-get install faketime` (or set SLIDEGATE_LIBFAKETIME)",
            )
        })
}

/// `ms` as libfaketime's absolute time, `YYYY-MM-DD hh:mm:ss.mmmm` (UTC),
/// half a millisecond into `ms`: libfaketime reads the fraction as a
/// double, and `.999` would come back as 998,999 µs.
fn utc(ms: u64) -> String {
    let (days, ms_of_day) = (ms / 86_400_000, ms % 86_400_000);
    let (year, month, day) = civil_from_days(days);
    let (h, m, s, milli) =
        (ms_of_day / 3_600_000, ms_of_day / 60_000 % 60, ms_of_day / 1000 % 60, ms_of_day % 1000);
    format!("{year:04}-{month:02}-{day:02} {h:02}:{m:02}:{s:02}.{milli:03}5")
}

/// The proleptic Gregorian date `days` after 1970-01-01 (the inverse of
/// the usual days-from-civil count, in 400-year eras of 146,097 days).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::utc;

    #[test]
    fn times_are_written_as_utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00.0005");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00.0005");
        assert_eq!(utc(1_700_000_000_123), "2023-11-14 22:13:20.1235");
        assert_eq!(utc(1_767_225_599_999), "2025-12-31 23:59:59.9995");
    }
}
