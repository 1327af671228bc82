//! Watching the configuration: the rules file or directory, the gateway
//! file and its TLS certificates, through their directories (editors,
//! ConfigMaps and certificate renewals replace files by rename); and
//! `SIGHUP`. Either reloads (see [`Reloader`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::RecursiveMode;
use notify_debouncer_full::{DebounceEventResult, new_debouncer};
use tokio::sync::mpsc;

use super::reload::Reloader;

/// How long file events settle before a reload: editors write a file in
/// several steps, and a ConfigMap update is several renames.
const SETTLE: Duration = Duration::from_millis(200);

/// How often the files are looked at without an event when there is a
/// gateway: a certificate renewed where no watch sees it (a directory
/// named by a reload, a mount that sends no events) is taken within this.
const CERTIFICATES_LOOKED_AT_EVERY: Duration = Duration::from_secs(10);

impl Reloader {
    /// Watches the rules path and the gateway file until the returned
    /// guard is dropped, and reloads on every settled change.
    ///
    /// # Errors
    ///
    /// When the watch cannot be set up.
    pub(crate) fn watch(&self) -> Result<Watch, notify::Error> {
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
        let mut watched = Vec::new();
        if let Some(path) = self.gateway_path() {
            watched.push(parent(path));
        }
        // The gateway's certificates, where they lie now; a reload that
        // names others in other directories is met by the periodic look.
        let certificates = self.certificate_files();
        for file in &certificates {
            let dir = parent(file);
            if !watched.contains(&dir) {
                watched.push(dir);
            }
        }
        for dir in &watched {
            debouncer.watch(dir, RecursiveMode::NonRecursive)?;
        }
        let reloader = self.clone();
        let look_every = self.gateway_path().is_some().then_some(CERTIFICATES_LOOKED_AT_EVERY);
        let task = tokio::spawn(async move {
            loop {
                let event = async {
                    match look_every {
                        Some(every) => tokio::time::timeout(every, changed.recv()).await.unwrap_or(Some(())),
                        None => changed.recv().await,
                    }
                };
                if event.await.is_none() {
                    return;
                }
                let _ = reloader.reload_if_changed().await;
            }
        });
        Ok(Watch { _debouncer: Box::new(debouncer), task })
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
pub(crate) struct Watch {
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

/// Reloads on `SIGHUP` (Unix).
pub(crate) fn hangup_task(reloader: Reloader) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let Ok(mut hangups) = signal(SignalKind::hangup()) else { return };
            while hangups.recv().await.is_some() {
                tracing::info!(target: "slidegate", "SIGHUP: reloading the rules");
                let _ = reloader.reload().await;
            }
        }
        #[cfg(not(unix))]
        drop(reloader);
    })
}
