//! What a rules directory may hold, as a clumsy operator or an attacker
//! fills it: a FIFO, links that lead nowhere, in a circle or to a device,
//! a file name that is not UTF-8 — each refused by name (or shown), never
//! a hang, never rules dropped in silence; and one reload per change, not
//! a reload reacting to its own reads.

#![cfg(unix)]

mod support;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use slidegate::MemoryStore;
use slidegate_server::ServiceStore;
use support::{Service, http, post_json, start_at, write};

const ADMIN_TOKEN: &str = "an-admin-token-for-the-rules";

/// A domain `r`: 3 per minute per user.
const RULES: &str = "domain: r\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: minute\n      requests_per_unit: 3\n";

/// How long anything here may take; a hang fails the test instead of the run.
const HANG_GUARD: Duration = Duration::from_secs(20);

/// A service on a rules directory holding `r.yaml` (`RULES`), with an
/// admin token; the directory is `service.rules`.
async fn service(watch: bool) -> Service {
    let dir = tempfile::tempdir().expect("temp dir");
    let rules = dir.path().join("rules");
    std::fs::create_dir(&rules).expect("rules dir");
    write(&rules.join("r.yaml"), RULES);
    service_at(dir, rules, watch).await
}

/// Once it answers: its rules are loaded (changes made after that are
/// the reload's to see).
async fn service_at(dir: tempfile::TempDir, rules: PathBuf, watch: bool) -> Service {
    let service = unstarted(dir, rules, watch).await;
    status(&service).await;
    service
}

async fn unstarted(dir: tempfile::TempDir, rules: PathBuf, watch: bool) -> Service {
    start_at(dir, rules, ServiceStore::Memory(MemoryStore::new()), |config| {
        config.admin_token = Some(ADMIN_TOKEN.into());
        config.watch = watch;
    })
    .await
}

async fn status(service: &Service) -> Value {
    let (code, _, text) = http("GET", &service.url("/v1/status"), Vec::new(), &[]).await;
    assert_eq!(code, 200, "{text}");
    serde_json::from_str(&text).expect("status JSON")
}

/// `POST /v1/reload`: its status and answer, within [`HANG_GUARD`].
async fn reload(service: &Service) -> (u16, Value) {
    let bearer = format!("Bearer {ADMIN_TOKEN}");
    let (url, headers) = (service.url("/v1/reload"), [("authorization", bearer.as_str())]);
    let asked = http("POST", &url, Vec::new(), &headers);
    let (code, _, text) = tokio::time::timeout(HANG_GUARD, asked).await.expect("the reload hung");
    (code, serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}")))
}

/// The remaining quota of user `who` after one more request, or `None` if
/// domain `r` limits nothing any more.
async fn spend(service: &Service, who: &str) -> Option<u64> {
    let body = json!({"domain": "r", "descriptors": [{"entries": [{"key": "user", "value": who}]}]});
    let (_, _, answer) = post_json(&service.url("/v1/check"), &body.to_string()).await;
    let descriptor = &answer["descriptors"][0];
    descriptor["limit"].is_object().then(|| descriptor["remaining"].as_u64().expect("remaining"))
}

/// Asserts that a reload is refused with an error naming `file` and
/// saying `what`, and that domain `r` still limits as before.
async fn refused_and_kept(service: &Service, file: &Path, what: &str) {
    let who = file.display().to_string();
    let before = spend(service, &who).await;
    let (code, answer) = reload(service).await;
    assert_eq!(code, 422, "{answer}");
    let errors = answer["errors"].as_array().expect("errors");
    assert!(
        errors
            .iter()
            .filter_map(Value::as_str)
            .any(|e| e.starts_with(&file.display().to_string()) && e.contains(what)),
        "no error names {} and says `{what}`: {answer}",
        file.display()
    );
    let after = spend(service, &who).await;
    assert!(before.is_some(), "domain `r` was limited");
    assert_eq!(after, before.map(|left| left - 1), "domain `r` is still limited, its counter kept");
}

fn mkfifo(path: &Path) {
    let made = std::process::Command::new("mkfifo").arg(path).status().expect("mkfifo");
    assert!(made.success(), "mkfifo {}", path.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_is_refused_and_reloads_go_on() {
    let service = service(false).await;
    let pipe = service.rules.join("pipe.yaml");
    mkfifo(&pipe);
    refused_and_kept(&service, &pipe, "FIFO").await;
    // Nothing is left hanging: once the FIFO is gone, the next reload runs.
    std::fs::remove_file(&pipe).expect("remove the FIFO");
    let (code, answer) = reload(&service).await;
    assert_eq!((code, &answer["result"]), (200, &json!("ok")), "{answer}");
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_at_start_stops_the_start() {
    let dir = tempfile::tempdir().expect("temp dir");
    let rules = dir.path().join("rules");
    std::fs::create_dir(&rules).expect("rules dir");
    write(&rules.join("r.yaml"), RULES);
    mkfifo(&rules.join("pipe.yaml"));
    let mut service = unstarted(dir, rules, true).await;
    let task = service.task.take().expect("the serve task");
    let ended = tokio::time::timeout(HANG_GUARD, task).await.expect("serve hung on the FIFO");
    let error = ended.expect("serve task").expect_err("a FIFO in the rules");
    assert!(error.to_string().contains("pipe.yaml") && error.to_string().contains("FIFO"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_whose_file_is_gone_keeps_the_rules() {
    let dir = tempfile::tempdir().expect("temp dir");
    let rules = dir.path().join("rules");
    std::fs::create_dir(&rules).expect("rules dir");
    let target = dir.path().join("real-r.yaml");
    write(&target, RULES);
    symlink(&target, rules.join("r.yaml")).expect("link");
    let service = service_at(dir, rules.clone(), false).await;
    assert_eq!(spend(&service, "u").await, Some(2));
    std::fs::remove_file(&target).expect("remove the link's file");
    refused_and_kept(&service, &rules.join("r.yaml"), "cannot read").await;
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn links_in_a_circle_are_refused_by_name() {
    let service = service(false).await;
    let looped = service.rules.join("loop.yaml");
    symlink("loop.yaml", &looped).expect("link to itself");
    refused_and_kept(&service, &looped, "cannot read").await;
    std::fs::remove_file(&looped).expect("remove");
    // A link to the directory it lies in.
    let up = service.rules.join("up");
    symlink(".", &up).expect("link to the directory");
    refused_and_kept(&service, &up, "a link to a directory it lies in").await;
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_to_a_device_is_refused_without_reading_it() {
    let service = service(false).await;
    let zero = service.rules.join("zero.yaml");
    symlink("/dev/zero", &zero).expect("link to /dev/zero");
    refused_and_kept(&service, &zero, "a device").await;
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_name_that_is_not_utf8_is_shown_as_text() {
    let dir = tempfile::tempdir().expect("temp dir");
    let rules = dir.path().join("rules");
    std::fs::create_dir(&rules).expect("rules dir");
    let name = rules.join(OsStr::from_bytes(b"\xff\xfe.yaml"));
    write(&name, RULES);
    let service = service_at(dir, rules.clone(), false).await;
    let shown = format!("{}/\u{fffd}\u{fffd}.yaml", rules.display());
    assert_eq!(status(&service).await["config"]["files"], json!([shown]));
    for path in ["/v1/rules", "/v1/stats", "/"] {
        let (code, _, text) = http("GET", &service.url(path), Vec::new(), &[]).await;
        assert_eq!(code, 200, "{path}: {text}");
        if path != "/" {
            assert!(text.contains("\u{fffd}\u{fffd}.yaml"), "{path}: {text}");
        }
    }
    assert_eq!(spend(&service, "u").await, Some(2), "its rules are in force");
    service.stop().await;
}

/// Waits until `/v1/status` counts `n` reloads.
async fn reloads_reach(service: &Service, n: u64) {
    support::eventually(&format!("{n} reloads"), async || status(service).await["reloads"] == n).await;
}

/// Asserts that the count of reloads stays at `n` for a second and a half
/// (it climbed several times a second when reloads reacted to themselves).
async fn reloads_stay_at(service: &Service, n: u64) {
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(status(service).await["reloads"], n, "reloads went on with nothing changed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_change_is_one_reload() {
    let service = service(true).await;
    assert_eq!(status(&service).await["reloads"], 0);
    // An appended line: one reload, and none after it.
    let file = service.rules.join("r.yaml");
    std::fs::write(&file, format!("{RULES}# changed\n")).expect("append");
    reloads_reach(&service, 1).await;
    reloads_stay_at(&service, 1).await;
    // A file that holds no rules, beside the rules: nothing to reload.
    write(&service.rules.join("notes.txt"), "not rules");
    reloads_stay_at(&service, 1).await;
    // One asked for: one.
    let (code, answer) = reload(&service).await;
    assert_eq!((code, &answer["changed"]), (200, &json!(false)), "{answer}");
    reloads_stay_at(&service, 2).await;
    service.stop().await;
}
