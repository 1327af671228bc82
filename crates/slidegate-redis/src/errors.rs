//! Maps redis-rs errors onto [`slidegate::Error`] at the crate boundary.

use slidegate::{Error, ErrorKind};

/// Classifies a client error: transient (unreachable, timed out) or not.
pub(crate) fn from_redis(context: &str, err: redis::RedisError) -> Error {
    // Server replies that mean "not now" rather than "never".
    let busy = matches!(
        err.code(),
        Some("LOADING" | "BUSY" | "TRYAGAIN" | "MASTERDOWN" | "CLUSTERDOWN" | "READONLY")
    );
    let kind = if err.is_timeout() {
        ErrorKind::Timeout
    } else if err.is_io_error()
        || err.is_connection_refusal()
        || err.is_connection_dropped()
        || err.is_unrecoverable_error()
        || busy
    {
        ErrorKind::Unavailable
    } else {
        ErrorKind::Backend
    };
    Error::with_source(kind, format!("{context}: {err}"), err)
}
