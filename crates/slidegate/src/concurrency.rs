//! Concurrency limits: at most N at once per identity — open streams,
//! exports, jobs. [`Limiter::acquire`](crate::Limiter::acquire) takes a
//! [`Lease`](crate::Lease) when fewer than N
//! are held; the lease is given back when released, dropped, or — by the
//! store itself — when its `ttl` passes without a [renewal](crate::Lease::renew)
//! (a killed process's leases come back).

use std::fmt;
use std::num::NonZeroU32;
use std::time::Duration;

use crate::identity::Identity;
use crate::limits::{MAX_NAME_LEN, MAX_WINDOW};
use crate::{Error, ErrorKind};

/// At most `limit` leases held at once per identity, each given back by
/// the store when its `ttl` passes without a renewal.
///
/// ```
/// use std::time::Duration;
/// use slidegate::{ConcurrencyLimit, Limiter};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let exports = ConcurrencyLimit::new("exports", 2, Duration::from_secs(60))?;
/// let limiter = Limiter::in_memory();
/// let first = limiter.acquire(&exports, "alice").await?;
/// let second = limiter.acquire(&exports, "alice").await?;
/// assert!(first.is_held() && second.is_held());
/// let third = limiter.acquire(&exports, "alice").await?;
/// assert!(!third.is_admitted(), "two are running");
/// assert_eq!(third.decision().remaining, 0);
/// first.release().await?;
/// assert!(limiter.acquire(&exports, "alice").await?.is_held());
/// # Ok::<(), slidegate::Error>(()) }).unwrap();
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ConcurrencyLimit {
    name: Box<str>,
    limit: NonZeroU32,
    ttl_ms: u64,
}

impl ConcurrencyLimit {
    /// At most `limit` at once, under `name` (which keys its leases in the
    /// store), each lease held at most `ttl` without a renewal.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidRule`] for a limit of 0, a `ttl` shorter than
    /// 1 ms or longer than [`MAX_WINDOW`], or a name that is not 1 to
    /// [`MAX_NAME_LEN`] characters of `A-Z a-z 0-9 _ - .`.
    pub fn new(name: &str, limit: u32, ttl: Duration) -> Result<ConcurrencyLimit, Error> {
        let limit = NonZeroU32::new(limit)
            .ok_or_else(|| Error::invalid_rule("a concurrency limit must be at least 1, got 0"))?;
        let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
        if name.is_empty() || name.len() > MAX_NAME_LEN || !name.chars().all(ok_char) {
            return Err(Error::invalid_rule(format!(
                "a concurrency limit's name must be 1..={MAX_NAME_LEN} characters of A-Z a-z 0-9 _ - ., got {:?}",
                name.chars().take(80).collect::<String>()
            )));
        }
        if ttl < Duration::from_millis(1) || ttl > MAX_WINDOW {
            return Err(Error::invalid_rule(format!(
                "a lease's ttl must be 1ms to {} days, got {ttl:?}",
                MAX_WINDOW.as_secs() / 86_400
            )));
        }
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        Ok(ConcurrencyLimit { name: name.into(), limit, ttl_ms })
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The most leases held at once per identity.
    pub fn limit(&self) -> u32 {
        self.limit.get()
    }

    /// How long a lease is held without a renewal.
    pub fn ttl(&self) -> Duration {
        Duration::from_millis(self.ttl_ms)
    }

    /// [`ttl`](Self::ttl) in milliseconds.
    pub fn ttl_ms(&self) -> u64 {
        self.ttl_ms
    }
}

impl fmt::Display for ConcurrencyLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} at once (leases of {:?})", self.name, self.limit, self.ttl())
    }
}

/// A lease's id: 128 random bits from the operating system, in hex. It
/// cannot be guessed, so a lease is released only by whoever was given it.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct LeaseId(Box<str>);

impl LeaseId {
    /// A fresh id.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Backend`] when the operating system gives no randomness.
    pub fn random() -> Result<LeaseId, Error> {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes)
            .map_err(|e| Error::new(ErrorKind::Backend, format!("no randomness for a lease id: {e}")))?;
        let mut hex = String::with_capacity(32);
        for byte in bytes {
            hex.push(char::from_digit(u32::from(byte >> 4), 16).unwrap_or('0'));
            hex.push(char::from_digit(u32::from(byte & 15), 16).unwrap_or('0'));
        }
        Ok(LeaseId(hex.into()))
    }

    /// An id as given back by a client (32 lowercase hex digits).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidKey`] for anything else.
    pub fn parse(text: &str) -> Result<LeaseId, Error> {
        if text.len() != 32 || !text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            return Err(Error::new(ErrorKind::InvalidKey, "a lease id is 32 lowercase hex digits"));
        }
        Ok(LeaseId(text.into()))
    }

    /// The id's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for LeaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Whoever holds the id may release the lease: not in logs whole.
        write!(f, "LeaseId({}…)", &self.0[..6.min(self.0.len())])
    }
}

/// One lease's request to a store: the limit, whose (an encoded
/// identity) and which lease.
#[derive(Debug, Clone)]
pub struct LeaseRequest<'a> {
    limit: &'a ConcurrencyLimit,
    identity: Identity<'a>,
    id: &'a LeaseId,
}

impl<'a> LeaseRequest<'a> {
    /// The lease `id` of `key` under `limit`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidKey`] for an empty key.
    pub fn new(
        limit: &'a ConcurrencyLimit,
        key: &'a str,
        id: &'a LeaseId,
    ) -> Result<LeaseRequest<'a>, Error> {
        Ok(LeaseRequest { limit, identity: Identity::new(key)?, id })
    }

    /// The limit.
    pub fn limit(&self) -> &ConcurrencyLimit {
        self.limit
    }

    /// Whose leases.
    pub fn identity(&self) -> &Identity<'a> {
        &self.identity
    }

    /// Which lease.
    pub fn id(&self) -> &LeaseId {
        self.id
    }
}
