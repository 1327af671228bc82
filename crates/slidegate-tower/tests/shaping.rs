//! Shaping (`RateLimitLayer::delay`): requests over the limit wait for
//! their exact turn instead of a 429 — each let through no earlier than
//! the sliding window allows, and soon after; those that cannot fit in the
//! delay answered 429 at once; a request dropped while it waits charged
//! nothing; the layer's waiting requests bounded.
#![cfg(feature = "axum")] // run by scripts/test with --all-features

use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use http::{Request, StatusCode};
use slidegate::{Limiter, Rule};
use slidegate_tower::{Global, RateLimitLayer};
use tower::ServiceExt;

fn per_second(n: u32) -> Rule {
    Rule::per_second(NonZeroU32::new(n).unwrap()).named("shaped").unwrap()
}

fn app(layer: RateLimitLayer<slidegate::MemoryStore>) -> Router {
    Router::new().route("/", get(|| async { "hello" })).layer(layer)
}

fn request() -> Request<Body> {
    Request::get("/").body(Body::empty()).unwrap()
}

/// Sends `n` requests at once; each one's status and when it was answered
/// (after the start).
async fn burst(app: &Router, n: usize) -> Vec<(StatusCode, Duration)> {
    let started = Instant::now();
    let sent: Vec<_> = (0..n)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move {
                let response = app.oneshot(request()).await.unwrap();
                (response.status(), started.elapsed())
            })
        })
        .collect();
    let mut answers = Vec::with_capacity(n);
    for answer in sent {
        answers.push(answer.await.unwrap());
    }
    answers
}

/// The sliding window's promise, checked on admission times: no more
/// than `limit` in any `window`.
fn at_most_per_window(admitted: &[Duration], limit: usize, window: Duration) {
    for (i, later) in admitted.iter().enumerate().skip(limit) {
        let earlier = admitted[i - limit];
        assert!(
            *later >= earlier + window,
            "admissions {} and {i} within one window: {admitted:?}",
            i - limit
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_at_once_through_five_a_second_all_pass_each_on_its_turn() {
    let layer =
        RateLimitLayer::new(Limiter::in_memory()).rule(per_second(5), Global).delay(Duration::from_secs(3));
    let answers = burst(&app(layer), 20).await;
    assert!(answers.iter().all(|(status, _)| *status == StatusCode::OK), "{answers:?}");
    let mut admitted: Vec<Duration> = answers.iter().map(|(_, at)| *at).collect();
    admitted.sort();
    // The window's own measure: answers come after admissions, so a pair
    // is at least the window apart less the spread of the first's answer.
    let slack = Duration::from_millis(1);
    at_most_per_window(
        &admitted.iter().map(|a| a.saturating_sub(slack)).collect::<Vec<_>>(),
        5,
        Duration::from_millis(998),
    );
    // And each no later than its turn, give or take the scheduler: the
    // i-th at floor(i / 5) seconds.
    let lateness: Vec<Duration> = admitted
        .iter()
        .enumerate()
        .map(|(i, at)| at.saturating_sub(Duration::from_secs(i as u64 / 5)))
        .collect();
    println!("lateness per admission: {lateness:?}");
    assert!(lateness.iter().all(|late| *late < Duration::from_millis(250)), "{lateness:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn those_that_cannot_fit_in_the_delay_get_429_at_once() {
    let layer =
        RateLimitLayer::new(Limiter::in_memory()).rule(per_second(5), Global).delay(Duration::from_secs(1));
    let answers = burst(&app(layer), 20).await;
    let ok: Vec<_> = answers.iter().filter(|(s, _)| *s == StatusCode::OK).collect();
    let refused: Vec<_> = answers.iter().filter(|(s, _)| *s == StatusCode::TOO_MANY_REQUESTS).collect();
    // 5 now, 5 more within the second; 10 refused, none after waiting.
    assert_eq!((ok.len(), refused.len()), (10, 10), "{answers:?}");
    assert!(refused.iter().all(|(_, at)| *at < Duration::from_millis(500)), "refused at once: {refused:?}");
    assert_eq!(
        ok.iter().filter(|(_, at)| *at >= Duration::from_millis(990)).count(),
        5,
        "five waited: {ok:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_dropped_while_it_waits_is_charged_nothing() {
    let window = Duration::from_secs(2);
    let rule = Rule::new(5, window).and_then(|r| r.named("two-seconds")).unwrap();
    let layer = RateLimitLayer::new(Limiter::in_memory()).rule(rule, Global).delay(Duration::from_secs(3));
    let app = app(layer);
    let answers = burst(&app, 5).await;
    assert!(answers.iter().all(|(status, _)| *status == StatusCode::OK));
    // A sixth waits for its turn (in 2 s), and its client goes at 200 ms.
    let waiting = tokio::spawn({
        let app = app.clone();
        async move { app.oneshot(request()).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    waiting.abort();
    // Once the window has slid past the five (at 2 s), and before a
    // charge made when it was dropped (0.2 s) would have left it (2.2 s),
    // five more fit: the dropped one was charged nothing.
    tokio::time::sleep(window - Duration::from_millis(100)).await;
    let layer_free = burst(&app, 5).await;
    assert!(
        layer_free.iter().all(|(status, at)| *status == StatusCode::OK && *at < Duration::from_millis(500)),
        "{layer_free:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_layer_holds_at_most_ten_thousand_waiting() {
    // One a minute, a minute's delay, a burst allowing all: only the
    // layer's bound (10,000 by default) stops them.
    let rule = Rule::per_minute(NonZeroU32::new(1).unwrap()).named("slow").unwrap();
    let layer = RateLimitLayer::new(Limiter::in_memory()).rule(rule.clone(), Global).delay_rule(
        &rule,
        Duration::from_secs(60),
        Some(1_000_000),
    );
    let app = app(layer);
    let rss = || {
        std::fs::read_to_string("/proc/self/statm")
            .ok()
            .and_then(|s| s.split(' ').nth(1)?.parse::<u64>().ok())
    };
    let before = rss();
    let sent: Vec<_> = (0..10_500)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move { app.oneshot(request()).await.unwrap().status() })
        })
        .collect();
    // One admitted and 499 refused at once; the other 10,000 wait.
    for _ in 0..200 {
        if sent.iter().filter(|task| task.is_finished()).count() >= 500 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (finished, waiting): (Vec<_>, Vec<_>) = sent.into_iter().partition(|task| task.is_finished());
    assert_eq!((finished.len(), waiting.len()), (500, 10_000));
    let mut statuses = Vec::new();
    for task in finished {
        statuses.push(task.await.unwrap());
    }
    assert_eq!(statuses.iter().filter(|s| **s == StatusCode::OK).count(), 1);
    assert_eq!(statuses.iter().filter(|s| **s == StatusCode::TOO_MANY_REQUESTS).count(), 499);
    if let (Some(before), Some(after)) = (before, rss()) {
        // Pages of 4 KiB: what 10,000 waiting requests hold, reported.
        println!("resident growth with 10,000 waiting: {} KiB", after.saturating_sub(before) * 4);
    }
    for task in waiting {
        task.abort();
    }
}
