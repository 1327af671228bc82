//! `#[rate_limit]` on free `async fn`s: keys, costs, messages, named rules,
//! limiter errors.

mod support;

use std::num::NonZeroU32;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use slidegate::{ErrorKind, Limiter, MemoryStore, RateLimited, Rule, Source, Store, rate_limit};
use support::{ApiError, is_denied, manual_limiter};

#[rate_limit(limiter = limiter, limit = 2, window = "10s", key = user_id)]
async fn fetch(limiter: &Limiter<MemoryStore>, user_id: &str) -> Result<String, ApiError> {
    Ok(format!("data of {user_id}"))
}

#[tokio::test]
async fn the_same_user_is_limited_and_another_is_not() {
    let (limiter, clock) = manual_limiter();
    assert_eq!(fetch(&limiter, "alice").await.ok().as_deref(), Some("data of alice"));
    clock.advance(Duration::from_secs(4));
    assert!(fetch(&limiter, "alice").await.is_ok());
    let denied = fetch(&limiter, "alice").await;
    assert!(is_denied(&denied), "{denied:?}");
    let limited = denied.as_ref().err().and_then(ApiError::limited);
    // Exact: alice's first call leaves the 10 s window 6 s from now.
    assert_eq!(limited.and_then(RateLimited::retry_after), Some(Duration::from_secs(6)));
    assert_eq!(limited.and_then(RateLimited::decision).map(|d| d.remaining), Some(0));
    assert_eq!(denied.err().map(|e| e.to_string()).as_deref(), Some("rate limited: retry after 6s"));

    assert!(fetch(&limiter, "bob").await.is_ok(), "bob has his own quota");
    clock.advance(Duration::from_secs(6));
    assert!(fetch(&limiter, "alice").await.is_ok(), "the window slid past alice's first call");
}

static CALLS: AtomicU32 = AtomicU32::new(0);

/// The key is built from two arguments; both are moved by the body after
/// the check, which only borrowed them.
#[rate_limit(limiter = limiter, limit = 1, window = "1m", key = format!("{tenant}:{user}"))]
async fn per_tenant(
    limiter: &Limiter<MemoryStore>,
    tenant: String,
    user: String,
) -> Result<String, ApiError> {
    CALLS.fetch_add(1, Ordering::Relaxed);
    Ok(tenant + "/" + &user)
}

#[tokio::test]
async fn a_key_expression_over_several_arguments() {
    let (limiter, _clock) = manual_limiter();
    let call = |tenant: &str, user: &str| per_tenant(&limiter, tenant.to_owned(), user.to_owned());
    assert_eq!(call("acme", "ann").await.ok().as_deref(), Some("acme/ann"));
    assert!(is_denied(&call("acme", "ann").await));
    assert!(call("acme", "bo").await.is_ok());
    assert!(call("initech", "ann").await.is_ok());
    assert_eq!(CALLS.load(Ordering::Relaxed), 3, "a denied call does not run the body");
}

#[rate_limit(limiter = limiter, limit = 10, window = "1s", key = "export", cost = rows, message = "export quota used up")]
async fn export(limiter: &Limiter<MemoryStore>, rows: u32) -> Result<u32, ApiError> {
    Ok(rows)
}

#[tokio::test]
async fn cost_and_message() {
    let (limiter, _clock) = manual_limiter();
    assert!(export(&limiter, 6).await.is_ok());
    let denied = export(&limiter, 5).await;
    assert!(is_denied(&denied));
    let limited = denied.as_ref().err().and_then(ApiError::limited);
    assert_eq!(limited.and_then(RateLimited::message), Some("export quota used up"));
    assert_eq!(limited.and_then(RateLimited::decision).map(|d| d.remaining), Some(4));
    assert_eq!(denied.err().map(|e| e.to_string()).as_deref(), Some("export quota used up"));
    assert!(export(&limiter, 4).await.is_ok(), "a cheaper call still fits");
}

#[tokio::test]
async fn limiter_errors_come_through_from_rate_limited() {
    let (limiter, _clock) = manual_limiter();
    // An empty key is invalid input: the limiter's Err, not a denial.
    let result = fetch(&limiter, "").await;
    let limited = result.as_ref().err().and_then(ApiError::limited);
    assert!(limited.is_some_and(|l| !l.is_denied()), "{result:?}");
    assert_eq!(limited.and_then(RateLimited::error).map(slidegate::Error::kind), Some(ErrorKind::InvalidKey));
    assert_eq!(
        result.err().map(|e| e.to_string()).as_deref(),
        Some("rate limit check failed: invalid key: key must not be empty")
    );
    // So is a cost of 0.
    let free = export(&limiter, 0).await;
    let kind = free.as_ref().err().and_then(ApiError::limited).and_then(RateLimited::error).map(|e| e.kind());
    assert_eq!(kind, Some(ErrorKind::InvalidCost), "{free:?}");
    // A cost no window could ever admit is a denial, as on every edge.
    let too_costly = export(&limiter, 11).await;
    let decision = too_costly.as_ref().err().and_then(ApiError::limited).and_then(RateLimited::decision);
    assert_eq!(
        decision.map(|d| (d.allowed, d.source)),
        Some((false, Source::CostAboveLimit)),
        "{too_costly:?}"
    );
}

static LIMITER: LazyLock<Limiter<MemoryStore>> = LazyLock::new(Limiter::in_memory);

/// A named rule defined once, shared by the attribute and direct checks.
static LOGIN_RULE: LazyLock<Rule> =
    LazyLock::new(|| Rule::new(3, Duration::from_secs(60)).and_then(|r| r.named("login")).unwrap());

/// The limiter is a `static` `LazyLock`, here given by reference.
#[rate_limit(limiter = &LIMITER, rule = LOGIN_RULE, key = user)]
async fn login(user: &str) -> Result<(), ApiError> {
    Ok(())
}

#[tokio::test]
async fn a_named_rule_shares_its_state_with_direct_checks() {
    assert!(login("mallory").await.is_ok());
    // The same rule checked directly counts against the same quota.
    assert!(LIMITER.check(&LOGIN_RULE, "mallory").await.is_ok_and(|d| d.remaining == 1));
    assert!(login("mallory").await.is_ok());
    assert!(is_denied(&login("mallory").await));
    assert!(login("trent").await.is_ok());
}

/// A rule given by value, built on each call (cheap for an unnamed rule),
/// and the static limiter given by name.
#[rate_limit(limiter = LIMITER, rule = Rule::per_second(NonZeroU32::MIN), key = format!("report-{id}"))]
async fn report(id: u32) -> Result<u32, ApiError> {
    Ok(id)
}

#[tokio::test]
async fn a_rule_given_by_value() {
    assert_eq!(report(1).await.ok(), Some(1));
    assert!(is_denied(&report(1).await));
    assert!(report(2).await.is_ok());
}

#[rate_limit(limiter = limiter, limit = 1, window = "1h", key = "k")]
async fn derived_a(limiter: &Limiter<MemoryStore>) -> Result<(), ApiError> {
    Ok(())
}

#[rate_limit(limiter = limiter, limit = 1, window = "1h", key = "k")]
async fn derived_b(limiter: &Limiter<MemoryStore>) -> Result<(), ApiError> {
    Ok(())
}

#[rate_limit(limiter = limiter, limit = 1, window = "1h", algorithm = "gcra", name = "shared.quota", key = "k")]
async fn explicitly_named(limiter: &Limiter<MemoryStore>) -> Result<(), ApiError> {
    Ok(())
}

#[tokio::test]
async fn inline_rules_are_named_after_their_function() {
    let (limiter, _clock) = manual_limiter();
    assert!(derived_a(&limiter).await.is_ok());
    assert!(derived_b(&limiter).await.is_ok(), "each function has its own state");
    assert!(is_denied(&derived_a(&limiter).await));
    // The default name is `<module path>.<function>`, here the test crate's root.
    let rule = Rule::new(1, Duration::from_secs(3600)).unwrap().named("free_functions.derived_b").unwrap();
    let direct = limiter.check(&rule, "k").await;
    assert!(direct.is_ok_and(|d| !d.allowed), "derived_b's state is under its derived name");

    assert!(explicitly_named(&limiter).await.is_ok());
    let gcra = Rule::new(1, Duration::from_secs(3600)).unwrap();
    let gcra = gcra.with_algorithm(slidegate::Algorithm::Gcra).unwrap().named("shared.quota").unwrap();
    let direct = limiter.check(&gcra, "k").await;
    assert!(direct.is_ok_and(|d| !d.allowed), "name = \"…\" keys the state");
}

/// Generic over the store, with a boxed error type: `RateLimited` is a
/// `std::error::Error + Send + Sync`, so `?` boxes it.
#[rate_limit(limiter = limiter, limit = 1, window = "500ms", algorithm = "counter", key = id)]
async fn generic<S: Store>(
    limiter: &Limiter<S>,
    id: u64,
) -> Result<u64, Box<dyn std::error::Error + Send + Sync>> {
    Ok(id)
}

#[tokio::test]
async fn generic_stores_integer_keys_and_boxed_errors() {
    let (limiter, clock) = manual_limiter();
    assert_eq!(generic(&limiter, 42).await.ok(), Some(42));
    let error = generic(&limiter, 42).await.err();
    assert!(
        error.as_ref().is_some_and(|e| e.downcast_ref::<RateLimited>().is_some_and(RateLimited::is_denied))
    );
    assert!(generic(&limiter, 43).await.is_ok());
    clock.advance(Duration::from_millis(550));
    assert!(generic(&limiter, 42).await.is_ok());
}

#[test]
fn guarded_futures_stay_send() {
    fn assert_send<T: Send>(_: &T) {}
    let limiter = Limiter::in_memory();
    assert_send(&fetch(&limiter, "x"));
    assert_send(&per_tenant(&limiter, String::new(), String::new()));
    assert_send(&login("x"));
    assert_send(&generic(&limiter, 1));
}
