//! [`SystemSignals`]: the machine's load, read from Linux `/proc`.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use super::signals::{Load, Signals};

/// Cumulative CPU time counters (clock ticks) from the `cpu` line of
/// `/proc/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CpuTimes {
    busy: u64,
    total: u64,
}

/// The load of the machine this process runs on, from Linux `/proc`: the
/// default [`Signals`] of adaptive limits.
///
/// * `cpu`: the busy fraction of all CPUs between two samples (from
///   `/proc/stat`; idle and I/O wait count as not busy). The constructor
///   takes the first reading, so the first [`sample`](Signals::sample)
///   already has a value.
/// * `memory`: `1 - MemAvailable / MemTotal` (from `/proc/meminfo`).
///
/// Both are machine-wide: in a container they describe the host, not the
/// container's cgroup limits (turn a signal off with
/// [`no_cpu`](super::config::AdaptiveConfigBuilder::no_cpu) /
/// [`no_memory`](super::config::AdaptiveConfigBuilder::no_memory), or inject your
/// own [`Signals`]). On other operating systems, or when a file cannot be
/// read or parsed, the field is `None`; sampling never panics.
#[derive(Debug)]
pub struct SystemSignals {
    stat: PathBuf,
    meminfo: PathBuf,
    /// The previous CPU reading, the start of the next busy fraction.
    previous: Mutex<Option<CpuTimes>>,
}

impl Default for SystemSignals {
    fn default() -> Self {
        SystemSignals::new()
    }
}

impl SystemSignals {
    /// Reads `/proc/stat` and `/proc/meminfo`, taking a first CPU reading now.
    pub fn new() -> SystemSignals {
        SystemSignals::with_paths("/proc/stat".into(), "/proc/meminfo".into())
    }

    fn with_paths(stat: PathBuf, meminfo: PathBuf) -> SystemSignals {
        let first = read_cpu(&stat);
        SystemSignals { stat, meminfo, previous: Mutex::new(first) }
    }
}

impl Signals for SystemSignals {
    fn sample(&self) -> Load {
        let now = read_cpu(&self.stat);
        let cpu = {
            // A poisoned lock holds a plain reading that is still valid.
            let mut previous = self.previous.lock().unwrap_or_else(PoisonError::into_inner);
            let before = std::mem::replace(&mut *previous, now);
            before.zip(now).and_then(|(before, now)| busy_fraction(before, now))
        };
        let memory = if cfg!(target_os = "linux") {
            std::fs::read_to_string(&self.meminfo).ok().and_then(|text| memory_used(&text))
        } else {
            None
        };
        Load { cpu, memory }
    }
}

/// The `cpu` line of `/proc/stat` (its first line; the file has one line
/// per CPU after it, so only the first is read).
fn read_cpu(path: &Path) -> Option<CpuTimes> {
    if !cfg!(target_os = "linux") {
        return None;
    }
    let mut line = String::new();
    std::io::BufReader::new(std::fs::File::open(path).ok()?).read_line(&mut line).ok()?;
    parse_cpu(&line)
}

/// `cpu  user nice system idle iowait irq softirq steal guest guest_nice`:
/// guest time is already part of user time, so the first eight are summed.
fn parse_cpu(line: &str) -> Option<CpuTimes> {
    let mut fields = line.split_whitespace();
    if fields.next()? != "cpu" {
        return None;
    }
    let ticks: Vec<u64> = fields.take(8).map(str::parse).collect::<Result<_, _>>().ok()?;
    if ticks.len() < 4 {
        return None;
    }
    let total = ticks.iter().try_fold(0u64, |sum, &t| sum.checked_add(t))?;
    let idle = ticks[3].saturating_add(ticks.get(4).copied().unwrap_or(0));
    Some(CpuTimes { busy: total.saturating_sub(idle), total })
}

/// The busy share of the time between two readings; `None` when no time
/// passed (or the counters went back, e.g. a CPU was unplugged).
fn busy_fraction(before: CpuTimes, now: CpuTimes) -> Option<f64> {
    let total = now.total.checked_sub(before.total).filter(|&t| t > 0)?;
    let busy = now.busy.saturating_sub(before.busy);
    Some((busy as f64 / total as f64).clamp(0.0, 1.0))
}

/// `1 - MemAvailable / MemTotal` from the text of `/proc/meminfo`.
fn memory_used(meminfo: &str) -> Option<f64> {
    let field = |name: &str| {
        meminfo.lines().find_map(|line| {
            let rest = line.strip_prefix(name)?.strip_prefix(':')?;
            rest.split_whitespace().next()?.parse::<u64>().ok()
        })
    };
    let total = field("MemTotal").filter(|&t| t > 0)?;
    let available = field("MemAvailable")?;
    Some((1.0 - available as f64 / total as f64).clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_cpu_line() {
        let times = parse_cpu("cpu  100 5 50 800 40 3 2 0 7 0\n").unwrap();
        assert_eq!(times, CpuTimes { busy: 160, total: 1000 });
        assert_eq!(parse_cpu("cpu 1 2 3 4").unwrap(), CpuTimes { busy: 6, total: 10 }, "old kernels");
        assert_eq!(parse_cpu("cpu0 1 2 3 4 5"), None, "a single CPU's line");
        assert_eq!(parse_cpu("cpu 1 2 x 4 5"), None);
        assert_eq!(parse_cpu("cpu 1 2"), None);
        assert_eq!(parse_cpu(""), None);
    }

    #[test]
    fn busy_fraction_between_readings() {
        let a = CpuTimes { busy: 100, total: 1000 };
        let b = CpuTimes { busy: 175, total: 1100 };
        assert_eq!(busy_fraction(a, b), Some(0.75));
        assert_eq!(busy_fraction(a, a), None, "no time passed");
        assert_eq!(busy_fraction(b, a), None, "counters went back");
    }

    #[test]
    fn parses_meminfo() {
        let text = "MemTotal:       1000 kB\nMemFree:         100 kB\nMemAvailable:    250 kB\n";
        assert_eq!(memory_used(text), Some(0.75));
        assert_eq!(memory_used("MemTotal: 0 kB\nMemAvailable: 0 kB\n"), None);
        assert_eq!(memory_used("MemTotal: 1000 kB\n"), None, "kernels before 3.14 lack MemAvailable");
        assert_eq!(memory_used("MemTotalX: 5 kB\nMemAvailable: 1 kB"), None);
    }

    #[test]
    fn unreadable_files_give_no_signal() {
        let signals = SystemSignals::with_paths("/nonexistent/stat".into(), "/nonexistent/meminfo".into());
        assert_eq!(signals.sample(), Load::default());
        assert_eq!(signals.sample(), Load::default());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn linux_samples_are_fractions() {
        let signals = SystemSignals::new();
        for _ in 0..2 {
            let load = signals.sample();
            // The busy fraction needs the tick counters to move between
            // readings, which is not guaranteed this quickly: only its range
            // is checked when present.
            assert!(load.cpu.is_none_or(|cpu| (0.0..=1.0).contains(&cpu)), "{load:?}");
            let memory = load.memory.expect("/proc/meminfo is readable on Linux");
            assert!((0.0..=1.0).contains(&memory), "{load:?}");
        }
    }
}
