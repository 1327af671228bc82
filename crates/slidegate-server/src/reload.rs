//! Hot reload: the rules file or directory is watched; a write, a rename
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

use crate::config::{Config, ConfigErrors, Rules};
use crate::status::ServiceStatus;
use crate::telemetry;

/// How long file events settle before a reload: editors write a file in
/// several steps, and a ConfigMap update is several renames.
const SETTLE: Duration = Duration::from_millis(200);

/// Reloads the rules from their path.
#[derive(Debug, Clone)]
pub struct Reloader {
    rules: Rules,
    path: PathBuf,
    status: Arc<ServiceStatus>,
    /// One reload at a time (file events, signals and the API may race).
    lock: Arc<tokio::sync::Mutex<()>>,
}

impl Reloader {
    /// A reloader of `path` into `rules`, recording into `status`.
    pub fn new(rules: Rules, path: PathBuf, status: Arc<ServiceStatus>) -> Reloader {
        Reloader { rules, path, status, lock: Arc::default() }
    }

    /// The rules path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Loads the rules again; puts them in force if they are valid and
    /// differ from those in force.
    ///
    /// # Errors
    ///
    /// The new configuration's problems; the one in force stays.
    pub async fn reload(&self) -> Result<bool, ConfigErrors> {
        let _one = self.lock.lock().await;
        let path = self.path.clone();
        let loaded = tokio::task::spawn_blocking(move || Config::load(&path)).await.unwrap_or_else(|e| {
            Err(ConfigErrors(vec![crate::config::ConfigError::whole(&self.path, e.to_string())]))
        });
        match loaded {
            Ok(config) => {
                let changed = config.hash() != self.rules.current().hash();
                let hash = config.hash().to_owned();
                if changed {
                    self.rules.replace(config);
                    tracing::info!(target: "slidegate", hash, "rules reloaded");
                }
                self.status.record_reload(Vec::new(), &hash);
                telemetry::reload(true);
                Ok(changed)
            }
            Err(errors) => {
                tracing::error!(target: "slidegate", %errors, "reload refused; the rules in force stay");
                self.status.record_reload(
                    errors.errors().iter().map(ToString::to_string).collect(),
                    self.rules.current().hash(),
                );
                telemetry::reload(false);
                Err(errors)
            }
        }
    }

    /// Watches the rules path until the returned guard is dropped, and
    /// reloads on every settled change.
    ///
    /// # Errors
    ///
    /// When the watch cannot be set up.
    pub fn watch(&self) -> Result<Watch, notify::Error> {
        let (sender, mut changed) = mpsc::channel::<()>(1);
        let mut debouncer = new_debouncer(SETTLE, None, move |result: DebounceEventResult| {
            if matches!(&result, Ok(events) if !events.is_empty()) {
                let _ = sender.try_send(());
            }
        })?;
        // A file is watched through its directory: editors and ConfigMaps
        // replace files by rename, which a watch on the file itself misses.
        // A directory's subdirectories hold rules too; a file's directory
        // is watched alone (it may be the working directory, with a build
        // tree below).
        if self.path.is_dir() {
            debouncer.watch(&self.path, RecursiveMode::Recursive)?;
        } else {
            debouncer.watch(parent(&self.path), RecursiveMode::NonRecursive)?;
        }
        let reloader = self.clone();
        let task = tokio::spawn(async move {
            while changed.recv().await.is_some() {
                let _ = reloader.reload().await;
            }
        });
        Ok(Watch { _debouncer: Box::new(debouncer), task })
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
