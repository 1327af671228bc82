//! The one error type of the core crate.

use std::fmt;

/// What went wrong, as a value callers can match on.
///
/// Being over the limit is never an error: it is a [`Decision`](crate::Decision).
/// Errors are invalid input or infrastructure failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A rule could not be built: zero limit, zero or oversized window,
    /// bucket count out of bounds, or a bad rule name.
    InvalidRule,
    /// A key (identity) was rejected, e.g. because it is empty.
    InvalidKey,
    /// The cost of a request is zero or larger than the rule's limit, so it
    /// could never be admitted.
    InvalidCost,
    /// A store or limiter was configured with something it cannot use: a
    /// malformed URL, a key prefix that would break the key layout.
    InvalidConfig,
    /// The clock read a time outside what every store decides exactly
    /// (`0..=`[`MAX_TIME_MS`](crate::limits::MAX_TIME_MS), up to the year 2248): a
    /// manual or client clock set beyond it.
    InvalidTime,
    /// The store refused a new key because it holds as many keys as it is
    /// allowed to (see [`MemoryStoreBuilder::max_keys`](crate::MemoryStoreBuilder::max_keys)).
    CapacityExhausted,
    /// The store could not be reached or the connection broke.
    Unavailable,
    /// The store did not answer in time.
    Timeout,
    /// The store answered something this crate does not understand, or
    /// rejected a command (a bug, a misconfigured server, a forbidden
    /// command, a key holding a value slidegate did not write).
    Backend,
}

impl ErrorKind {
    fn describe(self) -> &'static str {
        match self {
            ErrorKind::InvalidRule => "invalid rule",
            ErrorKind::InvalidKey => "invalid key",
            ErrorKind::InvalidCost => "invalid cost",
            ErrorKind::InvalidConfig => "invalid configuration",
            ErrorKind::InvalidTime => "invalid time",
            ErrorKind::CapacityExhausted => "store capacity exhausted",
            ErrorKind::Unavailable => "store unavailable",
            ErrorKind::Timeout => "store timed out",
            ErrorKind::Backend => "store error",
        }
    }
}

/// The error type of slidegate's core and of every [`Store`](crate::Store).
pub struct Error {
    kind: ErrorKind,
    message: String,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl Error {
    /// Creates an error of `kind` with a human-readable message.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error { kind, message: message.into(), source: None }
    }

    /// Creates an error that wraps the underlying cause (e.g. a client error).
    pub fn with_source(
        kind: ErrorKind,
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error { kind, message: message.into(), source: Some(Box::new(source)) }
    }

    /// What kind of error this is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message, without the kind's description that `Display` puts
    /// in front of it.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether retrying the same call later may succeed.
    ///
    /// True for infrastructure failures (unavailable, timeout, capacity);
    /// false for invalid input, which fails the same way every time.
    pub fn is_transient(&self) -> bool {
        matches!(self.kind, ErrorKind::Unavailable | ErrorKind::Timeout | ErrorKind::CapacityExhausted)
    }

    /// Whether the store failed (unavailable, timed out, out of capacity,
    /// or an error of its own) rather than the input being invalid: what a
    /// check returns under [`FailurePolicy::Fail`](crate::FailurePolicy::Fail),
    /// and what an edge answers `503` / `UNAVAILABLE`.
    pub fn is_store_failure(&self) -> bool {
        self.is_transient() || self.kind == ErrorKind::Backend
    }

    /// Whether the store did not answer in time.
    pub fn is_timeout(&self) -> bool {
        self.kind == ErrorKind::Timeout
    }

    pub(crate) fn invalid_rule(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::InvalidRule, message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind.describe(), self.message)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Error");
        d.field("kind", &self.kind).field("message", &self.message);
        if let Some(source) = &self.source {
            d.field("source", &format_args!("{source}"));
        }
        d.finish()
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|e| e as _)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_kind_and_message() {
        let e = Error::new(ErrorKind::InvalidCost, "cost 5 exceeds limit 3");
        assert_eq!(e.to_string(), "invalid cost: cost 5 exceeds limit 3");
        assert!(!e.is_transient());
        assert!(Error::new(ErrorKind::Timeout, "x").is_transient());
    }
}
