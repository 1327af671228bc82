//! Hot reload: the rules file or directory, and the gateway file, are watched; a write, a rename
//! or a Kubernetes ConfigMap's symlink swap (`..data`) reloads it, as do
//! `SIGHUP` and `POST /v1/reload`.
//!
//! A reload builds the whole new configuration first and swaps it in
//! atomically; a bad file never unloads the good configuration: the error
//! is logged, counted and shown in `/v1/status`. Limits whose identity is
//! unchanged keep their counters (they are keyed by what they are, not by
//! when they were loaded).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::RecursiveMode;
use notify_debouncer_full::{DebounceEventResult, new_debouncer};
use tokio::sync::mpsc;

use crate::config::{Config, ConfigError, ConfigErrors, GatewayConfig, Rules, Stamps};
use crate::gateway::Gateway;
use crate::status::ServiceStatus;
use crate::telemetry;

/// How long file events settle before a reload: editors write a file in
/// several steps, and a ConfigMap update is several renames.
const SETTLE: Duration = Duration::from_millis(200);

/// The longest a reload may take. Files are read only if regular, and
/// with bounds, so only a file system that stops answering (a hung
/// network mount) gets here; the reload fails then, and the next one may
/// run.
const RELOAD_TIMEOUT: Duration = Duration::from_secs(60);

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
async fn in_background<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T, String> {
    let (answer, answered) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("slidegate-reload".into())
        .spawn(move || {
            lower_priority();
            let _small = SmallPages::start();
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

/// Reloads the rules, and the gateway's routes, from their paths.
#[derive(Clone)]
pub struct Reloader {
    rules: Rules,
    path: Option<PathBuf>,
    gateway: Option<(Gateway, PathBuf)>,
    status: Arc<ServiceStatus>,
    /// One reload at a time (file events, signals and the API may race);
    /// it holds what the files looked like when the last one read them,
    /// so that file events that changed none of them reload nothing.
    last_read: Arc<tokio::sync::Mutex<Option<Seen>>>,
}

/// What the files of a reload looked like when it read them: the rules'
/// and the gateway file's [`Stamps`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Seen(Option<Stamps>, Option<Stamps>);

impl Seen {
    /// The stamps of the files at `rules` and `gateway` now.
    pub(crate) fn now(rules: Option<&Path>, gateway: Option<&Path>) -> Seen {
        Seen(rules.map(Stamps::of), gateway.map(Stamps::of))
    }
}

impl std::fmt::Debug for Reloader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reloader")
            .field("rules", &self.path)
            .field("gateway", &self.gateway.as_ref().map(|(_, path)| path))
            .finish_non_exhaustive()
    }
}

impl Reloader {
    /// A reloader of `path` into `rules`, recording into `status`.
    pub fn new(rules: Rules, path: PathBuf, status: Arc<ServiceStatus>) -> Reloader {
        Reloader { rules, path: Some(path), gateway: None, status, last_read: Arc::default() }
    }

    /// A reloader of the rules at `path` (if any) and of the gateway file,
    /// whose files looked like `seen` when what is in force was read.
    pub(crate) fn with_gateway(
        rules: Rules,
        path: Option<PathBuf>,
        gateway: Option<(Gateway, PathBuf)>,
        status: Arc<ServiceStatus>,
        seen: Seen,
    ) -> Reloader {
        Reloader { rules, path, gateway, status, last_read: Arc::new(tokio::sync::Mutex::new(Some(seen))) }
    }

    /// The rules path, if the service has rules.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The gateway file, if the service is a gateway.
    pub fn gateway_path(&self) -> Option<&Path> {
        self.gateway.as_ref().map(|(_, path)| path.as_path())
    }

    /// Loads the rules and the gateway file again; puts them in force if
    /// both are valid and either differs from what is in force. One bad
    /// file changes nothing.
    ///
    /// # Errors
    ///
    /// The new configuration's problems; the one in force stays.
    pub async fn reload(&self) -> Result<bool, ConfigErrors> {
        let mut last_read = self.last_read.lock().await;
        self.reload_locked(&mut last_read).await
    }

    /// [`reload`](Self::reload)s unless none of the files changed since
    /// the last reload read them (what a file event reacts to: the
    /// reload's own reads, or a write to another file beside them, are
    /// events too); `Ok(false)` then.
    ///
    /// # Errors
    ///
    /// As [`reload`](Self::reload).
    pub(crate) async fn reload_if_changed(&self) -> Result<bool, ConfigErrors> {
        let mut last_read = self.last_read.lock().await;
        let (rules, gateway) = (self.path.clone(), self.gateway_path().map(Path::to_owned));
        let now = tokio::task::spawn_blocking(move || Seen::now(rules.as_deref(), gateway.as_deref())).await;
        if now.is_ok_and(|now| last_read.as_ref() == Some(&now)) {
            return Ok(false);
        }
        self.reload_locked(&mut last_read).await
    }

    async fn reload_locked(&self, last_read: &mut Option<Seen>) -> Result<bool, ConfigErrors> {
        let rules_path = self.path.clone();
        let gateway_path = self.gateway.as_ref().map(|(_, path)| path.clone());
        let previous = self.rules.current();
        let loaded = tokio::time::timeout(
            RELOAD_TIMEOUT,
            in_background(move || {
                // Before the files are read: a change while they are
                // read is a change the next event reloads.
                let seen = Seen::now(rules_path.as_deref(), gateway_path.as_deref());
                let rules = rules_path.map(|path| {
                    let config = Config::load(&path)?;
                    if config.hash() != previous.hash() {
                        config.adopt_rates(&previous);
                    }
                    Ok(config)
                });
                let gateway = gateway_path.map(|path| GatewayConfig::load(&path));
                (seen, rules, gateway)
            }),
        )
        .await
        .unwrap_or_else(|_| Err(format!("the files were not read within {RELOAD_TIMEOUT:?}")));
        let (rules, gateway) = match loaded {
            Ok((seen, rules, gateway)) => {
                *last_read = Some(seen);
                (rules, gateway)
            }
            Err(e) => {
                let at =
                    self.path.clone().or_else(|| self.gateway_path().map(Path::to_owned)).unwrap_or_default();
                (Some(Err(ConfigErrors(vec![ConfigError::whole(&at, e)]))), None)
            }
        };
        let mut errors = Vec::new();
        let rules = match rules {
            Some(Ok(config)) => Some(config),
            Some(Err(e)) => {
                errors.extend(e.0);
                None
            }
            None => None,
        };
        let table = match (gateway, &self.gateway) {
            (Some(Ok(config)), Some((gateway, _))) if config.hash != gateway.current().config.hash => {
                match gateway.build(config) {
                    Ok(table) => Some(table),
                    Err(e) => {
                        errors.extend(e.0);
                        None
                    }
                }
            }
            (Some(Err(e)), _) => {
                errors.extend(e.0);
                None
            }
            _ => None,
        };
        if !errors.is_empty() {
            let errors = ConfigErrors(errors);
            tracing::error!(target: "slidegate", %errors, "reload refused; the configuration in force stays");
            self.record(errors.errors().iter().map(ToString::to_string).collect());
            telemetry::reload(false);
            return Err(errors);
        }
        let mut changed = false;
        if let Some(config) = rules
            && config.hash() != self.rules.current().hash()
        {
            tracing::info!(target: "slidegate", hash = config.hash(), "rules reloaded");
            retire(self.rules.swap(config));
            changed = true;
        }
        if let (Some(table), Some((gateway, _))) = (table, &self.gateway) {
            tracing::info!(target: "slidegate", hash = table.config.hash, "gateway routes reloaded");
            gateway.install(table);
            changed = true;
        }
        self.record(Vec::new());
        telemetry::reload(true);
        Ok(changed)
    }

    fn record(&self, errors: Vec<String>) {
        let gateway_hash = self.gateway.as_ref().map(|(gateway, _)| gateway.current().config.hash.clone());
        self.status.record_reload(errors, self.rules.current().hash(), gateway_hash.as_deref());
    }

    /// Watches the rules path and the gateway file until the returned
    /// guard is dropped, and reloads on every settled change.
    ///
    /// # Errors
    ///
    /// When the watch cannot be set up.
    pub fn watch(&self) -> Result<Watch, notify::Error> {
        let (sender, mut changed) = mpsc::channel::<()>(1);
        let mut debouncer = new_debouncer(SETTLE, None, move |result: DebounceEventResult| {
            if matches!(&result, Ok(events) if events.iter().any(|event| may_change(event))) {
                let _ = sender.try_send(());
            }
        })?;
        // A file is watched through its directory: editors and ConfigMaps
        // replace files by rename, which a watch on the file itself misses.
        // A directory's subdirectories hold rules too; a file's directory
        // is watched alone (it may be the working directory, with a build
        // tree below).
        if let Some(path) = &self.path {
            if path.is_dir() {
                debouncer.watch(path, RecursiveMode::Recursive)?;
            } else {
                debouncer.watch(parent(path), RecursiveMode::NonRecursive)?;
            }
        }
        if let Some(path) = self.gateway_path() {
            debouncer.watch(parent(path), RecursiveMode::NonRecursive)?;
        }
        let reloader = self.clone();
        let task = tokio::spawn(async move {
            while changed.recv().await.is_some() {
                let _ = reloader.reload_if_changed().await;
            }
        });
        Ok(Watch { _debouncer: Box::new(debouncer), task })
    }
}

/// How long a replaced configuration waits for the requests that still
/// hold it before it is freed anyway.
const RETIRE_WAIT: Duration = Duration::from_secs(10);

/// Frees a replaced configuration on a low-priority thread of its own,
/// once the requests in flight on it have finished. Freeing 10,000
/// descriptors takes milliseconds; on a runtime thread, the decisions
/// queued there would wait for it.
fn retire(config: Arc<Config>) {
    let started = std::time::Instant::now();
    let spawned = std::thread::Builder::new().name("slidegate-retire".into()).spawn(move || {
        lower_priority();
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

/// Whether a file event may have changed what a reload reads: not one
/// of a file being opened, read or closed unwritten (the reload's own
/// reads are such events).
fn may_change(event: &notify::Event) -> bool {
    use notify::event::{AccessKind, AccessMode, EventKind};
    match event.kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    }
}

fn parent(file: &Path) -> PathBuf {
    match file.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
        _ => PathBuf::from("."),
    }
}

/// A running watch; dropping it stops watching.
pub struct Watch {
    _debouncer: Box<dyn std::any::Any + Send>,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Watch")
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.task.abort();
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
