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

/// Whether connecting failed in a way waiting cannot heal: the server
/// refuses the user or password, the ACL forbids a command slidegate
/// needs, or TLS fails (a certificate the roots do not trust, a server
/// that speaks no TLS) — not a server that is down, starting or busy.
pub(crate) fn cannot_heal(err: &redis::RedisError) -> bool {
    if matches!(err.kind(), redis::ErrorKind::AuthenticationFailed | redis::ErrorKind::InvalidClientConfig) {
        return true;
    }
    if matches!(err.code(), Some("NOAUTH" | "WRONGPASS" | "NOPERM")) {
        return true;
    }
    // rustls reports what is wrong with a handshake as invalid data; redis-rs
    // keeps the I/O error behind an `Arc`, which is what its `source` is.
    let io = std::error::Error::source(err)
        .and_then(|cause| cause.downcast_ref::<std::sync::Arc<dyn std::error::Error + Send + Sync>>())
        .and_then(|shared| shared.downcast_ref::<std::io::Error>());
    io.is_some_and(|io| io.kind() == std::io::ErrorKind::InvalidData)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_waiting_cannot_heal_is_told_apart() {
        let io = |kind: std::io::ErrorKind| redis::RedisError::from(std::io::Error::new(kind, "x"));
        assert!(cannot_heal(&io(std::io::ErrorKind::InvalidData)), "a TLS handshake refused");
        assert!(!cannot_heal(&io(std::io::ErrorKind::ConnectionRefused)));
        assert!(!cannot_heal(&io(std::io::ErrorKind::TimedOut)));
        assert!(cannot_heal(&redis::RedisError::from((redis::ErrorKind::AuthenticationFailed, "no"))));
        assert!(cannot_heal(&redis::RedisError::from((redis::ErrorKind::InvalidClientConfig, "no"))));
        assert!(!cannot_heal(&redis::RedisError::from((redis::ErrorKind::Io, "dropped"))));
    }
}
