//! Maps redis-rs errors onto [`slidegate::Error`] at the crate boundary.

use slidegate::{Error, ErrorKind};

/// Classifies a client error: transient (unreachable, timed out) or not.
pub(crate) fn from_redis(context: &str, err: &redis::RedisError) -> Error {
    let busy = err.code().is_some_and(is_busy);
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
    // The client error's text is the message's end, and not chained as a
    // source too: a printer of the whole chain (anyhow's `{:#}`) would show
    // it twice, and redis-rs chains its own cause (an I/O error whose text
    // its message already holds) a third time. Each cause once.
    Error::new(kind, format!("{context}: {err}"))
}

/// Whether a server error code means "not now" rather than "never".
fn is_busy(code: &str) -> bool {
    matches!(code, "LOADING" | "BUSY" | "TRYAGAIN" | "MASTERDOWN" | "CLUSTERDOWN" | "READONLY")
}

/// Classifies an error a script caught and answered as a message (see
/// entry/multi.lua): `"<CODE> <text>"`, or a Lua error's text.
pub(crate) fn from_script_message(context: &str, message: &str) -> Error {
    let code = message.split_whitespace().next().unwrap_or_default();
    let kind = if is_busy(code) { ErrorKind::Unavailable } else { ErrorKind::Backend };
    Error::new(kind, format!("{context}: {message}"))
}
