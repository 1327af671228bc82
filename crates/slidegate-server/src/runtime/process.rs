//! What a reload does to its own thread and the process's memory while it
//! runs — the lowest priority, new memory in small pages — and freeing a
//! replaced configuration on a thread of its own. The priority and the
//! pages are process-wide knobs: off unless the program opts in
//! ([`tune`], `ServerConfig::tune_process`; `slidegate serve` does).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::config::Config;

/// Whether reloads lower their thread's priority and turn huge pages off.
static TUNED: AtomicBool = AtomicBool::new(false);

/// Lets reloads lower their thread's priority and turn the process's
/// transparent huge pages off while they run (see [`in_background`]).
pub(crate) fn tune(on: bool) {
    TUNED.store(on, Ordering::Relaxed);
}

fn tuned() -> bool {
    TUNED.load(Ordering::Relaxed)
}

/// The nice value of a reload's thread: the lowest priority. A reload of
/// 10,000 descriptors is a few hundred milliseconds of CPU; at normal
/// priority it took half of a busy core from the runtime for that long,
/// and the decisions queued behind it (p99 50× its usual value in the
/// benchmark). At 19 it runs on what the decisions leave idle, however long
/// that takes; only a core saturated by decisions slows it much.
const RELOAD_NICE: i32 = 19;

/// Runs `work` on a thread of its own at [`RELOAD_NICE`] (threads it starts,
/// such as the rules parser's, inherit the priority), with the process's
/// new memory in small pages meanwhile ([`SmallPages`]).
pub(crate) async fn in_background<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    let (answer, answered) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("slidegate-reload".into())
        .spawn(move || {
            let _small = tuned().then(|| {
                lower_priority();
                SmallPages::start()
            });
            let _ = answer.send(work());
        })
        .map_err(|e| format!("cannot start the reload: {e}"))?;
    answered.await.map_err(|_| "the reload failed".to_owned())
}

#[cfg(target_os = "linux")]
fn lower_priority() {
    // On Linux a thread id names one thread to setpriority(PRIO_PROCESS).
    if let Err(e) = rustix::process::setpriority_process(Some(rustix::thread::gettid()), RELOAD_NICE) {
        tracing::debug!(target: "slidegate", error = %e, "reload runs at normal priority");
    }
}

#[cfg(not(target_os = "linux"))]
fn lower_priority() {}

/// While a reload runs, the process's transparent huge pages are off (on
/// Linux, unless they were off already): a reload allocates its new
/// configuration from fresh memory, and with huge pages each first touch
/// of 2 MiB had the kernel clear it all — a third of a 10,000-descriptor
/// reload's CPU — while the decisions around it stalled. By hand
/// (docs/benchmark-notes.md, "2026-11-25: matching measured on the rule
/// table alone; huge pages off during a reload"), the p99 of a reload's second
/// under load was 3.7–7.2 ms (median 6.4) with huge pages, 3.0–3.5 ms
/// with this switch. Off for good, decisions cost 2–4 % more, so they
/// come back once the reload is over (memory the reload took keeps its
/// small pages).
struct SmallPages;

/// Reloads running, and whether they turned huge pages off (to turn them
/// back on when the last ends).
static SMALL_PAGES: std::sync::Mutex<(u32, bool)> = std::sync::Mutex::new((0, false));

impl SmallPages {
    fn start() -> SmallPages {
        let mut state = SMALL_PAGES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if state.0 == 0 {
            state.1 = huge_pages_off();
        }
        state.0 += 1;
        SmallPages
    }
}

impl Drop for SmallPages {
    fn drop(&mut self) {
        let mut state = SMALL_PAGES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        state.0 = state.0.saturating_sub(1);
        if state.0 == 0 && std::mem::take(&mut state.1) {
            huge_pages_on();
        }
    }
}

/// Turns the process's transparent huge pages off; whether this did (not
/// when they were off already, or the kernel has no such switch).
#[cfg(target_os = "linux")]
fn huge_pages_off() -> bool {
    matches!(rustix::thread::transparent_huge_pages_are_disabled(), Ok(false))
        && rustix::thread::disable_transparent_huge_pages(true).is_ok()
}

#[cfg(target_os = "linux")]
fn huge_pages_on() {
    let _ = rustix::thread::disable_transparent_huge_pages(false);
}

#[cfg(not(target_os = "linux"))]
fn huge_pages_off() -> bool {
    false
}

#[cfg(not(target_os = "linux"))]
fn huge_pages_on() {}

/// How long a replaced configuration waits for the requests that still
/// hold it before it is freed anyway.
const RETIRE_WAIT: Duration = Duration::from_secs(10);

/// Frees a replaced configuration on a low-priority thread of its own,
/// once the requests in flight on it have finished. Freeing 10,000
/// descriptors takes milliseconds; on a runtime thread, the decisions
/// queued there would wait for it.
pub(crate) fn retire(config: Arc<Config>) {
    let started = std::time::Instant::now();
    let spawned = std::thread::Builder::new().name("slidegate-retire".into()).spawn(move || {
        if tuned() {
            lower_priority();
        }
        while Arc::strong_count(&config) > 1 && started.elapsed() < RETIRE_WAIT {
            std::thread::sleep(Duration::from_millis(10));
        }
        drop(config);
    });
    if let Err(e) = spawned {
        // Dropped here with the closure: freed on this thread instead.
        tracing::debug!(target: "slidegate", error = %e, "the replaced rules are freed in place");
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn own_nice() -> i32 {
        rustix::process::getpriority_process(Some(rustix::thread::gettid())).unwrap()
    }

    #[tokio::test]
    async fn a_reload_and_the_threads_it_starts_run_at_the_lowest_priority() {
        tune(true);
        let before = own_nice();
        let (reload, parser) = in_background(|| {
            let parser = std::thread::spawn(own_nice).join().unwrap();
            (own_nice(), parser)
        })
        .await
        .unwrap();
        assert_eq!((reload, parser), (RELOAD_NICE, RELOAD_NICE));
        assert_eq!(own_nice(), before, "the caller's priority is its own");
    }

    #[test]
    fn a_replaced_configuration_is_freed_once_its_last_request_lets_go() {
        let config = Arc::new(Config::default());
        let freed = Arc::downgrade(&config);
        let in_flight = Arc::clone(&config);
        retire(config);
        std::thread::sleep(Duration::from_millis(50));
        assert!(freed.upgrade().is_some(), "a request still holds it");
        drop(in_flight);
        let started = std::time::Instant::now();
        while freed.upgrade().is_some() {
            assert!(started.elapsed() < Duration::from_secs(5), "never freed");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// A reload runs with the process's transparent huge pages off, and
    /// they come back once it is over.
    #[tokio::test]
    async fn a_reload_takes_small_pages_and_gives_huge_ones_back() {
        tune(true);
        let off = || rustix::thread::transparent_huge_pages_are_disabled().ok();
        let Some(before) = off() else { return }; // no such switch here
        let during = in_background(off).await.unwrap();
        assert_eq!(during, Some(true), "huge pages stayed on during the reload");
        // Other tests' reloads may hold them off a moment longer.
        let started = std::time::Instant::now();
        while off() != Some(before) {
            assert!(started.elapsed() < Duration::from_secs(5), "huge pages not given back");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[tokio::test]
    async fn a_failed_reload_is_an_error_not_a_hang() {
        let failed = in_background(|| -> u8 { panic!("parser bug") }).await;
        assert_eq!(failed, Err("the reload failed".to_owned()));
    }
}
