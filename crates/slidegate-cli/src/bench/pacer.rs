//! The open loop's schedule (`slidegate bench --rate`): tickets released
//! as they fall due, by a thread of its own.
//!
//! tokio's timer has millisecond granularity: tasks sleeping until their
//! request is due all wake on the same millisecond tick, so the offered
//! load arrives as one burst per millisecond — a harsher load than the
//! rate asked for, whose queueing the latency figures would then show
//! (measured at 34,000/s against Redis: p50 745 µs). The pacer wakes every
//! [`PACE`] instead and releases the tickets due by then.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use tokio::sync::Semaphore;

/// How often the pacer releases the tickets fallen due.
const PACE: Duration = Duration::from_micros(100);

/// A backlog of released tickets beyond this is not added to (far more
/// than any run can consume; the semaphore's own bound is 2^61).
const MAX_BACKLOG: usize = 1 << 40;

/// Releases one permit per ticket fallen due: ticket `n` (counting from 0)
/// is due `n / rate` after the start. Stops when dropped.
pub(crate) struct Pacer {
    permits: Arc<Semaphore>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Pacer {
    /// Starts releasing the tickets of `rate` per second from `started`.
    pub(crate) fn start(rate: f64, started: Instant) -> anyhow::Result<Pacer> {
        let permits = Arc::new(Semaphore::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (permits, stop) = (Arc::clone(&permits), Arc::clone(&stop));
            std::thread::Builder::new()
                .name("slidegate-pacer".into())
                .spawn(move || release(&permits, &stop, rate, started))
                .context("cannot start the open loop's pacer thread")?
        };
        Ok(Pacer { permits, stop, thread: Some(thread) })
    }

    /// Waits until a ticket is released. Returns whether one was already
    /// waiting (the caller is late: its request was due before it asked).
    pub(crate) async fn next(&self) -> bool {
        if let Ok(permit) = self.permits.try_acquire() {
            permit.forget();
            return true;
        }
        // The semaphore is never closed while the pacer lives.
        if let Ok(permit) = self.permits.acquire().await {
            permit.forget();
        }
        false
    }
}

fn release(permits: &Semaphore, stop: &AtomicBool, rate: f64, started: Instant) {
    let mut released = 0u64;
    while !stop.load(Relaxed) {
        // Tickets 0 ..= floor(elapsed × rate) are due.
        let due = (started.elapsed().as_secs_f64() * rate) as u64 + 1;
        if due > released && permits.available_permits() < MAX_BACKLOG {
            permits.add_permits(usize::try_from(due - released).unwrap_or(MAX_BACKLOG).min(MAX_BACKLOG));
            released = due;
        }
        std::thread::sleep(PACE);
    }
}

impl Drop for Pacer {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn releases_tickets_as_they_fall_due() {
        let started = Instant::now();
        let pacer = Pacer::start(1000.0, started).unwrap();
        // Ticket 0 is due at once; ticket 20 not before 20 ms.
        for _ in 0..=20 {
            pacer.next().await;
        }
        assert!(started.elapsed() >= Duration::from_millis(20), "{:?}", started.elapsed());
        // After a pause, the tickets fallen due meanwhile are waiting.
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert!(pacer.next().await, "a ticket due during the pause is already released");
    }
}
