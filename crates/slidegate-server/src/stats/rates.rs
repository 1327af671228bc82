//! Admitted and limited requests per second over the last five minutes,
//! per limit: a ring of one slot per second, lock-free (a few relaxed
//! atomics per decision), so recording costs next to nothing.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Seconds the ring covers.
pub const SECONDS: usize = 300;

/// One limit's per-second counts.
#[derive(Debug)]
pub struct Rates {
    /// Per slot: the second it counts (`u64::MAX`: none yet).
    seconds: Box<[AtomicU64]>,
    admitted: Box<[AtomicU32]>,
    limited: Box<[AtomicU32]>,
}

impl Default for Rates {
    fn default() -> Rates {
        Rates {
            seconds: (0..SECONDS).map(|_| AtomicU64::new(u64::MAX)).collect(),
            admitted: (0..SECONDS).map(|_| AtomicU32::new(0)).collect(),
            limited: (0..SECONDS).map(|_| AtomicU32::new(0)).collect(),
        }
    }
}

impl Rates {
    /// Counts one decision made in second `now_s` (of any epoch).
    pub fn record(&self, now_s: u64, admitted: bool) {
        let slot = slot(now_s);
        let held = self.seconds[slot].load(Ordering::Relaxed);
        if held != now_s
            && self.seconds[slot].compare_exchange(held, now_s, Ordering::Relaxed, Ordering::Relaxed).is_ok()
        {
            // This second takes the slot over. A count racing the reset
            // may be lost or kept: a display, not an account.
            self.admitted[slot].store(0, Ordering::Relaxed);
            self.limited[slot].store(0, Ordering::Relaxed);
        }
        let counter = if admitted { &self.admitted[slot] } else { &self.limited[slot] };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// `(admitted, limited)` for each of the `SECONDS` seconds up to and
    /// including `now_s` (oldest first; seconds without decisions are zero).
    pub fn series(&self, now_s: u64) -> (Vec<u32>, Vec<u32>) {
        let mut admitted = Vec::with_capacity(SECONDS);
        let mut limited = Vec::with_capacity(SECONDS);
        for back in (0..SECONDS as u64).rev() {
            let Some(second) = now_s.checked_sub(back) else {
                admitted.push(0);
                limited.push(0);
                continue;
            };
            let slot = slot(second);
            let here = self.seconds[slot].load(Ordering::Relaxed) == second;
            admitted.push(if here { self.admitted[slot].load(Ordering::Relaxed) } else { 0 });
            limited.push(if here { self.limited[slot].load(Ordering::Relaxed) } else { 0 });
        }
        (admitted, limited)
    }
}

fn slot(second: u64) -> usize {
    usize::try_from(second % SECONDS as u64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_second_and_forgets_after_five_minutes() {
        let rates = Rates::default();
        for _ in 0..3 {
            rates.record(1000, true);
        }
        rates.record(1000, false);
        rates.record(1002, false);
        let (admitted, limited) = rates.series(1002);
        assert_eq!(admitted.len(), SECONDS);
        assert_eq!((admitted[SECONDS - 3], limited[SECONDS - 3]), (3, 1), "second 1000");
        assert_eq!((admitted[SECONDS - 1], limited[SECONDS - 1]), (0, 1), "second 1002, now");
        // Five minutes later the slot of second 1000 holds second 1300.
        rates.record(1300, true);
        let (admitted, limited) = rates.series(1300);
        assert_eq!(admitted.iter().sum::<u32>(), 1);
        assert_eq!(limited.iter().sum::<u32>(), 1, "second 1002 is still in the window");
    }
}
