//! `#[rate_limit]` on methods: the limiter and the key may come from `self`.

mod support;

use std::sync::Arc;
use std::time::Duration;

use slidegate::{Limiter, MemoryStore, RateLimited, Rule, rate_limit};
use support::{ApiError, is_denied, manual_limiter};

struct Profiles {
    limiter: Limiter<MemoryStore>,
    /// A rule chosen at run time (e.g. from configuration).
    rule: Rule,
    tenant: String,
}

impl Profiles {
    #[rate_limit(limiter = self.limiter, limit = 2, window = "1s", key = user_id, message = "too many profile reads")]
    async fn read(&self, user_id: u64) -> Result<String, ApiError> {
        Ok(format!("profile {user_id}"))
    }

    /// `&mut self` and a rule and key taken from fields.
    #[rate_limit(limiter = self.limiter, rule = self.rule, key = format!("{}:{user_id}", self.tenant))]
    async fn write(&mut self, user_id: u64, bio: String) -> Result<usize, ApiError> {
        self.tenant.push('!');
        Ok(bio.len())
    }
}

#[tokio::test]
async fn a_method_uses_its_own_limiter() {
    let (limiter, clock) = manual_limiter();
    let rule = Rule::new(1, Duration::from_secs(1)).unwrap();
    let mut profiles = Profiles { limiter, rule, tenant: "acme".into() };

    assert!(profiles.read(1).await.is_ok());
    assert!(profiles.read(1).await.is_ok());
    let denied = profiles.read(1).await;
    assert!(is_denied(&denied));
    assert_eq!(denied.err().map(|e| e.to_string()).as_deref(), Some("too many profile reads"));
    assert!(profiles.read(2).await.is_ok(), "another user is not limited");
    clock.advance(Duration::from_secs(1));
    assert!(profiles.read(1).await.is_ok());

    assert_eq!(profiles.write(1, "hello".into()).await.ok(), Some(5));
    // The body changed the tenant, so the key differs: the next call is a new identity.
    assert_eq!(profiles.write(1, "again".into()).await.ok(), Some(5));
    profiles.tenant = "acme".into();
    assert!(is_denied(&profiles.write(1, "more".into()).await));
}

/// Limiters shared through an `Arc` (or anything that derefs to a `Limiter`).
#[derive(Clone)]
struct Gateway {
    limiter: Arc<Limiter<MemoryStore>>,
}

impl Gateway {
    #[rate_limit(limiter = self.limiter, limit = 1, window = "1m", key = path, cost = 1)]
    async fn forward(self, path: &str) -> Result<(), RateLimited> {
        Ok(())
    }
}

#[tokio::test]
async fn by_value_receivers_and_shared_limiters() {
    let gateway = Gateway { limiter: Arc::new(Limiter::in_memory()) };
    assert!(gateway.clone().forward("/a").await.is_ok());
    let limited = gateway.clone().forward("/a").await.err();
    assert!(limited.as_ref().is_some_and(RateLimited::is_denied));
    assert!(gateway.forward("/b").await.is_ok());
}

/// Two types of one module with a method of the same name: each method
/// keeps its own state (the derived rule name holds the type's name).
struct Orders {
    limiter: Limiter<MemoryStore>,
}

struct Invoices {
    limiter: Limiter<MemoryStore>,
}

impl Orders {
    #[rate_limit(limiter = self.limiter, limit = 1, window = "1m", key = id)]
    async fn fetch(&self, id: u64) -> Result<(), RateLimited> {
        Ok(())
    }
}

impl Invoices {
    #[rate_limit(limiter = self.limiter, limit = 1, window = "1m", key = id)]
    async fn fetch(&self, id: u64) -> Result<(), RateLimited> {
        Ok(())
    }
}

#[tokio::test]
async fn methods_of_one_name_on_two_types_keep_apart() {
    let limiter = Limiter::in_memory();
    let orders = Orders { limiter: limiter.clone() };
    let invoices = Invoices { limiter: limiter.clone() };
    assert!(orders.fetch(7).await.is_ok());
    assert!(invoices.fetch(7).await.is_ok(), "a state of its own, though the limiter is shared");
    assert!(orders.fetch(7).await.err().is_some_and(|e| e.is_denied()));
    assert!(invoices.fetch(7).await.err().is_some_and(|e| e.is_denied()));
}
