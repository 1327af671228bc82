//! The status page driven like a person drives it: Debian's chromium,
//! headless, steered over the Chrome DevTools Protocol (a small client
//! here, over tokio-tungstenite), against a live service with traffic
//! flowing. The admin section: hidden until a token is entered; a wrong
//! token is refused and changes nothing; the right one resets a blocked
//! user's counters and reloads the rules (with the watcher off, so only
//! the click can have), and a broken file is refused on the page; an
//! action that cannot reach the service says so. And a gateway's routes,
//! with their rates, and a screenshot of it under target/.
//!
//! Every wait is bounded (a bound on hangs, never a timing assertion).

mod support;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use slidegate::MemoryStore;
use slidegate_server::{Listeners, ServerConfig, ServiceStore, serve};
use slidegate_testkit::Upstream;
use support::{Service, http, post_json, start_with};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;

/// How long chromium may take to start and print its DevTools address.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// How long one DevTools command may take to be answered.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the page may take to show what a test waits for (it polls
/// the service every 2 s).
const WAIT: Duration = Duration::from_secs(15);

const TOKEN: &str = "the-right-admin-token-0123456789";
const WRONG_TOKEN: &str = "a-wrong-admin-token-9876543210";

// ---------------------------------------------------------------------------
// A minimal Chrome DevTools Protocol client.

/// A headless chromium process; killed when dropped.
struct Chromium {
    child: Child,
    /// What it wrote on its standard error (for failure messages).
    log: Arc<Mutex<Vec<String>>>,
    _profile: tempfile::TempDir,
}

impl Chromium {
    /// Starts chromium; returns it and the browser's DevTools WebSocket URL.
    async fn start() -> (Chromium, String) {
        let profile = tempfile::tempdir().expect("profile dir");
        let mut child = Command::new(support::chromium())
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--remote-debugging-port=0",
                "--window-size=1280,1000",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start chromium");
        let stderr = child.stderr.take().expect("chromium's stderr");
        let log = Arc::new(Mutex::new(Vec::new()));
        let (found, url) = tokio::sync::oneshot::channel::<String>();
        // Reads stderr to its end (chromium must never block on a full pipe).
        std::thread::spawn({
            let log = log.clone();
            move || {
                let mut found = Some(found);
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    if let Some(at) = line.find("DevTools listening on ") {
                        let url = line[at + "DevTools listening on ".len()..].trim().to_owned();
                        if let Some(found) = found.take() {
                            let _ = found.send(url);
                        }
                    }
                    log.lock().expect("log").push(line);
                }
            }
        });
        let chromium = Chromium { child, log, _profile: profile };
        match tokio::time::timeout(START_TIMEOUT, url).await {
            Ok(Ok(url)) => (chromium, url),
            Ok(Err(_)) => panic!("chromium ended without a DevTools address:\n{}", chromium.log()),
            Err(_) => panic!("no DevTools address from chromium in {START_TIMEOUT:?}:\n{}", chromium.log()),
        }
    }

    fn log(&self) -> String {
        self.log.lock().expect("log").join("\n")
    }
}

impl Drop for Chromium {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// One page (tab) of a chromium of its own, attached with a flat session.
struct Page {
    socket: Socket,
    session: String,
    next_id: u64,
    chromium: Chromium,
}

impl Page {
    /// Starts chromium and opens `url` in a new tab.
    async fn open(url: &str) -> Page {
        let (chromium, browser) = Chromium::start().await;
        let (socket, _) = tokio::time::timeout(COMMAND_TIMEOUT, tokio_tungstenite::connect_async(&browser))
            .await
            .expect("connecting to DevTools in time")
            .unwrap_or_else(|e| panic!("connect to {browser}: {e}"));
        let mut page = Page { socket, session: String::new(), next_id: 0, chromium };
        let target = page.browser_call("Target.createTarget", json!({ "url": url })).await;
        let target = target["targetId"].as_str().expect("targetId").to_owned();
        let attached =
            page.browser_call("Target.attachToTarget", json!({ "targetId": target, "flatten": true })).await;
        page.session = attached["sessionId"].as_str().expect("sessionId").to_owned();
        page
    }

    /// Sends `method` (to the page's session, or to the browser if
    /// `session` is false); its result, or the protocol's error. Events
    /// and answers to other commands are skipped.
    async fn send(&mut self, method: &str, params: Value, session: bool) -> Result<Value, String> {
        self.next_id += 1;
        let id = self.next_id;
        let mut command = json!({ "id": id, "method": method, "params": params });
        if session {
            command["sessionId"] = Value::from(self.session.clone());
        }
        self.socket.send(Message::text(command.to_string())).await.expect("send to DevTools");
        let answer = tokio::time::timeout(COMMAND_TIMEOUT, async {
            loop {
                match self.socket.next().await {
                    Some(Ok(Message::Text(text))) => {
                        let message: Value = serde_json::from_str(&text).expect("DevTools JSON");
                        if message["id"].as_u64() == Some(id) {
                            return message;
                        }
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => panic!("DevTools connection failed: {e}"),
                    None => panic!("DevTools connection closed"),
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no answer to {method} in {COMMAND_TIMEOUT:?}:\n{}", self.chromium.log()));
        match answer.get("error") {
            Some(error) => Err(format!("{method}: {error}")),
            None => Ok(answer["result"].clone()),
        }
    }

    async fn browser_call(&mut self, method: &str, params: Value) -> Value {
        self.send(method, params, false).await.unwrap_or_else(|e| panic!("{e}"))
    }

    async fn call(&mut self, method: &str, params: Value) -> Value {
        self.send(method, params, true).await.unwrap_or_else(|e| panic!("{e}"))
    }

    /// Evaluates `expression` in the page (promises awaited); its value as
    /// JSON, or why it failed.
    async fn try_eval(&mut self, expression: &str) -> Result<Value, String> {
        let params = json!({ "expression": expression, "awaitPromise": true, "returnByValue": true });
        let result = self.send("Runtime.evaluate", params, true).await?;
        if let Some(exception) = result.get("exceptionDetails") {
            let description = exception["exception"]["description"].as_str().unwrap_or("");
            return Err(format!("{expression}: {} {description}", exception["text"]));
        }
        Ok(result["result"].get("value").cloned().unwrap_or(Value::Null))
    }

    async fn eval(&mut self, expression: &str) -> Value {
        self.try_eval(expression).await.unwrap_or_else(|e| panic!("{e}"))
    }

    /// Waits (at most [`WAIT`]) until `condition`, a JS expression, holds.
    async fn wait_for(&mut self, what: &str, condition: &str) {
        let deadline = Instant::now() + WAIT;
        let expression = format!("Boolean({condition})");
        let mut last = Ok(Value::Null);
        while Instant::now() < deadline {
            // Errors (the page still loading) are retried.
            last = self.try_eval(&expression).await;
            if last == Ok(Value::Bool(true)) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let state = self.try_eval(STATE).await;
        panic!("timed out waiting for {what} ({condition}): last {last:?}; the page: {state:?}");
    }

    /// Clicks the element `selector` names, with the mouse, at its centre:
    /// it must be shown (a hidden button cannot be clicked).
    async fn click(&mut self, selector: &str) {
        let point = self
            .eval(&format!(
                "(() => {{
                   const element = document.querySelector({selector});
                   if (!element || !element.checkVisibility()) return null;
                   element.scrollIntoView({{ block: 'center' }});
                   const r = element.getBoundingClientRect();
                   const x = r.left + r.width / 2, y = r.top + r.height / 2;
                   const hit = document.elementFromPoint(x, y);
                   return {{ x, y, hit: hit === element || element.contains(hit) }};
                 }})()",
                selector = Value::from(selector)
            ))
            .await;
        assert!(point.is_object(), "{selector} is shown, so it can be clicked");
        assert_eq!(point["hit"], true, "{selector} is on top where it is clicked");
        let (x, y) = (point["x"].clone(), point["y"].clone());
        self.call("Input.dispatchMouseEvent", json!({ "type": "mouseMoved", "x": x, "y": y })).await;
        for kind in ["mousePressed", "mouseReleased"] {
            let event = json!({ "type": kind, "x": x, "y": y, "button": "left", "clickCount": 1 });
            self.call("Input.dispatchMouseEvent", event).await;
        }
    }

    /// Types `text` into the (emptied) input `selector`, as a keyboard would.
    async fn type_into(&mut self, selector: &str, text: &str) {
        let selector_js = Value::from(selector);
        self.click(selector).await;
        self.eval(&format!(
            "(() => {{ const input = document.querySelector({selector_js}); input.focus(); input.select(); }})()"
        ))
        .await;
        self.call("Input.insertText", json!({ "text": text })).await;
        let value = self.eval(&format!("document.querySelector({selector_js}).value")).await;
        assert_eq!(value, text, "{selector} holds what was typed");
    }

    /// The text of the element `selector` names.
    async fn text(&mut self, selector: &str) -> String {
        let value =
            self.eval(&format!("document.querySelector({}).textContent", Value::from(selector))).await;
        value.as_str().unwrap_or_else(|| panic!("no {selector}: {value}")).to_owned()
    }

    /// The whole page as a PNG.
    async fn screenshot(&mut self) -> Vec<u8> {
        let metrics = self.call("Page.getLayoutMetrics", json!({})).await;
        let size = &metrics["cssContentSize"];
        let clip = json!({ "x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1 });
        let shot = self
            .call(
                "Page.captureScreenshot",
                json!({ "format": "png", "clip": clip, "captureBeyondViewport": true }),
            )
            .await;
        base64_decode(shot["data"].as_str().expect("screenshot data"))
    }
}

/// What the page shows of itself, for failure messages.
const STATE: &str = "JSON.stringify({
  loaded: document.body && document.body.dataset.loaded,
  updated: document.getElementById('updated')?.textContent,
  adminResult: document.getElementById('admin-result')?.textContent,
  configHash: document.getElementById('config-hash')?.textContent,
  gateway: document.getElementById('routes')?.innerText,
})";

fn base64_decode(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text.bytes() {
        let value = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => break,
            _ => panic!("not base64: {c}"),
        };
        acc = (acc << 6) | u32::from(value);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(u8::try_from((acc >> bits) & 0xff).expect("a byte"));
            acc &= (1 << bits) - 1;
        }
    }
    out
}

/// Where a screenshot goes: `$CARGO_TARGET_DIR`, or the workspace's target/.
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"))
}

// ---------------------------------------------------------------------------
// Traffic.

/// Sends requests in the background until dropped.
struct Traffic {
    running: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Traffic {
    /// `send` every 100 ms.
    fn start<F>(send: impl Fn() -> F + Send + 'static) -> Traffic
    where
        F: Future<Output = ()> + Send,
    {
        let running = Arc::new(AtomicBool::new(true));
        let task = tokio::spawn({
            let running = running.clone();
            async move {
                while running.load(Ordering::Relaxed) {
                    send().await;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        });
        Traffic { running, task }
    }
}

impl Drop for Traffic {
    fn drop(&mut self) {
        self.running.store(false, Ordering::Relaxed);
        self.task.abort();
    }
}

// ---------------------------------------------------------------------------
// The admin section.

/// Two an hour per user: a blocked user stays blocked for the whole test
/// unless reset.
const RULES: &str = "domain: api
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 2 }
";

/// The same with five an hour.
const RULES_FIVE: &str = "domain: api
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 5 }
";

fn check_body(user: &str) -> String {
    json!({ "domain": "api", "descriptors": [{ "entries": [{ "key": "user", "value": user }] }] }).to_string()
}

/// The `user` limit and the hash `/v1/rules` shows.
async fn rules_in_force(service: &Service) -> (Value, String) {
    let (status, _, text) = http("GET", &service.url("/v1/rules"), Vec::new(), &[]).await;
    assert_eq!(status, 200, "{text}");
    let rules: Value = serde_json::from_str(&text).expect("rules JSON");
    let descriptors = rules["domains"][0]["descriptors"].as_array().expect("descriptors");
    let user = descriptors.iter().find(|d| d["key"] == "user").expect("the user descriptor");
    (user["limits"][0].clone(), rules["hash"].as_str().expect("hash").to_owned())
}

/// Empties `#admin-result`, so that the next answer is told from the last.
async fn clear_result(page: &mut Page) {
    page.eval("document.getElementById('admin-result').textContent = ''").await;
}

/// Waits for an answer in `#admin-result`; its status and body.
async fn admin_result(page: &mut Page) -> (u16, String) {
    page.wait_for("an answer in #admin-result", "document.getElementById('admin-result').textContent !== ''")
        .await;
    let text = page.text("#admin-result").await;
    let (status, body) = text.split_once(' ').unwrap_or_else(|| panic!("status and body: {text:?}"));
    (status.parse().unwrap_or_else(|_| panic!("a status first: {text:?}")), body.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_actions_need_the_right_token_and_reset_and_reload_from_the_page() {
    let service = start_with(RULES, ServiceStore::Memory(MemoryStore::new()), |c| {
        c.admin_token = Some(TOKEN.into());
        // Only the page's click may reload.
        c.watch = false;
    })
    .await;
    let check = service.url("/v1/check");
    // Traffic flowing: alice, all along (blocked after two).
    let _traffic = Traffic::start({
        let check = check.clone();
        move || {
            let check = check.clone();
            async move {
                post_json(&check, &check_body("alice")).await;
            }
        }
    });
    // Bob is blocked.
    for _ in 0..2 {
        assert_eq!(post_json(&check, &check_body("bob")).await.0, 200);
    }
    let (status, _, answer) = post_json(&check, &check_body("bob")).await;
    assert_eq!((status, &answer["allowed"]), (429, &json!(false)), "bob is over the limit: {answer}");
    let (limit, old_hash) = rules_in_force(&service).await;
    assert_eq!(limit["requests_per_unit"], 2);

    let mut page = Page::open(&service.url("/")).await;
    page.wait_for("the page drawn from /v1/stats", "document.body.dataset.loaded === 'true'").await;
    page.wait_for(
        "the user limit's row",
        "document.querySelector('#limits tr[data-key=\"api.user\"] td:nth-child(4)')?.textContent === '2'",
    )
    .await;

    // Before a token: no admin actions.
    let hidden = page
        .eval(
            "document.getElementById('admin-actions').hidden
               && !document.getElementById('reload').checkVisibility()
               && !document.getElementById('reset-form').checkVisibility()",
        )
        .await;
    assert_eq!(hidden, true, "no admin actions before a token is entered");
    assert_eq!(page.eval("document.getElementById('token').checkVisibility()").await, true);

    // A new rules file on disk; nothing reloads it but the button.
    support::write(&service.rules, RULES_FIVE);

    // A wrong token: the actions show (the service decides), and are refused.
    page.type_into("#token", WRONG_TOKEN).await;
    page.click("#token-form button[type=submit]").await;
    page.wait_for("the admin actions", "document.getElementById('reload').checkVisibility()").await;
    assert_eq!(page.eval("document.getElementById('reset-form').checkVisibility()").await, true);
    clear_result(&mut page).await;
    page.click("#reload").await;
    let (status, body) = admin_result(&mut page).await;
    assert!(status == 401 || status == 403, "a wrong token is refused: {status} {body}");
    page.type_into("#reset-domain", "api").await;
    page.type_into("#reset-key", "user").await;
    page.type_into("#reset-value", "bob").await;
    clear_result(&mut page).await;
    page.click("#reset-form button[type=submit]").await;
    let (status, body) = admin_result(&mut page).await;
    assert!(status == 401 || status == 403, "a wrong token is refused: {status} {body}");
    // Nothing changed.
    let (limit, hash) = rules_in_force(&service).await;
    assert_eq!((&limit["requests_per_unit"], &hash), (&json!(2), &old_hash), "no reload");
    let (status, _, answer) = post_json(&service.url("/v1/peek"), &check_body("bob")).await;
    assert_eq!(status, 429, "bob is still blocked: {answer}");

    // The right token.
    page.type_into("#token", TOKEN).await;
    page.click("#token-form button[type=submit]").await;
    page.wait_for("the admin actions", "document.getElementById('reload').checkVisibility()").await;

    // a. Reset bob from the page.
    page.type_into("#reset-domain", "api").await;
    page.type_into("#reset-key", "user").await;
    page.type_into("#reset-value", "bob").await;
    clear_result(&mut page).await;
    page.click("#reset-form button[type=submit]").await;
    let (status, body) = admin_result(&mut page).await;
    assert_eq!(status, 200, "the reset is done: {body}");
    let answer: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("JSON answer: {e}: {body}"));
    assert_eq!((&answer["result"], &answer["reset"]), (&json!("ok"), &json!(1)), "{answer}");
    let (status, _, answer) = post_json(&check, &check_body("bob")).await;
    assert_eq!(
        (status, answer["descriptors"][0]["remaining"].as_u64()),
        (200, Some(1)),
        "bob has a full quota again: {answer}"
    );
    let (status, _, answer) = post_json(&service.url("/v1/peek"), &check_body("alice")).await;
    assert_eq!(status, 429, "alice keeps her count: {answer}");

    // b. Reload from the page.
    clear_result(&mut page).await;
    page.click("#reload").await;
    let (status, body) = admin_result(&mut page).await;
    assert_eq!(status, 200, "the reload is done: {body}");
    let answer: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("JSON answer: {e}: {body}"));
    assert_eq!((&answer["result"], &answer["changed"]), (&json!("ok"), &json!(true)), "{answer}");
    let (limit, new_hash) = rules_in_force(&service).await;
    assert_eq!(limit["requests_per_unit"], 5, "the new limit is in force");
    assert_ne!(new_hash, old_hash);
    assert_eq!(answer["config_hash"], new_hash.as_str());
    // The page shows the new configuration.
    page.wait_for(
        "the new hash and limit on the page",
        &format!(
            "document.getElementById('config-hash').textContent === {}
               && document.querySelector('#limits tr[data-key=\"api.user\"] td:nth-child(4)')?.textContent === '5'
               && document.getElementById('config-reload').textContent.startsWith('ok')",
            Value::from(new_hash.as_str())
        ),
    )
    .await;

    // A broken file: the page shows the refusal, the rules in force stay.
    support::write(
        &service.rules,
        "domain: api\ndescriptors:\n  - key: user\n    rate_limit: { unit: fortnight }\n",
    );
    clear_result(&mut page).await;
    page.click("#reload").await;
    let (status, body) = admin_result(&mut page).await;
    assert_eq!(status, 422, "a broken file is refused: {body}");
    assert!(body.contains("fortnight"), "the problem is named: {body}");
    let (limit, hash) = rules_in_force(&service).await;
    assert_eq!((&limit["requests_per_unit"], &hash), (&json!(5), &new_hash), "the rules in force stay");
    page.wait_for(
        "the refused reload on the page",
        "document.getElementById('config-reload').className === 'bad'
           && document.getElementById('config-reload').textContent.startsWith('error')
           && document.getElementById('config-reload').textContent.includes('fortnight')",
    )
    .await;
    // And a banner at the top says the rules before it are in force.
    page.wait_for(
        "the failed reload's banner",
        "document.getElementById('reload-banner').checkVisibility()
           && document.getElementById('reload-banner').textContent.includes('still in force')
           && document.getElementById('reload-banner').textContent.includes('fortnight')",
    )
    .await;
    drop(page);
    service.stop().await;
}

/// An admin action whose request cannot even be sent (the service is
/// gone) must say so in `#admin-result`, not leave the last answer there:
/// an operator would read a reload that never happened as done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_action_that_cannot_reach_the_service_says_so() {
    let service = start_with(RULES, ServiceStore::Memory(MemoryStore::new()), |c| {
        c.admin_token = Some(TOKEN.into());
        c.watch = false;
    })
    .await;
    let mut page = Page::open(&service.url("/")).await;
    page.wait_for("the page drawn from /v1/stats", "document.body.dataset.loaded === 'true'").await;
    page.type_into("#token", TOKEN).await;
    page.click("#token-form button[type=submit]").await;
    clear_result(&mut page).await;
    page.click("#reload").await;
    let (status, body) = admin_result(&mut page).await;
    assert_eq!(status, 200, "{body}");
    let done = page.text("#admin-result").await;

    service.stop().await;
    page.wait_for(
        "the page noticing the service is gone",
        "document.getElementById('updated').textContent.startsWith('cannot reach the service')",
    )
    .await;
    page.click("#reload").await;
    page.wait_for(
        "#admin-result telling that the reload could not be sent (not the last answer)",
        &format!(
            "(t => t !== '' && t !== {done})(document.getElementById('admin-result').textContent)",
            done = Value::from(done.as_str())
        ),
    )
    .await;
    let text = page.text("#admin-result").await;
    assert!(!text.starts_with("200"), "no success shown for a reload that was not sent: {text}");
}

// ---------------------------------------------------------------------------
// A gateway's routes.

/// A gateway service on port 0, with its HTTP API.
struct Gateway {
    http: SocketAddr,
    proxy: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), slidegate_server::ServeError>>,
    _dir: tempfile::TempDir,
}

impl Gateway {
    async fn start(yaml: &str) -> Gateway {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("gateway.yaml");
        std::fs::write(&file, yaml).expect("write the gateway file");
        let mut config = ServerConfig::for_gateway(&file, ServiceStore::Memory(MemoryStore::new()));
        config.grace = Duration::from_secs(5);
        let http = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let proxy = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let (http_addr, proxy_addr) = (http.local_addr().expect("addr"), proxy.local_addr().expect("addr"));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(serve(config, Listeners::new(None, Some(http)).with_gateway(proxy), async {
            let _ = stopped.await;
        }));
        Gateway { http: http_addr, proxy: proxy_addr, stop: Some(stop), task, _dir: dir }
    }

    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        (&mut self.task).await.expect("serve task").expect("serve");
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// The path the upstream echoes in answer to `body` (an answer not its
/// echo: none).
fn echoed_path(body: &str) -> Option<String> {
    let echo: Value = serde_json::from_str(body).ok()?;
    echo["uri"].as_str().map(str::to_owned)
}

/// The sum of a route's series in `/v1/stats`.
fn total(stats: &Value, route: &str, series: &str) -> u64 {
    let routes = stats["gateway"]["routes"].as_array().expect("the gateway's routes");
    let route = routes.iter().find(|r| r["name"] == route).unwrap_or_else(|| panic!("route {route}"));
    route[series].as_array().expect("a series").iter().map(|v| v.as_u64().expect("a count")).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_a_gateways_routes_and_their_traffic() {
    let up = Upstream::start();
    let upstream = up.addr();
    let gateway = Gateway::start(&format!(
        "routes:
  - name: login
    path_prefix: /login
    upstreams: [http://{upstream}]
    limits:
      - {{ key: client_ip, requests_per_unit: 2, unit: hour }}
  - name: site
    path_prefix: /
    upstreams: [http://{upstream}]
"
    ))
    .await;
    let proxy = format!("http://{}", gateway.proxy);
    // Some admitted, some limited.
    let mut statuses = Vec::new();
    for _ in 0..5 {
        let (status, _, body) = http("GET", &format!("{proxy}/login"), Vec::new(), &[]).await;
        if status == 200 {
            assert_eq!(echoed_path(&body).as_deref(), Some("/login"), "the upstream answered: {body}");
        }
        statuses.push(status);
    }
    assert_eq!(statuses, [200, 200, 429, 429, 429], "two logins an hour");
    for path in ["/", "/about", "/about/team"] {
        let (status, _, body) = http("GET", &format!("{proxy}{path}"), Vec::new(), &[]).await;
        assert_eq!((status, echoed_path(&body).as_deref()), (200, Some(path)), "{path}: {body}");
    }
    // And traffic keeps flowing on both routes.
    let _traffic = Traffic::start({
        let proxy = proxy.clone();
        move || {
            let proxy = proxy.clone();
            async move {
                http("GET", &format!("{proxy}/login"), Vec::new(), &[]).await;
                http("GET", &format!("{proxy}/"), Vec::new(), &[]).await;
            }
        }
    });

    let stats_url = format!("http://{}/v1/stats", gateway.http);
    let (status, _, text) = http("GET", &stats_url, Vec::new(), &[]).await;
    assert_eq!(status, 200, "{text}");
    let stats: Value = serde_json::from_str(&text).expect("stats JSON");
    assert_eq!(total(&stats, "login", "admitted"), 2, "two logins an hour, whatever the traffic");
    assert!(total(&stats, "login", "limited") >= 3);
    assert!(total(&stats, "site", "admitted") >= 3);
    assert_eq!(total(&stats, "site", "limited"), 0, "the site has no limit");

    let mut page = Page::open(&format!("http://{}/", gateway.http)).await;
    page.wait_for("the page drawn from /v1/stats", "document.body.dataset.loaded === 'true'").await;
    page.wait_for(
        "the gateway section",
        "!document.getElementById('gateway-section').hidden
           && document.getElementById('gateway-section').checkVisibility()",
    )
    .await;
    let routes = page
        .eval("[...document.querySelectorAll('#routes tbody tr')].map(r => [r.dataset.route, r.cells[0].textContent])")
        .await;
    assert_eq!(routes, json!([["login", "login"], ["site", "site"]]), "one row per route, in order");
    let login = page.text("#routes tr[data-route=login] td:nth-child(6)").await;
    assert!(login.contains("(client_ip): 2 / 1 h"), "the login limit: {login}");
    assert_eq!(page.text("#routes tr[data-route=site] td:nth-child(6)").await, "none");
    let upstreams = page.text("#routes tr[data-route=site] td:nth-child(5)").await;
    assert!(upstreams.contains(&upstream.to_string()), "{upstreams}");

    // The charts: admitted and limited logins, admitted pages, no limited pages.
    let moved = |route: &str, series: &str| {
        format!(
            "document.querySelector('#routes tr[data-route={route}] svg.spark polyline.{series}')
               .getAttribute('points').split(' ').some(p => Number(p.split(',')[1]) < 27)"
        )
    };
    page.wait_for(
        "the charts of the traffic",
        &format!(
            "{} && {} && {}",
            moved("login", "admitted"),
            moved("login", "limited"),
            moved("site", "admitted")
        ),
    )
    .await;
    assert_eq!(page.eval(&moved("site", "limited")).await, false, "nothing limited on the site");
    // The last second's counts, with traffic flowing.
    page.wait_for(
        "the last second's counts",
        "Number(document.querySelector('#routes tr[data-route=login] td.limited-now').textContent) > 0
           && Number(document.querySelector('#routes tr[data-route=site] td.admitted-now').textContent) > 0",
    )
    .await;

    // A screenshot a person can open.
    page.eval("document.getElementById('gateway-section').scrollIntoView()").await;
    let png = page.screenshot().await;
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG");
    assert!(png.len() > 10_000, "a real picture, {} bytes", png.len());
    let dir = target_dir();
    std::fs::create_dir_all(&dir).expect("target dir");
    std::fs::write(dir.join("status-page-gateway.png"), &png).expect("write the screenshot");
    drop(page);
    gateway.stop().await;
}
