//! `bench --pid`: another process's CPU time and memory, from `/proc`.

use std::time::Duration;

use anyhow::Context as _;
use serde::Serialize;

/// A process's CPU time so far.
#[derive(Debug, Clone)]
pub(crate) struct CpuSample {
    pid: u32,
    name: String,
    cpu: Duration,
}

/// What a process used during the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessReport {
    /// Its id.
    pub pid: u32,
    /// Its command name (`/proc/PID/comm`).
    pub name: String,
    /// CPU time (user and system, all threads) during the run, in seconds.
    pub cpu_secs: f64,
    /// That time per decision the run made, in microseconds.
    pub cpu_us_per_decision: f64,
    /// Its share of one core during the run.
    pub cpu_share: f64,
    /// Resident memory at the end (`VmRSS`), in bytes.
    pub rss_bytes: u64,
    /// Peak resident memory so far (`VmHWM`), in bytes.
    pub peak_rss_bytes: u64,
}

/// Clock ticks per second of `/proc/PID/stat`'s times: Linux's `USER_HZ`,
/// 100 on every architecture slidegate runs on (whatever the kernel's own
/// tick rate).
const USER_HZ: f64 = 100.0;

impl CpuSample {
    /// `pid`'s CPU time now.
    ///
    /// # Errors
    ///
    /// No such process, or a `/proc` this parser does not understand.
    pub(crate) fn take(pid: u32) -> anyhow::Result<CpuSample> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .with_context(|| format!("--pid {pid}: no such process (cannot read /proc/{pid}/stat)"))?;
        // `pid (comm) state …`: comm may hold spaces and parentheses, so
        // the fields start after the last `)`.
        let (head, fields) =
            stat.rsplit_once(')').with_context(|| format!("/proc/{pid}/stat is not understood"))?;
        let name = head.split_once('(').map_or("", |(_, name)| name).to_owned();
        let fields: Vec<&str> = fields.split_whitespace().collect();
        // Fields 14 and 15 (utime, stime), counting from 1 with pid and
        // comm as 1 and 2: the 12th and 13th after comm.
        let ticks = |i: usize| -> anyhow::Result<u64> {
            fields
                .get(i)
                .and_then(|f| f.parse().ok())
                .with_context(|| format!("/proc/{pid}/stat has no CPU times"))
        };
        let total = ticks(11)? + ticks(12)?;
        Ok(CpuSample { pid, name, cpu: Duration::from_secs_f64(total as f64 / USER_HZ) })
    }

    /// What the process used since this sample, over `elapsed` and `decisions`.
    ///
    /// # Errors
    ///
    /// The process is gone.
    pub(crate) fn report(&self, elapsed: Duration, decisions: u64) -> anyhow::Result<ProcessReport> {
        let now = CpuSample::take(self.pid)?;
        let cpu = now.cpu.saturating_sub(self.cpu).as_secs_f64();
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid))
            .with_context(|| format!("cannot read /proc/{}/status", self.pid))?;
        let kib = |field: &str| {
            status
                .lines()
                .find_map(|line| line.strip_prefix(field))
                .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .map_or(0, |kib| kib * 1024)
        };
        Ok(ProcessReport {
            pid: self.pid,
            name: self.name.clone(),
            cpu_secs: cpu,
            cpu_us_per_decision: if decisions > 0 { cpu * 1e6 / decisions as f64 } else { 0.0 },
            cpu_share: if elapsed.is_zero() { 0.0 } else { cpu / elapsed.as_secs_f64() },
            rss_bytes: kib("VmRSS:"),
            peak_rss_bytes: kib("VmHWM:"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        let before = CpuSample::take(std::process::id()).unwrap();
        // Burn a little CPU so the time moves past one tick.
        let mut x = 0u64;
        let started = std::time::Instant::now();
        while started.elapsed() < Duration::from_millis(50) {
            x = x.wrapping_mul(31).wrapping_add(1);
        }
        std::hint::black_box(x);
        let report = before.report(started.elapsed(), 1000).unwrap();
        assert!(report.cpu_secs > 0.0, "{report:?}");
        assert!(report.rss_bytes > 0 && report.peak_rss_bytes >= report.rss_bytes, "{report:?}");
        assert!(!report.name.is_empty());
        assert!(CpuSample::take(u32::MAX).unwrap_err().to_string().contains("no such process"));
    }
}
