//! A small account service whose methods are guarded by `#[rate_limit]`.

use std::fmt;
use std::sync::LazyLock;
use std::time::Duration;

use slidegate::{Limiter, MemoryStore, RateLimited, Rule, rate_limit};

/// Exports share one named rule with the rest of the application: 100 rows
/// per user per minute.
static EXPORT_RULE: LazyLock<Rule> = LazyLock::new(|| {
    Rule::new(100, Duration::from_secs(60))
        .and_then(|rule| rule.named("export"))
        .expect("a constant, valid rule")
});

/// The service's own error type; `From<RateLimited>` is all `#[rate_limit]` needs.
#[derive(Debug)]
pub(crate) enum ServiceError {
    /// Over a limit (or the limiter could not decide).
    Limited(RateLimited),
    /// Wrong password.
    BadCredentials,
}

impl From<RateLimited> for ServiceError {
    fn from(limited: RateLimited) -> Self {
        ServiceError::Limited(limited)
    }
}

impl fmt::Display for ServiceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServiceError::Limited(limited) => write!(f, "{limited}"),
            ServiceError::BadCredentials => f.write_str("bad credentials"),
        }
    }
}

impl std::error::Error for ServiceError {}

/// Accounts: logins and exports, each with its own limit.
pub(crate) struct Accounts {
    /// Shared by every guarded method (and, in a real service, by clones of
    /// the service); the memory store here, `RedisStore` across instances.
    limiter: Limiter<MemoryStore>,
}

impl Accounts {
    /// A service checking with `limiter`.
    pub(crate) fn new(limiter: Limiter<MemoryStore>) -> Self {
        Accounts { limiter }
    }

    /// Three attempts per user per 10 seconds, whether they succeed or not.
    #[rate_limit(
        limiter = self.limiter,
        limit = 3,
        window = "10s",
        key = user,
        message = "too many login attempts, try again later"
    )]
    pub(crate) async fn login(&self, user: &str, password: &str) -> Result<String, ServiceError> {
        if password == "hunter2" {
            Ok(format!("session for {user}"))
        } else {
            Err(ServiceError::BadCredentials)
        }
    }

    /// An export costs one unit per row, against the shared `export` rule.
    #[rate_limit(limiter = self.limiter, rule = EXPORT_RULE, key = user, cost = rows)]
    pub(crate) async fn export(&self, user: &str, rows: u32) -> Result<u32, ServiceError> {
        Ok(rows)
    }
}
