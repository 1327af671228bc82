//! [`CapturedLog`]: what `tracing` logs during a test, kept for the test
//! to read (how often a warning was written, with which fields).

use std::sync::{Arc, Mutex, PoisonError};

/// The lines a subscriber from [`CapturedLog::subscriber`] writes.
///
/// ```
/// use slidegate_testkit::CapturedLog;
///
/// let log = CapturedLog::default();
/// tracing::subscriber::with_default(log.subscriber(), || tracing::warn!(held_back = 3, "store failed"));
/// assert_eq!(log.lines("store failed").len(), 1);
/// assert!(log.lines("store failed")[0].contains("held_back=3"));
/// ```
#[derive(Clone, Debug, Default)]
pub struct CapturedLog(Arc<Mutex<Vec<u8>>>);

impl CapturedLog {
    /// A subscriber writing every event (of any level), without colours,
    /// to this log. Install it with `tracing::subscriber::with_default` or
    /// `set_default`: it sees the events of the thread it is installed on.
    pub fn subscriber(&self) -> impl tracing::Subscriber + Send + Sync + 'static {
        let writer = self.clone();
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish()
    }

    /// The lines written so far that contain `containing` ("" for all).
    pub fn lines(&self, containing: &str) -> Vec<String> {
        let bytes = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        String::from_utf8_lossy(&bytes).lines().filter(|l| l.contains(containing)).map(String::from).collect()
    }
}

impl std::io::Write for CapturedLog {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
